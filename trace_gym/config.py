"""Deprecated: the old name of `trace_gym.validation` (the validation of configuration
dataclasses), kept importable for one release. Its name read as if it held run
configurations, which are `trace_gym.runconfig`'s."""

from trace_gym.deprecation import moved

__getattr__ = moved(__name__, "trace_gym.validation")
