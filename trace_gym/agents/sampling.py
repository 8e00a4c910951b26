"""The sampling settings every model-backed policy takes, checked in one place."""

from __future__ import annotations

from typing import Any

from trace_gym.errors import InvalidConfig


def check_sampling(owner: str, temperature: Any, top_p: Any, max_tokens: Any) -> None:
    """Refuse sampling settings that no server or `generate()` honours, naming the value
    (a server would refuse them only at the first request, or not at all)."""
    for name, value, ok, rule in (
        ("temperature", temperature, _number(temperature) and temperature >= 0, "must be a number >= 0"),
        ("top_p", top_p, _number(top_p) and 0 < top_p <= 1, "must be a number in (0, 1]"),
        ("max_tokens", max_tokens, type(max_tokens) is int and max_tokens >= 1, "must be an integer >= 1"),
    ):
        if not ok:
            raise InvalidConfig(f"{owner}: {name}={value!r} is invalid: {rule}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN
