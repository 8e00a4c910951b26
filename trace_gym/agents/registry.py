"""The policies by name, one table that everything else reads (as tau2-bench's agent registry).

`register_policy(name, factory, ...)` adds a policy; `make_policy(name, **kwargs)` builds one.
The CLI's `--policy` choices and flags, the pipeline's players and the run fingerprints all
read this table, so adding a policy is one module (its class) and one `register_policy` line.

A factory is a callable, or a `"module:attr"` string imported when the policy is first made
(as gymnasium's entry points): the mixture and router policies belong to a step
(`trace_gym.moe`), and the library imports no step.

Another package adds policies through the entry-point group `trace_gym.policies` (`PLUGINS`):
each entry point names a callable that takes no argument and registers its policies, called
once before the table is first read, so that they reach the installed command line too:

    [project.entry-points."trace_gym.policies"]
    greeter = "my_package.policies:register"
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trace_gym.agents.base import AnyPolicy, OraclePolicy, RandomPolicy, local_policy
from trace_gym.errors import InvalidConfig

SAMPLING = ("temperature", "top_p", "max_new_tokens")
"""The sampling arguments every model-backed policy takes (the endpoint's is `max_tokens`)."""


@dataclass(frozen=True)
class PolicyEntry:
    """One registered policy."""

    name: str
    factory: Callable[..., AnyPolicy] | str
    """The policy's constructor, or "module:attr" naming it (imported on first use)."""
    summary: str
    """One line: what plays (the CLI's help)."""
    options: tuple[str, ...] = ()
    """The `make_policy` arguments the CLI passes from its flags of the same name (the
    sampling ones included where the policy samples)."""
    episode_keys: tuple[str, ...] | None = ()
    """The arguments that change what an episode is, for run fingerprints (connection details
    do not); None: the built policy's own `fingerprint()` says."""
    local: bool = False
    """A local model: it batches its episodes itself (many in flight, one process)."""
    server: bool = False
    """Its turns wait on a server: episodes run in threads, overlapping."""
    signature: Callable[..., Any] | str | None = None
    """Where the keyword defaults of `episode_keys` are read (default: the factory)."""

    def load(self) -> Callable[..., AnyPolicy]:
        """The policy's constructor, imported when `factory` names it."""
        return _resolve(self.factory, self.name)

    def defaults(self) -> dict[str, Any]:
        """The keyword defaults of the factory and of `signature`."""
        import inspect

        out: dict[str, Any] = {}
        for target in (self.signature, self.factory):
            if target is None:
                continue
            fn = _resolve(target, self.name)
            if isinstance(fn, type):  # a class: its __init__'s defaults (held as type[Any], whose __init__ mypy reads)
                cls: type[Any] = fn
                fn = cls.__init__
            out.update({k: p.default for k, p in inspect.signature(fn).parameters.items()
                        if p.default is not inspect.Parameter.empty})
        return out


_POLICIES: dict[str, PolicyEntry] = {}
PLUGINS = "trace_gym.policies"
"""The entry-point group through which other packages register policies."""
_plugins_loaded = False


def _load_plugins() -> None:
    """Call each `trace_gym.policies` entry point once (a plugin that fails is named)."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True  # before the calls: a plugin's own register_policy reads the table
    from importlib.metadata import entry_points

    for point in entry_points(group=PLUGINS):
        try:
            point.load()()
        except Exception as error:  # the plugin's code: named, never a traceback
            raise InvalidConfig(f"the policy plugin {point.name!r} ({point.value}, entry point group {PLUGINS!r}) "
                                f"failed: {type(error).__name__}: {error}") from None


def register_policy(name: str, factory: Callable[..., AnyPolicy] | str, *, summary: str,
                    options: tuple[str, ...] = (), episode_keys: tuple[str, ...] | None = (),
                    local: bool = False, server: bool = False,
                    signature: Callable[..., Any] | str | None = None, replace: bool = False) -> PolicyEntry:
    """Add a policy under `name` (refused if the name is taken, unless `replace`)."""
    if not (isinstance(name, str) and name.isidentifier()):
        raise InvalidConfig(f"policy name {name!r} is invalid: must be an identifier")
    if name in _POLICIES and not replace:
        raise InvalidConfig(f"policy {name!r} is already registered (pass replace=True to replace it)")
    if isinstance(factory, str) and ":" not in factory:
        raise InvalidConfig(f"policy {name!r}: factory {factory!r} is invalid: must be a callable or 'module:attr'")
    entry = PolicyEntry(name, factory, summary, tuple(options), None if episode_keys is None else tuple(episode_keys),
                        local, server, signature)
    _POLICIES[name] = entry
    return entry


def policy_entry(name: str) -> PolicyEntry:
    """The registered policy `name`, or an error that lists the registered ones."""
    _load_plugins()
    if name not in _POLICIES:
        raise InvalidConfig(f"unknown policy {name!r}; registered: {', '.join(_POLICIES)}")
    return _POLICIES[name]


def policy_names() -> list[str]:
    """The registered policies' names, in registration order (the plugins' after the package's)."""
    _load_plugins()
    return list(_POLICIES)


def make_policy(name: str, **kwargs: Any) -> AnyPolicy:
    """A policy by name, from its registered factory (`policy_names()` lists them).

    >>> make_policy("oracle").name
    'oracle'
    """
    factory = policy_entry(name).load()
    unknown = _unknown_arguments(factory, kwargs)
    if unknown:
        raise InvalidConfig(f"policy {name!r} takes no argument {', '.join(unknown)}")
    return factory(**kwargs)


def _unknown_arguments(factory: Callable[..., Any], kwargs: dict[str, Any]) -> list[str]:
    """The keywords `factory` does not take (none when it takes **kwargs or has no signature)."""
    import inspect

    try:
        parameters = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):  # no signature to read: the call decides
        return []
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return []
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return sorted(set(kwargs) - named)


