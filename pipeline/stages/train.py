"""Stage 7, training: one adapter per trainable env, GRPO with the `[train]` table's recipe
(`trace_gym.trainer.config.GRPOConfig`), each its own cached step (`train-CAPABILITY`), so a
killed run resumes inside the adapter in flight from the trainer's checkpoints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_gym.pipeline import estimates
from trace_gym.pipeline.contract import Block, Contender, Record, Run, RunConfig, Stage, State, Step
from trace_gym.pipeline.stages.audit import STAGE as AUDIT
from trace_gym.pipeline.stages.base_agent import STAGE as BASE_AGENT
from trace_gym.pipeline.stages.base_agent import Agent, adapter_spec
from trace_gym.provenance import dir_sha256

if TYPE_CHECKING:
    from trace_gym.trainer.config import GRPOConfig


def train_config(config: RunConfig, env_id: str, **overrides: Any) -> GRPOConfig:
    """The trainer's config for `env_id`: the `[train]` table, the env's knobs and the run's
    seed, then `overrides`."""
    from trace_gym.trainer.config import GRPOConfig

    return GRPOConfig.from_dict({**config.train, "env_id": env_id, "env_kwargs": config.knobs(env_id),
                                 "seed": config.seed, **overrides})


@dataclass
class Adapter(Record):
    """A trained adapter: its directory, hash, the episodes it played and its metrics file."""

    adapter: str
    sha256: str
    episodes: int
    metrics: str


@dataclass
class Adapters(Record):
    """Env id -> its adapter."""

    adapters: dict[str, Adapter]


def train_inputs(config: RunConfig, agent: Agent, env_id: str) -> dict[str, Any]:
    """What decides an adapter: the agent, the trainer's config and the env's code."""
    from trace_gym.registry import env_sha256

    return {"agent": agent.to_json(), "config": train_config(config, env_id).to_json(),
            "env_sha256": env_sha256(env_id)}


def train_adapter(config: RunConfig, agent: Agent, env_id: str, directory: Path, **overrides: Any) -> Adapter:
    """Train (or resume) one adapter on `env_id`."""
    from trace_gym.trainer.training import train as run

    adapter = run(train_config(config, env_id, **overrides), agent.path, directory, resume=True)
    rows = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return Adapter(str(adapter), dir_sha256(adapter), sum(r["episodes/total"] for r in rows),
                   str(directory / "metrics.jsonl"))


def curves(state: State, metrics: str, name: str, title: str, caption: str) -> Block:
    """A training run's curves as an image block."""
    from trace_gym.trainer.curves import plot_curves
    from trace_gym.trainer.metrics import MetricsLog

    png = plot_curves(MetricsLog.read(Path(metrics)), state.out / "report" / name, title)
    return Block("image", caption, path=png)


class TrainStage(Stage[Any, Adapters]):
    """Stage 7: an adapter per trainable env."""

    name, record = "train", Adapters

    def execute(self, run: Run, state: State) -> Adapters:
        """Each adapter as its own cached step."""
        agent, out = state.get(BASE_AGENT), {}
        for env in state.get(AUDIT).trainable:
            env_id = env.env_id
            out[env_id] = Adapter.from_json(run.stage(
                f"train-{env.capability}", train_inputs(state.config, agent, env_id),
                lambda d, e=env_id: train_adapter(state.config, agent, e, d).to_json()))  # type: ignore[misc]
        return Adapters(out)

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """Every capability env's episodes at the training rate measured here, else the
        rollouts' alone, named."""
        capability = estimates.capability_envs(config)
        recipes = {e: train_config(config, e) for e in capability}
        per_env = {e: c.iterations * c.groups * c.group_size for e, c in recipes.items()}
        work = (f"one adapter per env: {next(iter(per_env.values()))} episodes each (iterations x groups x "
                "group size)")
        step = estimates.episodes(self.name, work, f"train {recipes[capability[0]].backend}", per_env)
        if step.seconds is None:  # no training measured here: its rollouts alone, said so
            rollouts_only = estimates.episodes(self.name, work, estimates.player(1.0), per_env)
            if rollouts_only.seconds is not None:
                step = Step(self.name, work, None, "no training measured on this machine; its rollouts alone: "
                                                   f"{estimates.minutes(rollouts_only.seconds)}")
        return [step]

    def report(self, state: State) -> list[Block]:
        """Each adapter's training curves."""
        out = [Block("h2", "Training")]
        for env_id, a in state.get(self).adapters.items():
            out.append(curves(state, a.metrics, f"curves-{env_id.split('/')[1]}.png",
                              f"GRPO on {env_id}: success, reward and verdict checks", f"{env_id}: {a.episodes} episodes"))
        return out

    def rows(self, config: RunConfig) -> int:
        """An adapter per capability env of the domain, at most."""
        return len(estimates.capability_envs(config))

    def contenders(self, state: State, max_new_tokens: int) -> dict[str, Contender]:
        """Each adapter on the base model, greedy."""
        agent = state.get(BASE_AGENT)
        return {f"adapter {env_id.split('/')[1].removesuffix('-v0')}": Contender(
            adapter_spec(state.config, agent, a.adapter, max_new_tokens)) for env_id, a in state.get(self).adapters.items()}

    def contender_inputs(self, state: State) -> dict[str, Any]:
        """The adapters decide their rows."""
        return {"adapters": state.get(self).to_json()["adapters"]}


STAGE = TrainStage()
