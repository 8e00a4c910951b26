"""Run fingerprints: what makes two rollouts comparable, so that records of different runs
are never mixed in one file.

A fingerprint holds the env (id, code sha256, knobs), the hint setting and the policy (its
name, the sha256 of a local model's and adapter's files, the endpoint's model name, the
sampling settings). Every record a rollout writes carries it (`run`); resuming a file under
another fingerprint is refused with what differs; default output paths carry its short id.
"""

from __future__ import annotations

from typing import Any

from trace_gym.jsondata import sha256_json


def policy_fingerprint(factory: Any) -> dict[str, Any]:
    """The fingerprint of the policy a factory makes: a `PolicySpec`'s own (read from its
    arguments, nothing built; `functools.partial(make_policy, name, ...)` is read as the
    spec it spells), else that of the policy the factory builds."""
    import functools

    from trace_gym.agents import make_policy
    from trace_gym.agents.spec import PolicySpec, built_fingerprint

    if isinstance(factory, functools.partial) and factory.func is make_policy and factory.args:
        factory = PolicySpec(factory.args[0], factory.keywords)
    if isinstance(factory, PolicySpec):
        return factory.fingerprint()
    return built_fingerprint(factory())


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
