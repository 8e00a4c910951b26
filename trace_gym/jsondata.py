"""Helpers for the JSON-shaped records that worlds, tasks and trajectories are made of."""

from __future__ import annotations

import hashlib
import json
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


def canonical_json(value: Any) -> str:
    """One text per value: sorted keys, no whitespace (the input of every content hash)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_json(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
