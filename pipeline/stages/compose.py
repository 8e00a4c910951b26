"""Stage 8, composition: the adapters composed into a task router and a token-level mixture
(`trace_gym.moe`); the gates learn from the adapters' own successes, or from the oracle on
plumbing budgets. A served base agent gets the task router only: the mixture needs the
model's weights in this process."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from trace_gym.agents.spec import PolicySpec
from trace_gym.errors import InvalidConfig
from trace_gym.jsondata import write_json_atomic
from trace_gym.pipeline import estimates
from trace_gym.pipeline.contract import Block, Contender, Record, RunConfig, Stage, StageTable, State, Step
from trace_gym.pipeline.playing import codes, play
from trace_gym.pipeline.stages.base_agent import STAGE as BASE_AGENT
from trace_gym.pipeline.stages.base_agent import endpoint
from trace_gym.pipeline.stages.train import STAGE as TRAIN
from trace_gym.pipeline.stages.train import Adapter
from trace_gym.provenance import dir_sha256
from trace_gym.seeding import band

GATE_DATA = ("adapters", "oracle")


@dataclass(frozen=True)
class ComposeTable(StageTable):
    """`[compose]`: the gates' training data and epochs."""

    TABLE: ClassVar[str] = "compose"
    episodes: int = 32
    """Episodes of each adapter (or the oracle) for gate data."""
    epochs: int = 3
    """Epochs of gate training."""
    gate_data: str = "adapters"
    """Whose successes the gates learn from: "adapters" or "oracle" (plumbing budgets)."""

    def __post_init__(self) -> None:
        if self.gate_data not in GATE_DATA:
            raise InvalidConfig(f"[compose] gate_data={self.gate_data!r}; allowed: {', '.join(GATE_DATA)}")


@dataclass
class Composition(Record):
    """The composition's directory, the mixture's (or router's) hash, the gate data used and
    the routing report."""

    directory: str
    sha256: str
    gate_data: str
    routing: dict[str, Any]


SERVED_MIXTURE = ("no mixture: the base agent is served ([base_agent] base_url), and the token-level mixture needs "
                  "the model's weights in this process (a GPU at model scale); the task router is the composition "
                  "the server plays")
"""Why a served run composes the task router only."""


def compose_served(adapters: dict[str, Adapter], directory: Path) -> Composition:
    """The composition of a served base agent: the task router only (`router.json`: each
    capability's adapter and env), played on the server by the "served_router" policy."""
    from trace_gym.moe.composition import capability_of

    names = {capability_of(env_id): env_id for env_id in adapters}
    directory.mkdir(parents=True, exist_ok=True)
    write_json_atomic(directory / "router.json", {
        "adapters": {name: str(Path(adapters[env_id].adapter).resolve()) for name, env_id in names.items()},
        "envs": names})
    routing: dict[str, Any] = {"accuracy": {}, "note": SERVED_MIXTURE}
    write_json_atomic(directory / "routing.json", routing)
    return Composition(str(directory), dir_sha256(directory / "router.json"), "none", routing)


class ComposeStage(Stage[ComposeTable, Composition]):
    """Stage 8: the router and the mixture over the adapters."""

    name, table, record = "compose", ComposeTable, Composition

    def skip(self, state: State) -> str | None:
        """Nothing to compose without an adapter."""
        return None if state.get(TRAIN).adapters else "No adapter was trained, so there is nothing to compose."

    def inputs(self, state: State) -> dict[str, Any]:
        """The agent, the adapters, the table, the knobs and the adapters' envs' code."""
        adapters = state.get(TRAIN).adapters
        return {"agent": state.get(BASE_AGENT).to_json(), "adapters": state.get(TRAIN).to_json()["adapters"],
                "section": self.config(state.config).values(), "knobs": state.config.env_knobs,
                "code": codes(adapters)}

    def run(self, directory: Path, state: State) -> Composition:
        """Compose the adapters (the router only for a served agent)."""
        from trace_gym.moe.composition import compose
        from trace_gym.moe.config import ComposeConfig, GateConfig

        config, table = state.config, self.config(state.config)
        adapters = state.get(TRAIN).adapters
        envs = list(adapters)
        if endpoint(config) is not None:
            return compose_served(adapters, directory)
        trajectories = None
        if table.gate_data == "oracle":  # plumbing budgets: the fixture agent succeeds at nothing
            trajectories = {}
            seeds = band("gate_oracle", table.episodes)
            for env_id in envs:
                path = directory / "oracle" / f"{env_id.split('/')[1]}.jsonl"
                trajectories[env_id] = play(env_id, PolicySpec("oracle"), seeds, path, config, 1)
        compose(state.get(BASE_AGENT).path, [adapters[e].adapter for e in envs], envs, directory,
                ComposeConfig(episodes=table.episodes, gates=GateConfig(epochs=table.epochs)),
                env_kwargs={e: config.knobs(e) for e in envs}, trajectories=trajectories)
        return Composition(str(directory), dir_sha256(directory / "mixture"), table.gate_data,
                           json.loads((directory / "routing.json").read_text()))

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """The gate data's episodes (gate training not counted); nothing for a served agent."""
        if endpoint(config):  # the server plays the router; the mixture needs the weights in this process
            return [Step(self.name, "the task router only (no mixture: it needs the model's weights in this "
                                    "process)", 0.0, "writes router.json")]
        table = self.config(config)
        return [estimates.episodes(self.name, f"{table.episodes} episodes of each adapter for gate data, "
                                              f"{table.epochs} epochs of gate training (not counted)",
                                   estimates.player(1.0),
                                   {e: table.episodes for e in estimates.capability_envs(config)})]

    def rows(self, config: RunConfig) -> int:
        """The router, and the mixture where the weights are in this process."""
        return 1 if endpoint(config) else 2

    def contenders(self, state: State, max_new_tokens: int) -> dict[str, Contender]:
        """The router and the mixture (the router on the server, for a served agent)."""
        composed, served = state.find(self), endpoint(state.config)
        if composed is None:
            return {}
        if served is not None:
            return {"router": Contender(PolicySpec("served_router", {
                "base_url": served["base_url"], "model": served["model"], "compose_dir": composed.directory,
                "temperature": 0.0, "max_tokens": max_new_tokens}))}
        sampling = {"model_path": state.get(BASE_AGENT).path, "compose_dir": composed.directory,
                    "temperature": 0.0, "max_new_tokens": max_new_tokens}
        return {name: Contender(PolicySpec(name, dict(sampling))) for name in ("router", "mixture")}

    def contender_inputs(self, state: State) -> dict[str, Any]:
        """The composition decides its rows (None: no composition)."""
        composed = state.find(self)
        return {"compose": composed.to_json() if composed else None}

    def report(self, state: State) -> list[Block]:
        """The routing accuracy and the routing heat map, or why there is no composition."""
        out = [Block("h2", "Composition")]
        composed = state.find(self)
        if composed is None:
            return [*out, Block("p", state.notes.get(self.name, "No composition."))]
        if composed.routing.get("note"):
            out.append(Block("p", composed.routing["note"] + "."))
        else:
            out.append(Block("p", f"Gate data: {composed.gate_data} trajectories. Held-out routing accuracy: " +
                             ", ".join(f"{k} {v:.3f}" for k, v in composed.routing["accuracy"].items()) + "."))
        heat = Path(composed.directory) / "routing.png"
        if heat.is_file():
            out.append(Block("image", "expert chosen per token and layer, one held-out trajectory", path=heat))
        return out


STAGE = ComposeStage()
