"""The audit lock: passing audits recorded by code sha256, next to the manifest.

`{"schema_version": 1, "entries": {sha256: {"env_id", "kit_version", "hypothesis_seed",
"static": [...], "results": [{"name", "passed", "detail"}]}}}` (no timings, so an audit of
unchanged code reproduces its entry exactly). Written atomically.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from trace_gym.jsondata import sha256_bytes, write_json_atomic

LOCK_NAME = "audit_lock.json"
SCHEMA_VERSION = 1


class UnauditedEnvWarning(UserWarning):
    """A generated env whose code has no passing audit."""


def read_lock(directory: Path) -> dict[str, Any]:
    path = directory / LOCK_NAME
    if not path.is_file():
        return {"schema_version": SCHEMA_VERSION, "entries": {}}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise ValueError(f"{path}: expected an object with an 'entries' object")
    return data


def record(directory: Path, code_sha256: str, entry: dict[str, Any]) -> None:
    """Record a passing audit; earlier versions of the same env id are dropped."""
    data = read_lock(directory)
    if entry.get("env_id"):
        data["entries"] = {sha: e for sha, e in data["entries"].items() if e.get("env_id") != entry["env_id"]}
    data["entries"][code_sha256] = entry
    write_json_atomic(directory / LOCK_NAME, data)


def passing_entry(path: Path) -> dict[str, Any] | None:
    """The lock entry of this module file's current code, when it passed."""
    try:
        entry = read_lock(path.parent)["entries"].get(sha256_bytes(path.read_bytes()))
    except (OSError, ValueError):
        return None
    if entry and all(r["passed"] for r in entry.get("results", [])) and not entry.get("static"):
        return entry
    return None


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
                f"{path.name} has no passing audit for its current code; run `trace-gym audit {path}` "
                "before training on it"), stacklevel=4)
    return _CHECKED[key]
