"""Policies that play with composed adapters, usable by rollout and eval like any local policy.

- `MixturePolicy`: the base model with the trained gates and their adapters
  (`trace_gym.moe.mixture`), routing every token top-1 as it generates.
- `RouterPolicy`: the task router picks one adapter per conversation after its first user
  message (`trace_gym.moe.router`), and the conversation is played with that adapter (or
  the base). Both are batched policies of the episode driver (`trace_gym.driver`): the
  conversations in flight that chose the same adapter generate together.

Both run locally. A vLLM server serves one adapter per request, so the task router is the
composition a server can serve: `ServedRouterPolicy` ("served_router") asks the server for
the routing decision (`choose_on_server`, on the base model) and plays the conversation on
the chosen adapter, which the server loads at runtime (`EndpointPolicy`'s `adapter`). The
token-level mixture needs the model's weights in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from trace_gym.agents.local import LocalModelPolicy
from trace_gym.driver import Live, Reply
from trace_gym.errors import InternalError
from trace_gym.jsondata import canonical_json
from trace_gym.provenance import dir_sha256


def _dtype(policy: LocalModelPolicy) -> str:
    """The dtype a policy loaded from a model directory runs in."""
    if policy.placement is None:  # only a policy over a model already in memory (`from_model`) has none
        raise InternalError(f"{policy.name}: no placement (the policy was not loaded from a model directory)")
    return policy.placement.dtype


class MixturePolicy(LocalModelPolicy):
    """A local model policy on the base model with the trained gates and their adapters,
    routing every token top-1 as it generates."""

    def __init__(self, model_path: str | os.PathLike, mixture: str | os.PathLike, **kwargs: Any) -> None:
        from trace_gym.moe.mixture import Mixture

        super().__init__(model_path, **kwargs)
        self.mixture_path = Path(mixture)
        self.mixture = Mixture.load(self.model, self.mixture_path)  # wraps the model's modules in place
        self.name = f"mixture:{Path(model_path).name}+{self.mixture_path.name}"
        self.model_path = Path(model_path)

    def fingerprint(self) -> dict[str, Any]:
        """What makes this policy's episodes what they are: the base model's, the mixture's
        and the adapters' hashes, the sampling settings, the seed and the dtype."""
        return {"name": "mixture", "model_sha256": dir_sha256(self.model_path),
                "mixture_sha256": dir_sha256(self.mixture_path),
                "adapters_sha256": [a["sha256"] for a in json.loads(
                    (self.mixture_path / "mixture.json").read_text())["adapters"]],
                "temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens,
                "seed": self.seed, "dtype": _dtype(self)}


