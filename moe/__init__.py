"""Step 4 of TRACE: composing capability adapters (task routing, gated mixture of LoRA experts).

`compose(base, adapters, envs, out, ComposeConfig())` writes the task router and the trained
mixture; the `router` and `mixture` policies play them (`trace_gym.moe.policy`)."""

from typing import Any

from trace_gym.moe.config import ComposeConfig, GateConfig

__all__ = ["ComposeConfig", "GateConfig", "compose"]


def __getattr__(name: str) -> Any:
    # `compose` is imported when first used: its module loads torch (seconds), and reading
    # the configs (`trace-gym compose --help`) should not.
    if name == "compose":
        from trace_gym.moe.composition import compose

        return compose
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
