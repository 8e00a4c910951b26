"""Deprecated: the old name of `trace_gym.capability_env` (the base every capability env builds
on), kept importable for one release. Its name did not tell it from `trace_gym.capabilities`,
the capability names and descriptions. Generated env modules written against it still pass
the audit (`trace_gym.audit.static.DEPRECATED_MODULES`)."""

from __future__ import annotations

import warnings
from typing import Any

import trace_gym.capability_env as _new


def __getattr__(name: str) -> Any:
    # Every public name of the new module, with a warning that names where it is now.
    if name.startswith("_") or not hasattr(_new, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"trace_gym.capability is deprecated: import {name} from trace_gym.capability_env",
                  DeprecationWarning, stacklevel=2)
    return getattr(_new, name)
