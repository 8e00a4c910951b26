"""The pipeline's stages, in the order they run: each is one module (its table, inputs, run,
estimate and report; `trace_gym.pipeline.contract`), and this list is the only other place
that names it. The run loop, the configuration's tables, the dry run, the clock and the
report are all read off `STAGES`."""

from __future__ import annotations

from typing import Any

from trace_gym.pipeline.contract import Stage
from trace_gym.pipeline.stages import (
    analysis,
    audit,
    base_agent,
    baselines,
    calibrate,
    compose,
    envs,
    eval,
    rollouts,
    train,
)

STAGES: list[Stage[Any, Any]] = [base_agent.STAGE, rollouts.STAGE, analysis.STAGE, envs.STAGE, audit.STAGE,
                                 calibrate.STAGE, train.STAGE, compose.STAGE, baselines.STAGE, eval.STAGE]

__all__ = ["STAGES"]
