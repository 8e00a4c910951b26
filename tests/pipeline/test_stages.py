"""A stage is one module and a line in `STAGES`: a toy stage added that way gets its table
in the configuration (unknown keys refused), its flags on the command line, its place in the
dry run, the clock and the report, and the stage cache (a rerun reuses it), without a word
changed anywhere else."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

from trace_gym.errors import InvalidConfig
from trace_gym.pipeline.contract import Block, Record, RunConfig, Stage, StageTable, State, Step
from trace_gym.pipeline.stages.analysis import STAGE as ANALYSIS


@dataclass(frozen=True)
class SummaryTable(StageTable):
    """`[summary]`."""

    TABLE: ClassVar[str] = "summary"
    heading: str = "Summary"
    """The report's heading of the stage's section."""
    top: int = 3
    """How many capabilities the summary names."""


@dataclass
class Summary(Record):
    """The capabilities named."""

    names: list[str]


class SummaryStage(Stage[SummaryTable, Summary]):
    """Names the analysis's first capabilities, writing them to a file."""

    name, table, record = "summary", SummaryTable, Summary
    runs = 0

    def inputs(self, state: State) -> dict[str, Any]:
        return {"analysis": state.get(ANALYSIS).to_json(), "section": self.config(state.config).values()}

    def run(self, directory: Path, state: State) -> Summary:
        type(self).runs += 1
        names = [c.name for c in state.get(ANALYSIS).capabilities][: self.config(state.config).top]
        (directory / "summary.txt").write_text("\n".join(names))
        return Summary(names)

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        return [Step(self.name, f"name the first {self.config(config).top} capabilities", 0.0, "no model")]

    def report(self, state: State) -> list[Block]:
        return [Block("h2", self.config(state.config).heading), Block("p", "Named: " + ", ".join(state.get(self).names) + ".")]


@pytest.fixture
def with_summary(monkeypatch):
    """STAGES with the toy after the analysis, and only the stages it needs before it (a smoke
    pipeline of four stages: the fixture agent, two rollouts a target)."""
    from trace_gym.pipeline import stages

    toy = SummaryStage()
    monkeypatch.setattr(stages, "STAGES", [*stages.STAGES[:3], toy])
    return toy


def test_a_toy_stage_added_to_the_list_runs_in_a_smoke_pipeline_and_is_reused(tmp_path, with_summary, capsys):
    from trace_gym.cli import main
    from trace_gym.pipeline.plan import dry_run
    from trace_gym.pipeline.run import run_pipeline

    config = tmp_path / "run.toml"
    config.write_text("[base_agent]\nfixture = true\n[rollout]\nepisodes = 2\nmax_new_tokens = 16\n"
                      "[summary]\ntop = 2\n")
    state = run_pipeline(config, tmp_path / "run", "smoke")
    assert state.get(with_summary).names == [c.name for c in state.get(ANALYSIS).capabilities][:2]
    assert (tmp_path / "run" / "summary" / "summary.txt").is_file() and with_summary.runs == 1
    report = (tmp_path / "run" / "report.md").read_text()
    assert "## Summary\n\nNamed: " in report and "| summary |" in report
    assert "summary             0.0 min  name the first 2 capabilities" in dry_run(config, "smoke")

    again = run_pipeline(config, tmp_path / "run", "smoke")
    assert "summary" in again.run.skipped and with_summary.runs == 1
    flagged = run_pipeline(config, tmp_path / "run", "smoke", overrides={"summary": {"top": 1}})
    assert flagged.get(with_summary).names == state.get(with_summary).names[:1] and with_summary.runs == 2

    with pytest.raises(SystemExit):
        main(["pipeline", "--help"])
    assert "--summary-top INT" in capsys.readouterr().out

    config.write_text("[summary]\ntops = 2\n")
    with pytest.raises(InvalidConfig, match=r"\[summary\] has unknown key\(s\) \['tops'\]; allowed: heading, top"):
        run_pipeline(config, tmp_path / "other", "smoke")


def test_without_the_stage_its_table_is_refused(tmp_path):
    from trace_gym.pipeline.config import load

    config = tmp_path / "run.toml"
    config.write_text("[summary]\ntop = 2\n")
    with pytest.raises(InvalidConfig, match=r"unknown table\(s\) \['summary'\]"):
        load(config)
