"""Stage 5, the audit: which chosen envs may be trained on, as `trace_gym.registry.trust`
decides (generated code needs a passing audit for its current code, kit and library)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym.pipeline.contract import Record, RunConfig, Stage, State, Step
from trace_gym.pipeline.stages.envs import STAGE as ENVS


@dataclass
class AuditedEnv(Record):
    """A chosen env, how it runs ("in process", "isolated" or "refused") and why."""

    capability: str
    env_id: str
    origin: str
    runs: str
    audit: str


@dataclass
class Audited(Record):
    """Every chosen env's decision, and the trainable ones."""

    envs: list[AuditedEnv]
    trainable: list[AuditedEnv]


class AuditStage(Stage[Any, Audited]):
    """Stage 5: the trust decision of every chosen env."""

    name, record = "audit", Audited

    def inputs(self, state: State) -> dict[str, Any]:
        """The chosen envs and the audit kit's version and library hash."""
        from trace_gym.audit.lock import current_key

        return {"envs": state.get(ENVS).to_json(), "kit": current_key()}

    def run(self, directory: Path, state: State) -> Audited:
        """Ask the registry about each env."""
        from trace_gym.registry import REFUSED, trust

        out = []
        for env in state.get(ENVS).envs:
            decision = trust(env.env_id, training=True)
            out.append(AuditedEnv(env.capability, env.env_id, env.origin, decision.mode, decision.reason))
        return Audited(out, [e for e in out if e.runs != REFUSED])

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """Shipped envs carry their audit records; a synthesized one is audited when written."""
        return [Step(self.name, "the trust decision of each chosen env", 0.0, "audit records")]


STAGE = AuditStage()
