"""Validation of configuration dataclasses: one error format for every knob."""

from __future__ import annotations

from typing import Any

from trace_gym.errors import InvalidConfig


def require(config: Any, name: str, ok: bool, rule: str) -> None:
    """Raise InvalidConfig naming the field, its value and the rule, unless `ok`."""
    if not ok:
        raise InvalidConfig(f"{type(config).__name__}.{name}={getattr(config, name)!r} is invalid: {rule}")
