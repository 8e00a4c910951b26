"""Deprecated: the command jail moved to `trace_gym.sandbox.jail`.

Its names are still importable from here for one release, each with a DeprecationWarning
naming the new module (`trace_gym.deprecation.moved`); this module goes in the release after.
"""

from trace_gym.deprecation import moved

__getattr__ = moved(__name__, "trace_gym.sandbox.jail", (
    "SANDBOX_BIN", "SANDBOX_ENV", "SANDBOX_REPO", "SANDBOX_UID", "TMP_BYTES", "CommandLimits", "CommandResult",
    "process_cap", "process_memory", "python_argv", "run_in_repo", "sandbox_available", "shm_bytes", "tmp_bytes",
))
