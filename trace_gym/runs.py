"""Run fingerprints: what makes two rollouts comparable, so that records of different runs
are never mixed in one file.

A fingerprint holds the env (id, code sha256, knobs), the hint setting and the policy (its
name, the sha256 of a local model's and adapter's files, the endpoint's model name, the
sampling settings). Every record a rollout writes carries it (`run`); resuming a file under
another fingerprint is refused with what differs; default output paths carry its short id.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from trace_gym.jsondata import sha256_json
from trace_gym.provenance import dir_sha256


def describe_policy(name: str, **kwargs: Any) -> dict[str, Any]:
    """A policy's fingerprint from its `make_policy` arguments, without building it (a
    local model is hashed, not loaded): the registered policy's `episode_keys`, the factory's
    defaults filled in."""
    from trace_gym.agents import policy_entry, policy_names

    entry = policy_entry(name) if name in policy_names() else None
    if entry is None or entry.episode_keys is None:
        return {"name": name, **{k: v for k, v in sorted(kwargs.items()) if _plain(v)}}
    values = {**entry.defaults(), **{k: v for k, v in kwargs.items() if v is not None or k == "adapter"}}
    out: dict[str, Any] = {"name": name}
    for key in entry.episode_keys:
        value = values.get(key)
        if key == "model" and value is None:
            value = os.environ.get("TRACE_GYM_MODEL") or "default"
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


def policy_fingerprint(factory: Any) -> dict[str, Any]:
    """The fingerprint of the policy a factory makes: read from `make_policy` arguments when
    the factory is `functools.partial(make_policy, name, ...)`, else from the policy's own
    `fingerprint()` (or its name), which is also what a registered policy without
    `episode_keys` (a composed one: its files say what it is) gives."""
    from trace_gym.agents import make_policy, policy_entry, policy_names

    if isinstance(factory, functools.partial) and factory.func is make_policy and factory.args:
        name = factory.args[0]
        if name not in policy_names() or policy_entry(name).episode_keys is not None:
            return describe_policy(name, **factory.keywords)
    policy = factory()
    described = getattr(policy, "fingerprint", None)
    return described() if callable(described) else {"name": getattr(policy, "name", type(policy).__name__)}


def run_fingerprint(env_id: str, factory: Any, *, hint: bool = False,
                    env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fingerprint of a rollout: env id, its code sha256 and knobs (`env_kwargs`), the
    hint setting and the policy's fingerprint."""
    from trace_gym.registry import env_sha256

    return {"env_id": env_id, "env_sha256": env_sha256(env_id), "env_kwargs": dict(sorted((env_kwargs or {}).items())),
            "hint": bool(hint), "policy": policy_fingerprint(factory)}


def fingerprint_id(fingerprint: dict[str, Any]) -> str:
    """A short id of a fingerprint, for file names."""
    return sha256_json(fingerprint)[:12]


def differences(before: Any, now: Any, where: str = "") -> list[str]:
    """What differs between two fingerprints, as `key: before -> now` lines."""
    if isinstance(before, dict) and isinstance(now, dict):
        out = []
        for key in sorted(set(before) | set(now)):
            out += differences(before.get(key), now.get(key), f"{where}.{key}" if where else key)
        return out
    if before != now:
        return [f"{where}: {_short(before)} -> {_short(now)}"]
    return []


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 24 or not isinstance(value, str) else text[:13] + "...'"
