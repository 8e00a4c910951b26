"""Helpers for the JSON-shaped records that worlds, tasks and trajectories are made of."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from json.encoder import c_make_encoder, encode_basestring_ascii  # type: ignore[attr-defined]  # see _DEFAULTS
from pathlib import Path
from typing import Any

_CONTAINERS = (dict, list)


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists and scalars), several times faster than
    copy.deepcopy because it knows there are no cycles and no other types."""
    t = type(value)
    if t is dict:
        # Scalars (most values) are shared, not visited: one call per container only.
        return {k: copy_json(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if t is list:
        return [copy_json(v) if type(v) in _CONTAINERS else v for v in value]
    return value


# json.dumps builds a new encoder (and, to catch cycles, a dict of the containers it is in)
# on every call; a step serialises several small values, where that set-up is a good part
# of the cost. `_encoder` builds what json.dumps builds with its default settings. (typeshed
# leaves out c_make_encoder, json's C accelerator, None where there is none.)
_DEFAULTS = json.JSONEncoder()


def _encoder(markers: dict | None) -> Any:
    return c_make_encoder(markers, _DEFAULTS.default, encode_basestring_ascii, None,
                          _DEFAULTS.key_separator, _DEFAULTS.item_separator,
                          _DEFAULTS.sort_keys, _DEFAULTS.skipkeys, _DEFAULTS.allow_nan)


if c_make_encoder is None:  # no C accelerator (not CPython): json's own pure-Python path
    def _checked_dumps(value: Any) -> str:
        return json.dumps(value)

    def dumps_tree(value: Any) -> str:
        """`json.dumps(value)`, byte for byte, for a value known to hold no cycle."""
        return json.dumps(value)
else:
    _TREE_ENCODER = _encoder(None)

    def _checked_dumps(value: Any) -> str:
        return "".join(_encoder({})(value, 0))

    def dumps_tree(value: Any) -> str:
        """`json.dumps(value)`, byte for byte, for a value known to hold no cycle (records
        and what the code builds from them): one shared encoder, no check for cycles."""
        return "".join(_TREE_ENCODER(value, 0))


def dumps(value: Any) -> str:
    """`json.dumps(value)`, byte for byte, errors included (a cycle is a ValueError),
    without its pure-Python set-up. For values from outside the code, such as an agent's
    arguments: nesting deeper than the encoder goes is a ValueError too, where json raises
    RecursionError."""
    try:
        return _checked_dumps(value)
    except RecursionError:
        raise ValueError("nested deeper than the JSON encoder goes") from None


_scan_once = json.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set in __init__; typeshed omits it


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`: the same value, the same errors, except that nesting deeper than
    the decoder goes (degenerate model output such as thousands of "[") is a ValueError
    like any other text that is not JSON, where json raises RecursionError. Text that is
    one JSON value from its first character to its last (all that the code writes, and
    most of what agents write) is read by the scanner directly, without json.loads's
    pure-Python wrapper; anything else goes through json.loads."""
    try:
        if type(text) is str:
            try:
                value, end = _scan_once(text, 0)
            except StopIteration:  # not a value at 0 (such as leading whitespace, or not JSON)
                pass
            else:
                if end == len(text):
                    return value
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested deeper than the JSON decoder goes") from None


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values by JSON's own types. Python's `==` says `True == 1` and
    `[True] == [1]`; JSON says a boolean is not a number. A verifier comparing an agent's
    arguments with the gold ones uses this. (An integer equals a float of the same value:
    JSON has one number type.)"""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(json_equal, a, b))
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is None and b is None


def canonical_json(value: Any) -> str:
    """One text per value: sorted keys, no whitespace (the input of every content hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_json(value: Any) -> str:
    """The sha256 hex digest of a JSON value's canonical text."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def sha256_bytes(data: bytes) -> str:
    """The sha256 hex digest of `data`."""
    return hashlib.sha256(data).hexdigest()


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as indented JSON through a temporary file and a rename, so a crash
    leaves the old file or the new one, never half of one."""
    _write_atomic(Path(path), lambda f: f.write(json.dumps(data, indent=2, sort_keys=True) + "\n"))


def write_jsonl_atomic(path: Path, records: Any) -> Path:
    """Write `records` as JSON Lines (one object a line) the same way, synced before the
    rename; return the path."""
    def lines(f: Any) -> None:
        for r in records:
            f.write(json.dumps(r) + "\n")

    _write_atomic(Path(path), lines, sync=True)
    return Path(path)


def _write_atomic(path: Path, write: Any, sync: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write(f)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from other users (a sandbox's)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
