"""`trace-gym pipeline`: the four steps of TRACE end to end on one run directory.

base agent -> its rollouts on the targets' train seeds -> capability analysis -> the envs of
the selected capabilities (shipped, or synthesized when an endpoint is configured) -> their
audit -> calibration of the base agent on them -> one adapter per env -> composition (task
router and mixture) -> the baselines that are on (direct GRPO on each target with the same
rollout budget, GEPA's instructions) -> evaluation on the targets' test seeds -> the report.
The stages are `trace_gym.pipeline.stages.STAGES`, run in that order.

Every stage is skipped when its inputs are unchanged (`trace_gym.pipeline.contract.Run`), so
a second run reuses everything and a killed one resumes at the stage in flight.

`[pipeline] domain` (`--domain`) picks the targets and the capabilities the analysis may
select: "customer_service" (airline, retail) or "coding" (`trace/coding-v0`, whose base
agent is a given model served by vLLM, or the fixture on the smoke budget; the shipped
`coding` configuration).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from trace_gym.pipeline import report
from trace_gym.pipeline import stages as stage_list
from trace_gym.pipeline.clock import Clock, estimates
from trace_gym.pipeline.config import load
from trace_gym.pipeline.contract import Run, Stage, State
from trace_gym.pipeline.stages.eval import STAGE as EVAL
from trace_gym.progress import shows_progress, stderr_console

logger = logging.getLogger(__name__)

STEP_LOGGERS = ("trace_gym.baseagent", "trace_gym.analysis", "trace_gym.synthesis", "trace_gym.trainer",
                "trace_gym.moe")
"""The loggers of the steps a stage calls: their lines and bars stay under the pipeline's own
display (one live display at a time), which says what each stage does."""


def run_pipeline(config_path: str | Path | None = None, out: str | Path = "runs/pipeline", budget: str = "default",
                 overrides: dict[str, Any] | None = None,
                 domain: str | None = None, stages: list[Stage[Any, Any]] | None = None) -> State:
    """Run every stage (`stages`, default `STAGES`) on the run directory `out`, reusing each
    stage whose inputs are unchanged, and write the report (`domain`: `--domain`, over the
    file's). Returns the run's state: every stage's record. Its lines go to this module's
    logger, its live display to stderr where that logger shows INFO on a terminal."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    stages = list(stage_list.STAGES if stages is None else stages)
    config = load(config_path, budget, overrides, domain, stages=stages)
    console = stderr_console()
    state = State(config, Run(Path(out), logger.info), stages)
    live = shows_progress(logger) and console.is_terminal  # else a line a minute says what the display would
    timer = Clock(estimates(config, stages), logger.info, ticking=not live)

    class Left(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(timer.left(), style="dim")

    progress = Progress(TextColumn("pipeline {task.fields[stage]}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), Left(), console=console, disable=not live)
    with progress, timer:
        task = progress.add_task("pipeline", total=len(stages) + 1, stage="")
        for stage in stages:
            progress.update(task, stage=stage.name)
            timer.start(stage.name)
            why = stage.skip(state)
            if why is None:
                with _steps_quiet():
                    state.records[stage.name] = stage.execute(state.run, state)
            else:
                state.records[stage.name], state.notes[stage.name] = None, why
            progress.advance(task)
        progress.update(task, stage="report")
        timer.start("report")
        state.report = report.write(state)
        progress.update(task, completed=len(stages) + 1, stage="done")
    return state


@contextmanager
def _steps_quiet() -> Iterator[None]:
    """`STEP_LOGGERS` at WARNING for the while."""
    loggers = [logging.getLogger(name) for name in STEP_LOGGERS]
    levels = [each.level for each in loggers]
    for each in loggers:
        each.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for each, level in zip(loggers, levels):
            each.setLevel(level)


def main_table(state: State) -> str:
    """The final table as text, for the terminal."""
    result, targets = state.get(EVAL), state.config.targets
    lines = ["policy".ljust(36) + "".join(t.split("/")[1].ljust(24) for t in targets)]
    for label in result.order:
        row = result.table[label]
        lines.append(label.ljust(36) + "".join(
            f"{row[t].pass_rate:.3f} [{row[t].ci95[0]:.2f}, {row[t].ci95[1]:.2f}]".ljust(24) for t in targets))
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    print(main_table(run_pipeline(sys.argv[1] if len(sys.argv) > 1 else None)))
