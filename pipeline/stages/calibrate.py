"""Stage 6, calibration: the base agent at temperature 1.0 on each trainable env, against the
calibration bands (mean reward and success rate in [0.2, 0.6], reward std at least 0.05)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trace_gym.pipeline import estimates
from trace_gym.pipeline.contract import Block, Record, RunConfig, Stage, StageTable, State, Step
from trace_gym.pipeline.playing import codes, play
from trace_gym.pipeline.stages.audit import STAGE as AUDIT
from trace_gym.pipeline.stages.base_agent import STAGE as BASE_AGENT
from trace_gym.pipeline.stages.base_agent import base_spec
from trace_gym.pipeline.stages.rollouts import RolloutTable
from trace_gym.seeding import band


@dataclass(frozen=True)
class CalibrateTable(StageTable):
    """`[calibrate]`: how many seeds and samples of each env."""

    TABLE: ClassVar[str] = "calibrate"
    seeds: int = 8
    """Calibration seeds per env."""
    samples: int = 4
    """Episodes per seed (temperature 1.0)."""


@dataclass
class EnvCalibration(Record):
    """One env's calibration figures and whether they fall in the bands."""

    mean_reward: float
    success_rate: float
    reward_std: float
    calibrated: bool
    problems: list[str]


@dataclass
class Calibration(Record):
    """Env id -> its calibration (stored as that dict itself)."""

    envs: dict[str, EnvCalibration]

    def to_json(self) -> dict[str, Any]:
        """The envs' dict, as the untyped record was."""
        return {env_id: c.to_json() for env_id, c in self.envs.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        """From the envs' dict."""
        return cls({env_id: EnvCalibration.from_json(c) for env_id, c in data.items()})


class CalibrateStage(Stage[CalibrateTable, Calibration]):
    """Stage 6: the base agent's calibration on each trainable env."""

    name, table, record = "calibrate", CalibrateTable, Calibration

    def inputs(self, state: State) -> dict[str, Any]:
        """The agent, the audit, the table, the knobs and the trainable envs' code."""
        config = state.config
        return {"agent": state.get(BASE_AGENT).to_json(), "audit": state.get(AUDIT).to_json(),
                "section": self.config(config).values(), "knobs": config.env_knobs,
                "code": codes(e.env_id for e in state.get(AUDIT).trainable)}

    def run(self, directory: Path, state: State) -> Calibration:
        """Play each trainable env at temperature 1.0 and check the bands."""
        from trace_gym.calibration import Bands
        from trace_gym.calibration import calibrate as check

        config, table = state.config, self.config(state.config)
        rollout = config.table(RolloutTable)
        spec = base_spec(config, state.get(BASE_AGENT), 1.0, rollout.max_new_tokens)
        seeds = band("calibration", table.seeds)
        out = {}
        for env in state.get(AUDIT).trainable:
            records = play(env.env_id, spec, seeds, directory / f"{env.capability}.jsonl", config, rollout.batch,
                           samples=table.samples)
            result = check(records, Bands())
            out[env.env_id] = EnvCalibration(result["mean_reward"], result["success_rate"], result["reward_std"],
                                             result["calibrated"], list(result["problems"]))
        return Calibration(out)

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """The sampled episodes of every capability env of the domain (an upper bound)."""
        table = self.config(config)
        _, sampled = estimates.base_players(config)
        return [estimates.episodes(self.name, f"{table.seeds} seeds x {table.samples} samples of each env at "
                                              "temperature 1.0", sampled,
                                   {e: table.seeds * table.samples for e in estimates.capability_envs(config)})]

    def report(self, state: State) -> list[Block]:
        """The calibration table."""
        rows = [[env, f"{c.mean_reward:.3f}", f"{c.success_rate:.3f}", f"{c.reward_std:.3f}",
                 "yes" if c.calibrated else "no: " + "; ".join(c.problems)] for env, c in state.get(self).envs.items()]
        return [Block("h2", "Calibration of the base agent (temperature 1.0)"),
                Block("table", rows=[["env", "mean reward", "success rate", "reward std", "in the bands"], *rows])]


STAGE = CalibrateStage()
