"""Deprecated: the old name of `trace_gym.capability_env` (the base every capability env builds
on), kept importable for one release. Its name did not tell it from `trace_gym.capabilities`,
the capability names and descriptions. Generated env modules written against it still pass
the audit (`trace_gym.audit.static.DEPRECATED_MODULES`)."""

from trace_gym.deprecation import moved

__getattr__ = moved(__name__, "trace_gym.capability_env")
