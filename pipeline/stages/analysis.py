"""Stage 3, the capability analysis of the rollouts (`trace_gym.analysis`), and where its
selected capabilities are written. A known capability of another domain than the run's is
not selected: its env trains another domain's agent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trace_gym.pipeline.contract import Block, Record, RunConfig, Stage, StageTable, State, Step
from trace_gym.pipeline.domains import DEFAULT_DOMAIN, PIPELINE_DOMAINS
from trace_gym.pipeline.stages.rollouts import STAGE as ROLLOUTS


@dataclass(frozen=True)
class AnalysisTable(StageTable):
    """`[analysis]`: which labeller, how many labelling runs."""

    TABLE: ClassVar[str] = "analysis"
    labeller: str = "programmatic"
    """"programmatic" (no model) or "llm" (an analyst endpoint: base_url, model)."""
    runs: int = 10
    """Isolated labelling runs (a capability is selected when it passes in 8 of 10)."""
    base_url: str = ""
    """The analyst's OpenAI-compatible endpoint (labeller "llm")."""
    model: str = ""
    """The analyst's model name (labeller "llm")."""


@dataclass
class CapabilityRow(Record):
    """One capability's status and its mean Delta and coverage over the runs."""

    name: str
    status: str
    mean_delta: float | None
    mean_cov: float | None


@dataclass
class Analysis(Record):
    """The analysis: the selected-capabilities file and a row per capability."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ("notes",)
    selected: str
    capabilities: list[CapabilityRow]
    notes: list[str] | None = None


def in_domain(config: RunConfig) -> dict[str, str]:
    """The domain, named in a stage's inputs only off the default, so that runs made before
    the key existed stay reusable."""
    return {} if config.domain == DEFAULT_DOMAIN else {"domain": config.domain}


class AnalysisStage(Stage[AnalysisTable, Analysis]):
    """Stage 3: which capabilities the base agent lacks."""

    name, table, record = "analysis", AnalysisTable, Analysis

    def inputs(self, state: State) -> dict[str, Any]:
        """The rollouts, the table and the domain."""
        return {"runs": state.get(ROLLOUTS).to_json(), "section": self.config(state.config).values(),
                **in_domain(state.config)}

    def run(self, directory: Path, state: State) -> Analysis:
        """Analyse the rollouts; another domain's capabilities are not selected."""
        from trace_gym import capabilities as cap
        from trace_gym.analysis.aggregate import Params, default_k
        from trace_gym.analysis.pipeline import AnalysisConfig, analyze

        config, table = state.config, self.config(state.config)
        n, llm = table.runs, table.labeller == "llm"
        data = analyze([Path(f.path) for f in state.get(ROLLOUTS).files.values()], directory, AnalysisConfig(
            labeller=table.labeller, runs=n, params=Params(k=default_k(n), n=n),
            base_url=table.base_url or None if llm else None, model=table.model or None if llm else None))
        domain = PIPELINE_DOMAINS[config.domain]
        foreign = set(cap.ALL) - set(domain.capability_envs)
        out = Analysis(str(directory / "selected_capabilities.json"), [])
        for c in data["capabilities"]:
            row = CapabilityRow(c["name"], c["status"], c.get("mean_delta"), c.get("mean_cov"))
            if c["name"] in foreign and c["status"] != "NOT_SELECTED":
                row.status = "NOT_SELECTED"
                out.notes = [*(out.notes or []), (f"{c['name']}: selected by the analysis ({c['status']}) but a "
                                                 f"capability of another domain than {domain.name!r}; not trained")]
            out.capabilities.append(row)
        return out

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """No model for the programmatic labeller; an analyst endpoint is not estimated."""
        table = self.config(config)
        programmatic = table.labeller == "programmatic"
        return [Step(self.name, f"{table.labeller} labeller, {table.runs} runs", 0.0 if programmatic else None,
                     "no model" if programmatic else "an analyst endpoint")]

    def report(self, state: State) -> list[Block]:
        """The capabilities' table and the Delta-coverage chart."""
        fmt = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)
        rows = [[c.name, c.status, fmt(c.mean_delta), fmt(c.mean_cov)] for c in state.get(self).capabilities]
        out = [Block("h2", "Capability analysis"),
               Block("table", rows=[["capability", "status", "mean Delta", "mean coverage"], *rows])]
        chart = state.out / "analysis" / "capabilities.png"
        if chart.is_file():
            out.append(Block("image", "Delta and coverage per capability, with the thresholds", path=chart))
        return out


STAGE = AnalysisStage()
