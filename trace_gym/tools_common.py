"""Deprecated: the old name of `trace_gym.worlds.generic_tools` (the two generic tools both tau2
domains share, `calculate` and `transfer_to_human_agents`), kept importable for one release.
Its name did not tell it from `trace_gym.tools`, the Tool machinery."""

from __future__ import annotations

import warnings
from typing import Any

import trace_gym.worlds.generic_tools as _new


def __getattr__(name: str) -> Any:
    # Every public name of the new module, with a warning that names where it is now.
    if name.startswith("_") or not hasattr(_new, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"trace_gym.tools_common is deprecated: import {name} from trace_gym.worlds.generic_tools",
                  DeprecationWarning, stacklevel=2)
    return getattr(_new, name)
