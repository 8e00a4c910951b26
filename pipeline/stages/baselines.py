"""The baselines, after the method's own stages: direct GRPO on each target with the rollout
budget of all the adapters together (`direct_grpo`), and the base agent with GEPA's
instructions (`gepa`: the prompt evolved by a reflection model on train seeds,
`trace_gym.pipeline.gepa`). Each target's run is its own cached step."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from trace_gym.pipeline import estimates
from trace_gym.pipeline.contract import Block, Contender, Record, Run, RunConfig, Stage, StageTable, State, Step
from trace_gym.pipeline.playing import codes
from trace_gym.pipeline.stages.base_agent import STAGE as BASE_AGENT
from trace_gym.pipeline.stages.base_agent import adapter_spec, base_spec
from trace_gym.pipeline.stages.eval import EvalTable
from trace_gym.pipeline.stages.train import STAGE as TRAIN
from trace_gym.pipeline.stages.train import Adapter, curves, train_adapter, train_config, train_inputs
from trace_gym.seeding import band

NO_REFLECTION = ("GEPA is on but [baselines] gepa_base_url names no reflection model (an OpenAI-compatible "
                 "endpoint), so there is no GEPA row.")


@dataclass(frozen=True)
class BaselinesTable(StageTable):
    """`[baselines]`: which baselines run, and GEPA's budget."""

    TABLE: ClassVar[str] = "baselines"
    direct_grpo: bool = False
    """GRPO on each target directly, with the episodes of all the adapters together."""
    gepa: bool = False
    """GEPA's prompt optimisation of the base agent (needs gepa_base_url)."""
    gepa_base_url: str = ""
    """The reflection model's OpenAI-compatible endpoint."""
    gepa_model: str = ""
    """The reflection model's name."""
    gepa_max_metric_calls: int = 300
    """Episodes GEPA plays at most, per target."""
    gepa_train_seeds: int = 32
    """GEPA's minibatch seeds (train split)."""
    gepa_val_seeds: int = 16
    """GEPA's validation seeds (train split)."""


@dataclass
class Prompted(Record):
    """GEPA's result on one target: the best instructions and their validation score, with
    the seed candidate's."""

    instructions: str
    val_score: float
    seed_val_score: float
    candidates: int
    metric_calls: int


@dataclass
class Baselines(Record):
    """Target -> its direct-GRPO adapter; target -> GEPA's instructions; why GEPA did not run."""

    direct: dict[str, Adapter] = field(default_factory=dict)
    gepa: dict[str, Prompted] = field(default_factory=dict)
    note: str | None = None


class BaselinesStage(Stage[BaselinesTable, Baselines]):
    """The baselines the final table compares the method with."""

    name, table, record = "baselines", BaselinesTable, Baselines

    def execute(self, run: Run, state: State) -> Baselines:
        """Each target's direct GRPO and GEPA run as its own cached step."""
        config, table = state.config, self.config(state.config)
        agent, adapters = state.get(BASE_AGENT), state.get(TRAIN).adapters
        out = Baselines()
        if table.direct_grpo and adapters:
            recipe = train_config(config, config.targets[0])
            budget_episodes = sum(a.episodes for a in adapters.values())
            iterations = max(1, math.ceil(budget_episodes / (recipe.groups * recipe.group_size)))
            for target in config.targets:  # the same number of episodes as all adapters together
                out.direct[target] = Adapter.from_json(run.stage(
                    f"direct-{target.split('/')[1]}", {**train_inputs(config, agent, target), "iterations": iterations},
                    lambda d, t=target: train_adapter(config, agent, t, d, iterations=iterations,  # type: ignore[misc]
                                                      hint_fraction=0.0).to_json()))
        if table.gepa and not table.gepa_base_url:
            out.note = NO_REFLECTION
        elif table.gepa:
            evaluation = config.table(EvalTable)
            for target in config.targets:
                out.gepa[target] = Prompted.from_json(run.stage(
                    f"gepa-{target.split('/')[1]}", {"agent": agent.to_json(), "section": table.values(),
                                                     "knobs": config.env_knobs.get(target, {}),
                                                     "code": codes([target]), "eval": evaluation.values()},
                    lambda d, t=target: self._gepa(state, t, d)))  # type: ignore[misc]
        return out

    def _gepa(self, state: State, target: str, directory: Path) -> dict[str, Any]:
        """GEPA on one target: the base agent's instructions optimised on train seeds; the test
        seeds stay for the evaluation."""
        from trace_gym.pipeline.gepa import endpoint_lm, optimize_instructions

        config, table = state.config, self.config(state.config)
        spec = base_spec(config, state.get(BASE_AGENT), 0.0, config.table(EvalTable).max_new_tokens)
        return optimize_instructions(target, config.knobs(target), spec,
                                     endpoint_lm(table.gepa_base_url, table.gepa_model or "default"),
                                     band("gepa_train", table.gepa_train_seeds), band("gepa_val", table.gepa_val_seeds),
                                     table.gepa_max_metric_calls, seed=config.seed, run_dir=directory)

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """GEPA's episodes (its reflection calls not counted); direct GRPO is not estimated
        apart from the training it matches."""
        table = self.config(config)
        if not table.gepa:
            return []
        greedy, _ = estimates.base_players(config)
        calls = table.gepa_max_metric_calls
        return [estimates.episodes("gepa", f"at most {calls} greedy train episodes of each target, and the "
                                           "reflection model's calls (not counted)", greedy,
                                   {t: calls for t in config.targets})]

    def rows(self, config: RunConfig) -> int:
        """A direct-GRPO row per target, and GEPA's."""
        table = self.config(config)
        return (len(config.targets) if table.direct_grpo else 0) + (1 if table.gepa else 0)

    def contenders(self, state: State, max_new_tokens: int) -> dict[str, Contender]:
        """Direct GRPO's adapters, and the base agent with GEPA's instructions."""
        result, agent = state.get(self), state.get(BASE_AGENT)
        out = {f"direct GRPO on {target.split('/')[1]}": Contender(
            adapter_spec(state.config, agent, d.adapter, max_new_tokens)) for target, d in result.direct.items()}
        if result.gepa:
            out["GEPA"] = Contender(base_spec(state.config, agent, 0.0, max_new_tokens),
                                    {t: {"agent_instructions": g.instructions} for t, g in result.gepa.items()})
        return out

    def contender_inputs(self, state: State) -> dict[str, Any]:
        """The direct adapters, and GEPA's instructions where it ran."""
        result = state.get(self)
        gepa = {"GEPA": {t: {"agent_instructions": g.instructions} for t, g in result.gepa.items()}}
        return {"direct": result.to_json()["direct"], **({"gepa": gepa} if result.gepa else {})}

    def report(self, state: State) -> list[Block]:
        """Direct GRPO's training curves."""
        direct = state.get(self).direct
        if not direct:
            return []
        out = [Block("h2", "Baselines")]
        for env_id, d in direct.items():
            out.append(curves(state, d.metrics, f"curves-direct-{env_id.split('/')[1]}.png",
                              f"direct GRPO on {env_id}", f"direct GRPO on {env_id}: {d.episodes} episodes"))
        return out


STAGE = BaselinesStage()
