"""Deprecated: the old name of `trace_gym.validation` (the validation of configuration
dataclasses), kept importable for one release. Its name read as if it held run
configurations, which are `trace_gym.runconfig`'s."""

from __future__ import annotations

import warnings
from typing import Any

import trace_gym.validation as _new


def __getattr__(name: str) -> Any:
    # Every public name of the new module, with a warning that names where it is now.
    if name.startswith("_") or not hasattr(_new, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"trace_gym.config is deprecated: import {name} from trace_gym.validation",
                  DeprecationWarning, stacklevel=2)
    return getattr(_new, name)
