"""Deprecated: the old name of `trace_gym.worlds.generic_tools` (the two generic tools both tau2
domains share, `calculate` and `transfer_to_human_agents`), kept importable for one release.
Its name did not tell it from `trace_gym.tools`, the Tool machinery."""

from trace_gym.deprecation import moved

__getattr__ = moved(__name__, "trace_gym.worlds.generic_tools")
