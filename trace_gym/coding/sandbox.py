"""Deprecated: the command jail moved to `trace_gym.sandbox.jail`.

Its names are still importable from here for one release, each with a DeprecationWarning
naming the new module; this module goes in the release after.
"""

from __future__ import annotations

import warnings
from typing import Any

NEW_MODULE = "trace_gym.sandbox.jail"
"""Where the names of this module live now."""
_MOVED = frozenset({
    "SANDBOX_BIN", "SANDBOX_ENV", "SANDBOX_REPO", "SANDBOX_UID", "TMP_BYTES", "CommandLimits", "CommandResult",
    "process_cap", "process_memory", "python_argv", "run_in_repo", "sandbox_available", "shm_bytes", "tmp_bytes",
})


def __getattr__(name: str) -> Any:
    """A name that moved to `NEW_MODULE`, from there, with a DeprecationWarning."""
    if name not in _MOVED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{__name__}.{name} moved to {NEW_MODULE}.{name}: import it from {NEW_MODULE} ({__name__} "
                  "goes in the next release)", DeprecationWarning, stacklevel=2)
    from trace_gym.sandbox import jail

    return getattr(jail, name)
