"""Step 4 of TRACE: composing capability adapters (task routing, gated mixture of LoRA experts).

`compose(base, adapters, envs, out, ComposeConfig())` writes the task router and the trained
mixture; the `router` and `mixture` policies play them (`trace_gym.moe.policy`)."""

from trace_gym.moe.composition import ComposeConfig, compose
from trace_gym.moe.gates import GateConfig

__all__ = ["ComposeConfig", "GateConfig", "compose"]
