"""Step 3 of TRACE: one LoRA adapter per capability, trained with group-by-seed GRPO.

`train(GRPOConfig(env_id=...), base, out)` trains one adapter (`trace_gym.trainer.grpo` is the
algorithm, read in one sitting; `trace-gym train` the command)."""

from trace_gym.trainer.config import GRPOConfig
from trace_gym.trainer.training import train

__all__ = ["GRPOConfig", "train"]