def _resolve(target: Callable[..., Any] | str, name: str) -> Callable[..., Any]:
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as error:
        raise InvalidConfig(f"policy {name!r}: cannot load {target!r} ({error})") from None


_LOCAL_OPTIONS = ("model_path", *SAMPLING, "dtype", "threads", "announce")

register_policy("oracle", OraclePolicy, summary="the env's own oracle (reward 1.0)")
register_policy("random", RandomPolicy, summary="schema-valid random tool calls and canned replies",
                episode_keys=("seed", "reply_rate"))
register_policy("endpoint", "trace_gym.agents.endpoint:EndpointPolicy",
                summary="an OpenAI-compatible server (vLLM, or any chat-completions API with tools)",
                options=("base_url", "model", "api_key", "temperature", "top_p", "max_tokens", "timeout", "retries",
                         "adapter"),
                episode_keys=("model", "adapter", "temperature", "top_p", "max_tokens"), server=True)
register_policy("local", local_policy, summary="a local model directory, optionally with a LoRA adapter",
                options=(*_LOCAL_OPTIONS, "adapter", "engine", "constrain_calls"),
                episode_keys=("model_path", "adapter", "temperature", "top_p", "max_new_tokens", "seed", "dtype",
                              "engine", "constrain_calls"),
                local=True, signature="trace_gym.agents.local:LocalModelPolicy")
register_policy("mixture", "trace_gym.moe.policy:composed_mixture",
                summary="the token-level mixture of adapters a `trace-gym compose` run wrote (torch engine)",
                options=(*_LOCAL_OPTIONS, "compose_dir"), episode_keys=None, local=True)
register_policy("router", "trace_gym.moe.policy:composed_router",
                summary="the task router over the adapters a `trace-gym compose` run wrote (torch engine)",
                options=(*_LOCAL_OPTIONS, "compose_dir"), episode_keys=None, local=True)
register_policy("served_router", "trace_gym.moe.policy:served_router",
                summary="the task router a `trace-gym compose` run wrote, on a vLLM server that loads its adapters",
                options=("base_url", "model", "api_key", "temperature", "top_p", "max_tokens", "timeout", "retries",
                         "compose_dir"), episode_keys=None, server=True)

__all__ = ["PLUGINS", "PolicyEntry", "make_policy", "policy_entry", "policy_names", "register_policy"]
