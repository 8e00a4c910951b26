"""Stage 4, the envs: one per selected capability, the shipped one of its name (the domain's
env of that capability), or one synthesized when an endpoint is configured (`[synthesis]`);
notes say which capabilities got none."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trace_gym.pipeline.contract import Block, Record, RunConfig, Stage, StageTable, State, Step
from trace_gym.pipeline.domains import PIPELINE_DOMAINS
from trace_gym.pipeline.estimates import capability_envs
from trace_gym.pipeline.stages.analysis import STAGE as ANALYSIS
from trace_gym.pipeline.stages.analysis import in_domain
from trace_gym.pipeline.stages.rollouts import STAGE as ROLLOUTS


@dataclass(frozen=True)
class SynthesisTable(StageTable):
    """`[synthesis]`: the endpoint that writes an env for a capability no shipped env has."""

    TABLE: ClassVar[str] = "synthesis"
    base_url: str = ""
    """The synthesis agent's OpenAI-compatible endpoint ("" : shipped envs only)."""
    model: str = ""
    """Its model name."""
    attempts: int = 5
    """Syntheses per capability at most before it is given up."""


@dataclass
class ChosenEnv(Record):
    """A capability's env and where it came from ("shipped" or "synthesized")."""

    capability: str
    env_id: str
    origin: str


@dataclass
class Envs(Record):
    """The chosen envs, and why any selected capability has none."""

    envs: list[ChosenEnv]
    notes: list[str]


class EnvsStage(Stage[SynthesisTable, Envs]):
    """Stage 4: an env per selected capability."""

    name, table, record = "envs", SynthesisTable, Envs

    def inputs(self, state: State) -> dict[str, Any]:
        """The analysis, the table and the domain."""
        return {"analysis": state.get(ANALYSIS).to_json(), "section": self.config(state.config).values(),
                **in_domain(state.config)}

    def run(self, directory: Path, state: State) -> Envs:
        """The shipped env of each selected capability, or a synthesized one."""
        config, table, selected = state.config, self.config(state.config), state.get(ANALYSIS)
        chosen = [c for c in selected.capabilities if c.status != "NOT_SELECTED"]
        out = Envs([], list(selected.notes or []))
        pending = [c for c in chosen if c.status != "SHIPPED"]
        shipped = PIPELINE_DOMAINS[config.domain].capability_envs
        for c in chosen:
            if c.status == "SHIPPED":
                out.envs.append(ChosenEnv(c.name, shipped.get(c.name, f"trace/{c.name}-v0"), "shipped"))
        if pending and table.base_url:
            from openai import OpenAI

            from trace_gym.analysis.trajectories import load_records
            from trace_gym.synthesis import synthesize

            client = OpenAI(base_url=table.base_url, api_key="EMPTY", max_retries=3, timeout=600)

            def complete(messages: Any) -> str:
                return client.chat.completions.create(model=table.model or "default", messages=messages,
                                                      temperature=0.7).choices[0].message.content or ""

            records = load_records([Path(f.path) for f in state.get(ROLLOUTS).files.values()])
            for r in synthesize(Path(selected.selected), complete, records=records, run_dir=directory,
                                attempts=table.attempts):
                if r.status == "READY" and r.env_id is not None:
                    out.envs.append(ChosenEnv(r.capability, r.env_id, "synthesized"))
                else:
                    out.notes.append(f"{r.capability}: synthesis {r.status} after {r.attempts} attempt(s)")
        else:
            out.notes += [f"{c.name}: no shipped env has this name and no synthesis endpoint is configured "
                          "([synthesis] base_url); not trained" for c in pending]
        return out

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """Shipped envs cost nothing; a synthesis endpoint is not estimated."""
        return [Step(self.name, f"the selected capabilities' envs (at most {len(capability_envs(config))} shipped "
                                "ones)", 0.0, "shipped envs carry their audit records")]

    def report(self, state: State) -> list[Block]:
        """Why a selected capability got no env."""
        return [Block("p", note) for note in state.get(self).notes]


STAGE = EnvsStage()
