"""Run fingerprints: what makes two rollouts comparable, so that records of different runs
are never mixed in one file.

A fingerprint holds the env (id, code sha256, knobs), the hint setting and the policy (its
name, the sha256 of a local model's and adapter's files, the endpoint's model name, the
sampling settings). Every record a rollout writes carries it (`run`); resuming a file under
another fingerprint is refused with what differs; default output paths carry its short id.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
from pathlib import Path
from typing import Any

from trace_gym.jsondata import sha256_json

# The policy arguments that change what an episode is (connection details do not).
_POLICY_KEYS = {
    "oracle": (),
    "random": ("seed", "reply_rate"),
    "endpoint": ("model", "temperature", "top_p", "max_tokens"),
    "local": ("model_path", "adapter", "temperature", "top_p", "max_new_tokens", "seed", "dtype", "engine",
              "constrain_calls"),
}


def dir_sha256(path: str | os.PathLike) -> str:
    """sha256 over a directory's files (names and bytes), or a file's bytes; computed once
    per version of each file."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    parts = [f"{p.relative_to(path) if path.is_dir() else p.name}:{_file_sha256(p)}" for p in files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    return _file_sha256_cached(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _file_sha256_cached(path: Path, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _policy_class(name: str) -> Any:
    from trace_gym.agents.base import OraclePolicy, RandomPolicy

    if name == "endpoint":
        from trace_gym.agents.endpoint import EndpointPolicy

        return EndpointPolicy
    if name == "local":
        from trace_gym.agents.local import LocalModelPolicy

        return LocalModelPolicy
    return {"oracle": OraclePolicy, "random": RandomPolicy}[name]


def describe_policy(name: str, **kwargs: Any) -> dict[str, Any]:
    """A policy's fingerprint from its `make_policy` arguments, without building it (a
    local model is hashed, not loaded)."""
    if name not in _POLICY_KEYS:
        return {"name": name, **{k: v for k, v in sorted(kwargs.items()) if _plain(v)}}
    defaults = {k: p.default for k, p in inspect.signature(_policy_class(name).__init__).parameters.items()
                if p.default is not inspect.Parameter.empty}
    if name == "local":  # the engine is `make_policy`'s argument, not the torch policy's
        from trace_gym.agents.base import DEFAULT_ENGINE

        defaults["engine"], defaults["constrain_calls"] = DEFAULT_ENGINE, False
    values = {**defaults, **{k: v for k, v in kwargs.items() if v is not None or k == "adapter"}}
    out: dict[str, Any] = {"name": name}
    for key in _POLICY_KEYS[name]:
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
    `fingerprint()` (or its name)."""
    from trace_gym.agents.base import make_policy

    if isinstance(factory, functools.partial) and factory.func is make_policy and factory.args:
        return describe_policy(factory.args[0], **factory.keywords)
    policy = factory()
    described = getattr(policy, "fingerprint", None)
    return described() if callable(described) else {"name": getattr(policy, "name", type(policy).__name__)}


def run_fingerprint(env_id: str, factory: Any, *, hint: bool = False,
                    env_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
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
