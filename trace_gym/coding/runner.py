"""Deprecated: the in-jail test runner moved to `trace_gym.sandbox.runner`.

Its names are still importable from here for one release, each with a DeprecationWarning
naming the new module (`trace_gym.deprecation.moved`); this module goes in the release after.
"""

from trace_gym.deprecation import moved

__getattr__ = moved(__name__, "trace_gym.sandbox.runner", ("MARK", "exception_name", "main"))
