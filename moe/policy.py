"""Policies that play with composed adapters, usable by rollout and eval like any local policy.

- `MixturePolicy`: the base model with the trained gates and their adapters
  (`trace_gym.moe.mixture`), routing every token top-1 as it generates.
- `RouterPolicy`: the task router picks one adapter per conversation after its first user
  message (`trace_gym.moe.router`), and the conversation is played with that adapter (or
  the base). Conversations of a batch that chose the same adapter generate together.

Both run locally. A vLLM server serves one adapter per request, so the task router is the
composition a server can serve (`choose_on_server` plus the chosen adapter's name as the
request's model); the token-level mixture needs the local forward.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trace_gym.agents.local import LocalModelPolicy
from trace_gym.jsondata import canonical_json
from trace_gym.runs import dir_sha256


class MixturePolicy(LocalModelPolicy):
    def __init__(self, model_path: str | os.PathLike, mixture: str | os.PathLike, **kwargs: Any) -> None:
        from trace_gym.moe.mixture import Mixture

        super().__init__(model_path, **kwargs)
        self.mixture = Mixture.load(self.model, mixture)  # wraps the model's modules in place
        self.mixture_path = Path(mixture)
        self.name = f"mixture:{Path(model_path).name}+{self.mixture_path.name}"
        self.model_path = Path(model_path)

    def fingerprint(self) -> dict[str, Any]:
        return {"name": "mixture", "model_sha256": dir_sha256(self.model_path),
                "mixture_sha256": dir_sha256(self.mixture_path),
                "adapters_sha256": [a["sha256"] for a in json.loads(
                    (self.mixture_path / "mixture.json").read_text())["adapters"]],
                "temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens,
                "seed": self.seed}


class RouterPolicy:
    """One `LocalModelPolicy` per option over one shared peft model holding every adapter;
    each conversation is routed once and stays with its option (its cache too)."""

    def __init__(self, model_path: str | os.PathLike, adapters: dict[str, str | os.PathLike], **kwargs: Any) -> None:
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
        self.name = f"router:{self.model_path.name}+{'+'.join(names)}"
        self.temperature, self.top_p, self.max_new_tokens = (self.base.temperature, self.base.top_p,
                                                             self.base.max_new_tokens)

    def bind(self, env: Any, seed: int = 0, sample: int = 0) -> None:
        for policy in self.per_option.values():
            policy.bind(env, seed, sample)

    def route(self, messages: list[dict[str, Any]]) -> str:
        key = canonical_json(self.first_user_turn(messages))
        if key not in self.decisions:
            self.decisions[key] = self.options[self.router.choose(self.first_user_turn(messages))]
        return self.decisions[key]

    def act(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        return self.act_batch([(messages, tools, self.base._episode_seed + len(messages))])[0]

    def act_batch(self, items: list[tuple[list[dict[str, Any]], list[dict[str, Any]], int]]) -> list[str]:
        import contextlib

        routes = [self.route(messages) for messages, _, _ in items]
        out: list[str | None] = [None] * len(items)
        for option in dict.fromkeys(routes):
            chosen = [i for i, r in enumerate(routes) if r == option]
            if option == "base":
                context = self.peft.disable_adapter()
            else:
                self.peft.set_adapter(option)
                context = contextlib.nullcontext()
            with context:
                texts = self.per_option[option].act_batch([items[i] for i in chosen])
            for i, text in zip(chosen, texts):
                out[i] = text
        return out  # type: ignore[return-value]

    def fingerprint(self) -> dict[str, Any]:
        return {"name": "router", "model_sha256": dir_sha256(self.model_path),
                "adapters_sha256": {k: dir_sha256(v) for k, v in sorted(self.adapters.items())},
                "temperature": self.temperature, "top_p": self.top_p, "max_new_tokens": self.max_new_tokens}
