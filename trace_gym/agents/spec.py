"""`PolicySpec`: a policy by its registered name and arguments, the one value that stages,
runs and the command line pass around instead of a built policy or a `functools.partial`.

Calling a spec builds the policy (it is a factory wherever one is taken); `fingerprint()` says
which policy it is without building it (a local model's files are hashed, not loaded), from
the registered policy's `episode_keys`; `server` says whether its turns wait on a server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.agents.registry import make_policy, policy_entry, policy_names
from trace_gym.errors import InvalidConfig
from trace_gym.provenance import dir_sha256


@dataclass(frozen=True)
class PolicySpec:
    """A registered policy's name and its `make_policy` keyword arguments."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.name not in policy_names():
            raise InvalidConfig(f"policy {self.name!r} is not registered; known: {', '.join(policy_names())}")
        object.__setattr__(self, "kwargs", dict(self.kwargs))

    def make(self) -> Any:
        """The policy (`make_policy(name, **kwargs)`)."""
        return make_policy(self.name, **self.kwargs)

    __call__ = make

    def with_options(self, **kwargs: Any) -> PolicySpec:
        """The same policy with these arguments set (or replaced)."""
        return PolicySpec(self.name, {**self.kwargs, **kwargs})

    @property
    def server(self) -> bool:
        """Whether the policy's turns wait on a server (its episodes then overlap in threads)."""
        return policy_entry(self.name).server

    @property
    def local(self) -> bool:
        """Whether the policy runs a local model (its episodes then share one batch)."""
        return policy_entry(self.name).local

    def fingerprint(self) -> dict[str, Any]:
        """What tells this policy's rollouts apart from another's: from its arguments where
        the registered policy names its `episode_keys`, else from the built policy's own
        `fingerprint()` (a composed policy: its files say what it is)."""
        if policy_entry(self.name).episode_keys is not None:
            return describe_policy(self.name, **self.kwargs)
        return built_fingerprint(self.make())


def built_fingerprint(policy: Any) -> dict[str, Any]:
    """A built policy's fingerprint: its own `fingerprint()`, else its name."""
    described = getattr(policy, "fingerprint", None)
    return described() if callable(described) else {"name": getattr(policy, "name", type(policy).__name__)}


def describe_policy(name: str, **kwargs: Any) -> dict[str, Any]:
    """A policy's fingerprint from its `make_policy` arguments, without building it (a
    local model is hashed, not loaded): the registered policy's `episode_keys`, the factory's
    defaults filled in."""
    entry = policy_entry(name) if name in policy_names() else None
    if entry is None or entry.episode_keys is None:
        return {"name": name, **{k: v for k, v in sorted(kwargs.items()) if _plain(v)}}
    values = {**entry.defaults(), **{k: v for k, v in kwargs.items() if v is not None or k == "adapter"}}
    out: dict[str, Any] = {"name": name}
    for key in entry.episode_keys:
        value = values.get(key)
        if key == "model" and value is None:
            value = os.environ.get("TRACE_GYM_MODEL")  # none: the endpoint policy refuses to be made
        if key == "model_path":
            out["model_sha256"] = dir_sha256(value) if value and Path(value).exists() else None
            continue
        if key == "dtype":  # what "auto" means on this machine: bf16 and fp32 sample differently
            from trace_gym.agents.hardware import placement

            value = placement(value or "auto").dtype
        if key == "adapter":
            out["adapter_sha256"] = dir_sha256(value) if value else None
            continue
        out[key] = value
    return out


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


__all__ = ["PolicySpec", "built_fingerprint", "describe_policy"]