class RouterPolicy:
    """One `LocalModelPolicy` per option over one shared peft model holding every adapter;
    each conversation is routed once and stays with its option (its cache too). A batched
    policy (`submit` / `collect` / `release`), usable one conversation at a time (`act`)."""

    def __init__(self, model_path: str | os.PathLike, adapters: Mapping[str, str | os.PathLike], **kwargs: Any) -> None:
        from peft import PeftModel

        from trace_gym.moe.router import TaskRouter, first_user_turn

        self.first_user_turn = first_user_turn
        self.model_path, self.adapters = Path(model_path), {k: Path(v) for k, v in adapters.items()}
        names = list(self.adapters)
        self.base = LocalModelPolicy(model_path, **kwargs)
        model = self.base.model
        peft = PeftModel.from_pretrained(model, str(self.adapters[names[0]]), adapter_name=names[0])
        for name in names[1:]:
            peft.load_adapter(str(self.adapters[name]), adapter_name=name)
        self.peft = peft.eval()
        self.router = TaskRouter(self.peft, self.base.tokenizer, names)
        self.options = ["base", *names]
        self.per_option = {"base": self.base}
        for name in names:  # the same weights; each option keeps its own caches
            self.per_option[name] = LocalModelPolicy.from_model(
                self.peft, self.base.tokenizer, name=f"{self.base.name}+{name}", temperature=self.base.temperature,
                top_p=self.base.top_p, max_new_tokens=self.base.max_new_tokens, seed=self.base.seed)
        self.decisions: dict[str, str] = {}
        self.chosen: dict[int, str] = {}
        """The option of each episode in flight (by the driver's key)."""
        self.waiting: dict[str, set[int]] = {option: set() for option in self.options}
        """Per option, the episodes whose turn it is producing."""
        self.name = f"router:{self.model_path.name}+{'+'.join(names)}"
        self.temperature, self.top_p, self.max_new_tokens = (self.base.temperature, self.base.top_p,
                                                             self.base.max_new_tokens)

    def route(self, messages: list[dict[str, Any]]) -> str:
        """The option of a conversation, chosen from its first user message (once per opening)."""
        key = canonical_json(self.first_user_turn(messages))
        if key not in self.decisions:
            self.decisions[key] = self.options[self.router.choose(self.first_user_turn(messages))]
        return self.decisions[key]

    @contextlib.contextmanager
    def _adapter(self, option: str) -> Iterator[None]:
        """The shared peft model running `option`: the base with every adapter off, or one adapter."""
        if option == "base":
            with self.peft.disable_adapter():
                yield
        else:
            self.peft.set_adapter(option)
            yield

    # -- the driver's batched interface --------------------------------------------------------

    def submit(self, live: Live) -> None:
        """Route the episode at its first turn, then hand every turn to its option's policy."""
        option = self.chosen.get(live.key)
        if option is None:
            option = self.chosen[live.key] = self.route(live.messages)
        self.waiting[option].add(live.key)
        self.per_option[option].submit(live)

    def collect(self) -> list[tuple[Live, Reply]]:
        """The ready turns of every option that has turns to produce, each generated under its
        own adapter (the options share the model's weights)."""
        out: list[tuple[Live, Reply]] = []
        for option, keys in self.waiting.items():
            if not keys:
                continue
            with self._adapter(option):
                ready = self.per_option[option].collect()
            for live, _ in ready:
                keys.discard(live.key)
            out += ready
        return out

    def release(self, live: Live) -> None:
        """Drop the episode's option, and release it from that option's policy."""
        option = self.chosen.pop(live.key, None)
        if option is not None:
            self.waiting[option].discard(live.key)
            self.per_option[option].release(live)

    # -- one conversation at a time -----------------------------------------------------------

    def bind(self, env: Any, seed: int = 0, sample: int = 0) -> None:
        """Bind every option's policy to the episode."""
        for policy in self.per_option.values():
            policy.bind(env, seed, sample)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        """The next turn, generated by the conversation's option under its adapter."""
        option = self.route(messages)
        with self._adapter(option):
            return self.per_option[option].act(messages, tools)

    def metadata(self) -> dict[str, Any]:
        """How the model runs here (the base policy's placement)."""
        return self.base.metadata()

    def fingerprint(self) -> dict[str, Any]:
        """What makes this policy's episodes what they are: the base model's and the
        adapters' hashes, the sampling settings, the seed and the dtype."""
        return {"name": "router", "model_sha256": dir_sha256(self.model_path),
                "adapters_sha256": {k: dir_sha256(v) for k, v in sorted(self.adapters.items())},
                "temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens,
                "seed": self.base.seed, "dtype": _dtype(self.base)}


