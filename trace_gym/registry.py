"""Registration of every trace-gym env in Gymnasium's `trace` namespace.

Registration is lazy: entry points are strings, so importing trace_gym imports no env
module and no generated code. The target envs are built in; capability envs come from the
manifests (the shipped `generated_envs/manifest.json`, installed as the package
`trace_gym.generated_envs`, and, when present, the per-user envs directory that synthesis
writes to). The shipped directory is found, not imported: the library imports no step.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from trace_gym.errors import TraceGymError, UnknownEnv

NAMESPACE = "trace"
# A safety bound only: every env ends its episodes itself (task step limits).
MAX_EPISODE_STEPS = 400

BUILTIN: dict[str, dict[str, str]] = {
    "trace/airline-v0": {
        "entry_point": "trace_gym.targets.env:AirlineTargetEnv",
        "description": "Airline customer service with a scripted customer (target env).",
    },
    "trace/retail-v0": {
        "entry_point": "trace_gym.targets.env:RetailTargetEnv",
        "description": "Retail customer service with a scripted customer (target env).",
    },
}

SHIPPED_PACKAGE = "trace_gym.generated_envs"
MANIFEST_KEYS = ("id", "entry_point", "capability", "description", "origin", "sha256")


@dataclass(frozen=True)
class EnvEntry:
    id: str
    entry_point: str
    description: str
    kind: str  # "target" or "capability"
    capability: str | None = None
    origin: str = "builtin"
    sha256: str | None = None
    manifest: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


def shipped_envs_dir() -> Path:
    """The directory of the shipped capability envs (generated_envs/ in a checkout)."""
    spec = importlib.util.find_spec(SHIPPED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise TraceGymError(f"the package {SHIPPED_PACKAGE} is not installed; reinstall trace-gym")
    return Path(next(iter(spec.submodule_search_locations)))


def user_envs_dir() -> Path:
    """Where synthesized envs go when the package directory is not writable."""
    base = os.environ.get("TRACE_GYM_HOME") or os.path.join(
        os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share"), "trace-gym")
    return Path(base) / "envs"


def read_manifest(text: str, where: str) -> list[dict[str, Any]]:
    """Parse and check a manifest; a malformed one is refused saying where and why."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise TraceGymError(f"{where}: not valid JSON ({exc})") from None
    envs = data.get("envs") if isinstance(data, dict) else None
    if not isinstance(envs, list):
        raise TraceGymError(f"{where}: expected an object with a list 'envs'")
    for i, entry in enumerate(envs):
        missing = [k for k in MANIFEST_KEYS if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise TraceGymError(f"{where}: envs[{i}] lacks {', '.join(missing)}")
        if not str(entry["id"]).startswith(f"{NAMESPACE}/"):
            raise TraceGymError(f"{where}: envs[{i}].id {entry['id']!r} must start with '{NAMESPACE}/'")
    return envs


def envs_dirs() -> list[Path]:
    """Directories of synthesized envs besides the shipped one: the per-user directory and
    any listed in TRACE_GYM_ENVS_DIR (os.pathsep-separated)."""
    dirs = [user_envs_dir()]
    dirs += [Path(p) for p in os.environ.get("TRACE_GYM_ENVS_DIR", "").split(os.pathsep) if p]
    return dirs


def _manifests() -> list[tuple[str, str]]:
    """(text, where) of every manifest to load, the shipped one first."""
    out = []
    shipped = shipped_envs_dir() / "manifest.json"
    if shipped.is_file():
        out.append((shipped.read_text(encoding="utf-8"), str(shipped)))
    for directory in envs_dirs():
        extra = directory / "manifest.json"
        if extra.is_file():
            out.append((extra.read_text(encoding="utf-8"), str(extra)))
    return out


def _load_file_env(path: str, cls: str, **kwargs: Any) -> Any:
    """An env class from a module file (synthesized envs outside the package)."""
    from trace_gym.testing.envref import load_env_class

    return load_env_class(Path(path), cls)(**kwargs)


_ENTRIES: dict[str, EnvEntry] = {}


def register_all() -> None:
    """Register the built-in envs and every manifest entry (idempotent)."""
    for env_id, spec in BUILTIN.items():
        _register(EnvEntry(env_id, spec["entry_point"], spec["description"], kind="target"))
    for text, where in _manifests():
        for entry in read_manifest(text, where):
            _register(EnvEntry(
                id=entry["id"], entry_point=entry["entry_point"], description=entry["description"],
                kind="capability", capability=entry["capability"], origin=entry["origin"],
                sha256=entry["sha256"], manifest=where,
            ))


def _register(entry: EnvEntry) -> None:
    _ENTRIES[entry.id] = entry
    if entry.id in gym.registry:
        return
    entry_point: Any = entry.entry_point
    if entry_point.startswith("file:"):
        path, _, cls = entry_point[len("file:"):].rpartition(":")
        entry_point = functools.partial(_load_file_env, path, cls)
    gym.register(id=entry.id, entry_point=entry_point, max_episode_steps=MAX_EPISODE_STEPS,
                 disable_env_checker=False)


def list_envs() -> list[EnvEntry]:
    """Every registered trace-gym env, targets first."""
    return sorted(_ENTRIES.values(), key=lambda e: (e.kind != "target", e.id))


def entry(env_id: str) -> EnvEntry:
    """The registry entry of an env id (accepts the 'trace_gym:' module prefix)."""
    env_id = env_id.split(":", 1)[1] if env_id.startswith("trace_gym:") else env_id
    if env_id not in _ENTRIES:
        raise UnknownEnv(env_id, list(_ENTRIES))
    return _ENTRIES[env_id]


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """`gym.make` with trace-gym's own error for an unknown id (it lists the nearest ones)."""
    return gym.make(entry(env_id).id, **kwargs)
