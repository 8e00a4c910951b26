"""Registration of every trace-gym env in Gymnasium's `trace` namespace.

Registration is lazy: entry points are strings, so importing trace_gym imports no env
module and no generated code. The target envs are built in; capability envs come from the
manifests (the shipped `generated_envs/manifest.json`, installed as the package
`trace_gym.generated_envs`, and, when present, the per-user envs directory that synthesis
writes to). The shipped directory is found, not imported: the library imports no step.

Which envs are trusted is explicit: the built-in targets, and entries of the package's own
manifest whose origin is `shipped` (synthesis never writes that origin; another manifest
that claims it is refused). They run in this process. Every other env is generated code:
`gym.make` gives a `RemoteEnv` whose module runs in a sandboxed env worker
(trace_gym.sandbox), never here.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from trace_gym.coding import DOMAIN as CODING
from trace_gym.coding import CodingDomain
from trace_gym.errors import TraceGymError, UnknownEnv
from trace_gym.worlds import DOMAINS, Domain

NAMESPACE = "trace"
# A safety bound only: every env ends its episodes itself (task step limits).
MAX_EPISODE_STEPS = 400

_DOMAINS: tuple[Domain | CodingDomain, ...] = (*DOMAINS.values(), CODING)
BUILTIN: dict[str, dict[str, str]] = {
    d.target_env_id: {"entry_point": d.target_entry_point, "description": d.target_description}
    for d in _DOMAINS
}
"""The built-in target envs, one per domain record (`trace_gym.worlds.DOMAINS`, then the
coding domain's, `trace_gym.coding.DOMAIN`): id -> entry point and description. The records
name their entry points as strings, so this imports no env module."""

SHIPPED_PACKAGE = "trace_gym.generated_envs"
MANIFEST_KEYS = ("id", "entry_point", "capability", "description", "origin", "sha256")
SHIPPED = "shipped"
"""The origin of the envs that ship with trace-gym: the only manifest origin that is trusted."""


@dataclass(frozen=True)
class EnvEntry:
    """One registered trace-gym env: its id, where its class is, what it is, and where it comes
    from (a built-in target, or a manifest's capability env with its origin and code sha256)."""

    id: str
    entry_point: str
    description: str
    kind: str  # "target" or "capability"
    capability: str | None = None
    origin: str = "builtin"
    sha256: str | None = None
    manifest: str | None = None

    @property
    def trusted(self) -> bool:
        """Runs in this process: a built-in target, or an env that ships with trace-gym."""
        return self.kind == "target" or self.origin == SHIPPED

    def to_json(self) -> dict[str, Any]:
        """The entry as JSON (fields that are set, and whether it is trusted), as `trace-gym list
        --json` prints it."""
        return {**{k: v for k, v in self.__dict__.items() if v is not None}, "trusted": self.trusted}


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


def read_manifest(text: str, where: str, shipped: bool = True) -> list[dict[str, Any]]:
    """Parse and check a manifest; a malformed one is refused saying where and why. Only the
    package's own manifest (`shipped`) may list entries of origin 'shipped'."""
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
        if entry["origin"] == SHIPPED and not shipped:
            raise TraceGymError(f"{where}: envs[{i}] ({entry['id']}) claims origin {SHIPPED!r}, which only the "
                                f"manifest of the installed package may; synthesized envs are 'synthesized'")
    return envs


def envs_dirs() -> list[Path]:
    """Directories of synthesized envs besides the shipped one: the per-user directory and
    any listed in TRACE_GYM_ENVS_DIR (os.pathsep-separated)."""
    dirs = [user_envs_dir()]
    dirs += [Path(p) for p in os.environ.get("TRACE_GYM_ENVS_DIR", "").split(os.pathsep) if p]
    return dirs


def _manifests() -> list[tuple[str, str, bool]]:
    """(text, where, is the package's own) of every manifest to load, the shipped one first."""
    out = []
    shipped = shipped_envs_dir() / "manifest.json"
    if shipped.is_file():
        out.append((shipped.read_text(encoding="utf-8"), str(shipped), True))
    for directory in envs_dirs():
        extra = directory / "manifest.json"
        if extra.is_file() and extra.resolve() != shipped.resolve():
            out.append((extra.read_text(encoding="utf-8"), str(extra), False))
    return out


def source_of(entry: EnvEntry) -> Any:
    """Where an env worker finds an untrusted env's class: its module file (found without
    importing it) and class name, as an EnvSource."""
    from trace_gym.sandbox.proxy import EnvSource

    if entry.entry_point.startswith("file:"):
        path, _, cls = entry.entry_point[len("file:"):].rpartition(":")
        return EnvSource.from_file(path, cls or None)
    module, _, cls = entry.entry_point.partition(":")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or spec.origin is None:
        raise TraceGymError(f"{entry.id}: module {module!r} of its entry point is not found")
    return EnvSource.from_file(spec.origin, cls or None)


IN_PROCESS, SANDBOXED, REFUSED = "in process", "sandboxed", "refused"


@dataclass(frozen=True)
class Trust:
    """Where an env's code runs, decided by `trust` alone."""

    env_id: str
    mode: str
    """IN_PROCESS, SANDBOXED or REFUSED."""
    reason: str
    """Why, in a line (for REFUSED: what to do)."""
    audited: bool | None = None
    """For generated code: whether its current code holds a passing audit."""


def trust(env_id: str, *, training: bool = False, allow_unaudited: bool = False) -> Trust:
    """The one decision of where an env runs: in this process (a built-in target, a shipped
    env, or an env the user registered with gymnasium in their own code), sandboxed (generated
    code, in an env worker), or refused (generated code to train on without a passing audit,
    unless `allow_unaudited`). The trainer and the pipeline ask it; `gym.make` follows the
    same rule when it registers an env (`EnvEntry.trusted`) and warns at make time when
    generated code has no passing audit.

    >>> trust("trace/airline-v0").mode
    'in process'
    """
    if registered_elsewhere(env_id):
        return Trust(env_id, IN_PROCESS, "registered with gymnasium by this process's own code")
    e = entry(env_id)
    if e.trusted:
        return Trust(env_id, IN_PROCESS, "a built-in target" if e.kind == "target" else "ships with trace-gym")
    from trace_gym.audit.lock import passing_entry

    path = Path(source_of(e).path)
    audited = passing_entry(path) is not None
    if audited:
        return Trust(env_id, SANDBOXED, f"generated code ({path.name}) with a passing audit", True)
    if training and not allow_unaudited:
        return Trust(env_id, REFUSED, f"{env_id} is generated code ({path}) with no passing audit for its current "
                     f"code; run `trace-gym audit {path}` first, or pass --allow-unaudited to train on it anyway",
                     False)
    return Trust(env_id, SANDBOXED, f"generated code ({path.name}) without a passing audit", False)


def env_sha256(env_id: str) -> str:
    """The code sha256 an env's trajectories record (trace_gym.provenance), without making
    the env: a trusted env's class is imported, generated code is only read."""
    e = entry(env_id)
    if not e.trusted:
        from trace_gym.provenance import source_sha256

        return source_sha256(source_of(e))
    module, _, attr = e.entry_point.partition(":")
    return getattr(importlib.import_module(module), attr).code_sha256()


def _remote_env(env_id: str, **kwargs: Any) -> Any:
    """A generated env, made in an env worker of the process's shared pool."""
    from trace_gym.audit.lock import warn_if_unaudited
    from trace_gym.sandbox.proxy import RemoteEnv

    source = source_of(_ENTRIES[env_id])
    warn_if_unaudited(Path(source.path))  # the same check as `trust`, warned once per file version
    render_mode = kwargs.pop("render_mode", None)
    return RemoteEnv(source, kwargs, render_mode)


_ENTRIES: dict[str, EnvEntry] = {}


def register_all() -> None:
    """Register the built-in envs and every manifest entry (idempotent)."""
    for env_id, spec in BUILTIN.items():
        _register(EnvEntry(env_id, spec["entry_point"], spec["description"], kind="target"))
    for text, where, shipped in _manifests():
        for entry in read_manifest(text, where, shipped):
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
    if not entry.trusted:  # what `trust` says of it: sandboxed (its audit is read when it is made)
        entry_point = functools.partial(_remote_env, entry.id)
    gym.register(id=entry.id, entry_point=entry_point, max_episode_steps=MAX_EPISODE_STEPS,
                 disable_env_checker=False)


def list_envs() -> list[EnvEntry]:
    """Every registered trace-gym env, targets first."""
    return sorted(_ENTRIES.values(), key=lambda e: (e.kind != "target", e.id))


def known(env_id: str) -> bool:
    """Whether `env_id` is a registered trace-gym env."""
    return (env_id.split(":", 1)[1] if env_id.startswith("trace_gym:") else env_id) in _ENTRIES


def registered_elsewhere(env_id: str) -> bool:
    """Whether `env_id` is not trace-gym's but registered with gymnasium (by the user's own
    code, in this process): it runs in this process, made by `gym.make`."""
    return not known(env_id) and env_id in gym.registry


def entry(env_id: str) -> EnvEntry:
    """The registry entry of an env id (accepts the 'trace_gym:' module prefix)."""
    env_id = env_id.split(":", 1)[1] if env_id.startswith("trace_gym:") else env_id
    if env_id not in _ENTRIES:
        raise UnknownEnv(env_id, list(_ENTRIES))
    return _ENTRIES[env_id]


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """`gym.make` with trace-gym's own error for an unknown id (it lists the nearest ones)."""
    return gym.make(entry(env_id).id, **kwargs)
