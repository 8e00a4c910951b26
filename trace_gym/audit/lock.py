"""The audit lock: passing audits recorded next to the manifest.

`{"schema_version": 3, "entries": {code sha256: {"env_id", "kit_version", "library_sha256",
"hypothesis_seed", "seed_base", "isolation", "static": [...], "results": [{"name", "passed",
"detail"}]}}}` (no timings; `trace-gym audit --seed-base N` of unchanged code reproduces its
entry exactly). An entry holds for a module only while all three of its key parts are
current: the module's own sha256, the kit version (a kit that checks more must look again),
and `library_sha256`, the hash of the trace_gym modules a generated env may import
(`trace_gym.provenance.library_sha256` over `trace_gym.audit.static.TRACE_GYM_MODULES` and
the old names it still allows, `DEPRECATED_MODULES`), so that a change to what the module
builds on needs a new audit and an unrelated commit does not. `isolation` is what the module ran under
during its audit: an entry made under the fallback isolation (not a boundary: the module
could have reached the auditor) holds only where the fallback is asked for again. Written
atomically.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from trace_gym.errors import MalformedFile
from trace_gym.jsondata import sha256_bytes, write_json_atomic
from trace_gym.sandbox.isolation import env_mode

LOCK_NAME = "audit_lock.json"
SCHEMA_VERSION = 3


class UnauditedEnvWarning(UserWarning):
    """A generated env whose code has no passing audit."""


def read_lock(directory: Path) -> dict[str, Any]:
    """The audit lock in `directory` (an empty one when there is none); MalformedFile when
    it is not a lock."""
    path = directory / LOCK_NAME
    if not path.is_file():
        return {"schema_version": SCHEMA_VERSION, "entries": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise MalformedFile(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise MalformedFile(f"{path}: expected an object with an 'entries' object")
    return data


def record(directory: Path, code_sha256: str, entry: dict[str, Any]) -> None:
    """Record a passing audit; earlier versions of the same env id are dropped."""
    data = read_lock(directory)
    data["schema_version"] = SCHEMA_VERSION
    if entry.get("env_id"):
        data["entries"] = {sha: e for sha, e in data["entries"].items() if e.get("env_id") != entry["env_id"]}
    data["entries"][code_sha256] = entry
    write_json_atomic(directory / LOCK_NAME, data)


def current_key() -> dict[str, str]:
    """The parts of a lock entry's key that do not depend on the module."""
    from trace_gym.audit.static import DEPRECATED_MODULES, TRACE_GYM_MODULES
    from trace_gym.provenance import library_sha256
    from trace_gym.testing.version import KIT_VERSION

    modules = (*TRACE_GYM_MODULES, *DEPRECATED_MODULES)  # an old generated env may import a shim
    return {"kit_version": KIT_VERSION, "library_sha256": library_sha256(modules)}


def stale_reason(entry: dict[str, Any] | None) -> str | None:
    """Why a lock entry does not hold for the current kit and library (None: it holds)."""
    if entry is None:
        return "no audit recorded for the module's current code"
    if entry.get("static") or not all(r.get("passed") for r in entry.get("results", [])) or not entry.get("results"):
        return "the recorded audit did not pass"
    key = current_key()
    if entry.get("kit_version") != key["kit_version"]:
        return f"audited with kit version {entry.get('kit_version')}, the kit is now version {key['kit_version']}"
    if entry.get("library_sha256") != key["library_sha256"]:
        return "the trace_gym modules it builds on changed since its audit"
    if entry.get("isolation") != "bubblewrap" and env_mode() != "fallback":
        return ("it was audited under the fallback isolation, which is not a boundary; audit it again under "
                "bubblewrap (or ask for the fallback by name: TRACE_GYM_ISOLATION=fallback)")
    return None


def passing_entry(path: Path) -> dict[str, Any] | None:
    """The lock entry of this module file's current code, when it passed and still holds."""
    try:
        entry = read_lock(path.parent)["entries"].get(sha256_bytes(path.read_bytes()))
    except (OSError, ValueError):
        return None
    return entry if stale_reason(entry) is None else None


_CHECKED: dict[tuple[str, float, int], bool] = {}


def warn_if_unaudited(path: Path) -> bool:
    """Warn (once per file version) when a generated env's code has no passing audit."""
    try:
        stat = path.stat()
    except OSError:
        return False
    key = (str(path), stat.st_mtime, stat.st_size)
    if key not in _CHECKED:
        _CHECKED[key] = passing_entry(path) is not None
        if not _CHECKED[key]:
            warnings.warn(UnauditedEnvWarning(
                f"{path.name} has no passing audit for its current code, kit and library; run "
                f"`trace-gym audit {path}` before training on it (it runs in the sandboxed env worker "
                "either way)"), stacklevel=4)
    return _CHECKED[key]