class ServedRouterPolicy:
    """The task router on a vLLM server: the base model, as the server serves it, picks one
    option per conversation from its first user message, and each turn is an endpoint
    request to the chosen adapter (or the base). A turn-by-turn policy (the driver runs one
    instance per episode, in threads)."""

    def __init__(self, adapters: Mapping[str, str | os.PathLike], base_url: str | None = None, model: str | None = None,
                 **endpoint: Any) -> None:
        from trace_gym.agents.endpoint import EndpointPolicy
        from trace_gym.moe.router import first_user_turn, options

        self.first_user_turn = first_user_turn
        self.adapters = {k: Path(v) for k, v in adapters.items()}
        self.options = options(list(self.adapters))
        self.per_option = {"base": EndpointPolicy(base_url, model, **endpoint)}
        for name, path in self.adapters.items():
            self.per_option[name] = EndpointPolicy(base_url, model, adapter=path, **endpoint)
        base = self.per_option["base"]
        # EndpointPolicy refuses to start without the served model's name, so it is a str here
        self.client, self.base_model = base.client, cast(str, base.base_model)
        self.decisions: dict[str, str] = {}
        self.name = f"served_router:{self.base_model}+{'+'.join(self.adapters)}"

    def route(self, messages: list[dict[str, Any]]) -> str:
        """The option of a conversation, chosen from its first user message (once per opening)."""
        from trace_gym.moe.router import choose_on_server

        opening = self.first_user_turn(messages)
        key = canonical_json(opening)
        if key not in self.decisions:
            self.decisions[key] = self.options[choose_on_server(self.client, self.base_model, self.options,
                                                                opening)].name
        return self.decisions[key]

    def bind(self, env: Any, seed: int = 0, sample: int = 0) -> None:
        """Bind every option's endpoint policy to the episode (its request seeds)."""
        for policy in self.per_option.values():
            policy.bind(env, seed, sample)

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        """The next turn, from the conversation's option on the server."""
        return self.per_option[self.route(messages)].act(messages, tools)

    def fingerprint(self) -> dict[str, Any]:
        """What makes this policy's episodes what they are: the served base model's name, the
        adapters' hashes and the sampling settings."""
        base = self.per_option["base"]
        return {"name": "served_router", "model": self.base_model,
                "adapters_sha256": {k: dir_sha256(v) for k, v in sorted(self.adapters.items())},
                "temperature": base.temperature, "top_p": base.top_p, "max_tokens": base.max_tokens}


def _compose_dir(compose_dir: str | os.PathLike | None, policy: str) -> Path:
    from trace_gym.errors import InvalidConfig

    if not compose_dir:
        raise InvalidConfig(f"policy {policy!r} needs compose_dir (--compose-dir: the output of `trace-gym compose`)")
    path = Path(compose_dir)
    if not path.is_dir():
        raise InvalidConfig(f"compose_dir={str(path)!r} is not a directory (the output of `trace-gym compose`)")
    return path


def composed_mixture(model_path: str | os.PathLike, compose_dir: str | os.PathLike | None = None,
                     **kwargs: Any) -> MixturePolicy:
    """The "mixture" policy: the mixture a `trace-gym compose` run wrote in `compose_dir`."""
    return MixturePolicy(model_path, _compose_dir(compose_dir, "mixture") / "mixture", **kwargs)


def composed_router(model_path: str | os.PathLike, compose_dir: str | os.PathLike | None = None,
                    **kwargs: Any) -> RouterPolicy:
    """The "router" policy: the task router a `trace-gym compose` run wrote in `compose_dir`."""
    return RouterPolicy(model_path, _router_adapters(compose_dir), **kwargs)


def served_router(compose_dir: str | os.PathLike | None = None, **kwargs: Any) -> ServedRouterPolicy:
    """The "served_router" policy: the task router a `trace-gym compose` run wrote in
    `compose_dir`, played on a vLLM server (`base_url`, `model`: the base as it is served)."""
    return ServedRouterPolicy(_router_adapters(compose_dir, "served_router"), **kwargs)


def _router_adapters(compose_dir: str | os.PathLike | None, policy: str = "router") -> dict[str, str]:
    from trace_gym.errors import InvalidConfig

    path = _compose_dir(compose_dir, policy) / "router.json"
    try:
        adapters = json.loads(path.read_text())["adapters"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise InvalidConfig(f"{path}: not a router written by `trace-gym compose` ({error})") from None
    if not (isinstance(adapters, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in adapters.items())):
        raise InvalidConfig(f"{path}: adapters must map each capability to an adapter directory")
    return adapters
