"""The last stage, evaluation: every contender the stages before it offer (the base agent,
each adapter, the composition, the baselines) on the first test seeds of each target, greedy,
each pass rate with a 95% bootstrap interval."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trace_gym.pipeline import estimates
from trace_gym.pipeline.contract import Block, Contender, PlayingTable, Record, RunConfig, Stage, State, Step
from trace_gym.pipeline.playing import codes, play


@dataclass(frozen=True)
class EvalTable(PlayingTable):
    """`[eval]`: how many test seeds, and the generation length and batch of every contender."""

    TABLE: ClassVar[str] = "eval"
    seeds: int = 16
    """Test seeds per target (the first of the test split)."""


@dataclass
class Cell(Record):
    """One contender on one target."""

    pass_rate: float
    ci95: list[float]
    episodes: int
    mean_reward: float
    records: str


@dataclass
class Evaluation(Record):
    """Label -> target -> its cell; the rows' order; the test seeds per target."""

    table: dict[str, dict[str, Cell]]
    order: list[str]
    seeds: int


def _contenders(state: State, stage: EvalStage) -> dict[str, Contender]:
    """The rows the stages before `stage` offer, in the stages' order."""
    out: dict[str, Contender] = {}
    tokens = stage.config(state.config).max_new_tokens
    for earlier in state.stages[:state.stages.index(stage)]:
        out.update(earlier.contenders(state, tokens))
    return out


class EvalStage(Stage[EvalTable, Evaluation]):
    """The final table."""

    name, table, record = "eval", EvalTable, Evaluation

    def inputs(self, state: State) -> dict[str, Any]:
        """What the earlier stages say decides their rows, the table, the targets, their knobs
        and code, and the rows' labels."""
        config = state.config
        out: dict[str, Any] = {}
        for earlier in state.stages[:state.stages.index(self)]:
            out.update(earlier.contender_inputs(state))
        return {**out, "section": self.config(config).values(), "targets": list(config.targets),
                "knobs": config.env_knobs, "code": codes(config.targets),
                "policies": sorted(_contenders(state, self))}

    def run(self, directory: Path, state: State) -> Evaluation:
        """Each contender on each target's first test seeds."""
        from trace_gym.evaluation import bootstrap_interval
        from trace_gym.seeding import seeds as split_seeds

        config, table = state.config, self.config(state.config)
        contenders = _contenders(state, self)
        seeds = list(split_seeds("test", 0, table.seeds))
        cells: dict[str, dict[str, Cell]] = {}
        for env_id in config.targets:
            for label, contender in contenders.items():
                path = directory / f"{env_id.split('/')[1]}-{label.replace(' ', '_')}.jsonl"
                records = play(env_id, contender.spec, seeds, path, config, table.batch,
                               knobs_added=contender.knobs.get(env_id, {}))
                passes = [float(r["passed"]) for r in records]
                lo, hi = bootstrap_interval(passes)
                cells.setdefault(label, {})[env_id] = Cell(sum(passes) / len(passes), [lo, hi], len(passes),
                                                           sum(r["reward"] for r in records) / len(records), str(path))
        return Evaluation(cells, list(contenders), len(seeds))

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """Every row's greedy episodes: as many rows as the stages before it may offer."""
        from trace_gym.pipeline.stages.base_agent import endpoint

        table, served = self.config(config), endpoint(config)
        contenders = sum(stage.rows(config) for stage in before)
        work = f"{contenders} policies x {table.seeds} greedy test episodes of each target"
        if served:  # every row on the endpoint (the adapters loaded at runtime)
            return [Step(self.name, work, None, f"every row plays on the endpoint {served['base_url']}: no rate is "
                                                "measured for a server")]
        return [estimates.episodes(self.name, work, estimates.player(0.0),
                                   {t: contenders * table.seeds for t in config.targets})]

    def report(self, state: State) -> list[Block]:
        """The final table."""
        result, targets = state.get(self), state.config.targets
        styles = "/".join(sorted({state.config.knobs(t).get("prompt_style", "full") for t in targets}))
        out = [Block("h2", "Final evaluation"),
               Block("p", f"Pass rate on the first {result.seeds} test seeds of each target (greedy, {styles} "
                          "prompts), with a 95% bootstrap interval."),
               Block("table", rows=[["policy", *targets]] + [
                   [label, *(f"{result.table[label][t].pass_rate:.3f} [{result.table[label][t].ci95[0]:.3f}, "
                             f"{result.table[label][t].ci95[1]:.3f}]" for t in targets)] for label in result.order])]
        if result.seeds < 64:
            out.append(Block("p", f"At this budget ({result.seeds} test seeds per target) the intervals are wide: "
                                  "differences between the rows are not evidence either way. "
                                  "`benchmarks/mini_trace.py` measures the paper's claims at a larger budget."))
        return out


STAGE = EvalStage()
