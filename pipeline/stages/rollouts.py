"""Stage 2, rollouts: the base agent's greedy episodes on each target's analysis seeds, the
material of the capability analysis."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trace_gym.pipeline import estimates
from trace_gym.pipeline.contract import PlayingTable, Record, RunConfig, Stage, State, Step
from trace_gym.pipeline.playing import codes, play
from trace_gym.pipeline.stages.base_agent import STAGE as BASE_AGENT
from trace_gym.pipeline.stages.base_agent import base_spec
from trace_gym.provenance import dir_sha256
from trace_gym.seeding import band


@dataclass(frozen=True)
class RolloutTable(PlayingTable):
    """`[rollout]`: the analysis rollouts, and the generation length and batch every episode
    of the base agent plays with (calibration's too)."""

    TABLE: ClassVar[str] = "rollout"
    episodes: int = 32
    """Train seeds per target."""


@dataclass
class RolloutFile(Record):
    """One target's records: where, their hash and the base agent's pass rate."""

    path: str
    sha256: str
    pass_rate: float


@dataclass
class Rollouts(Record):
    """Target -> its records."""

    files: dict[str, RolloutFile]


class RolloutsStage(Stage[RolloutTable, Rollouts]):
    """Stage 2: the base agent's greedy rollouts on each target's train seeds."""

    name, table, record = "rollouts", RolloutTable, Rollouts

    def inputs(self, state: State) -> dict[str, Any]:
        """The agent, the table, the targets, their knobs and code."""
        config = state.config
        return {"agent": state.get(BASE_AGENT).to_json(), "section": self.config(config).values(),
                "targets": list(config.targets), "knobs": config.env_knobs, "code": codes(config.targets)}

    def run(self, directory: Path, state: State) -> Rollouts:
        """Each target's file, hash and pass rate."""
        config, table = state.config, self.config(state.config)
        spec = base_spec(config, state.get(BASE_AGENT), 0.0, table.max_new_tokens)
        seeds = band("analysis_rollouts", table.episodes)
        files = {}
        for env_id in config.targets:
            path = directory / f"{env_id.split('/')[1]}.jsonl"
            records = play(env_id, spec, seeds, path, config, table.batch)
            files[env_id] = RolloutFile(str(path), dir_sha256(path), sum(r["passed"] for r in records) / len(records))
        return Rollouts(files)

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """The greedy episodes at the base agent's rate."""
        table = self.config(config)
        greedy, _ = estimates.base_players(config)
        return [estimates.episodes(self.name, f"{table.episodes} greedy train episodes of each target", greedy,
                                   {t: table.episodes for t in config.targets})]


STAGE = RolloutsStage()
