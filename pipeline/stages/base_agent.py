"""Stage 1, the base agent: the committed test fixture (built from its recipe when not in a
checkout), a given model used as is (`[base_agent] model`, and the endpoint that serves it:
`base_url`, `served_model`), or a build from the `[base_agent]` recipe
(`trace_gym.baseagent.build.BaseAgentConfig`, cached by the recipe)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from trace_gym.agents.spec import PolicySpec
from trace_gym.errors import InvalidConfig
from trace_gym.pipeline.contract import Contender, Record, RunConfig, Stage, StageTable, State, Step
from trace_gym.pipeline.playing import local_spec
from trace_gym.provenance import dir_sha256

if TYPE_CHECKING:
    from trace_gym.baseagent.build import BaseAgentConfig

AGENT_KEYS = ("model", "base_url", "served_model")
"""`[base_agent]` keys besides the recipe's and `fixture`; not filled in when absent, so that
a table without them is the recipe's alone (and hashes as it did)."""


def _recipe_defaults() -> dict[str, Any]:
    """The base-agent recipe's fields and defaults (`BaseAgentConfig`; the seed is the run's)."""
    from trace_gym.baseagent.build import BaseAgentConfig

    recipe = json.loads(json.dumps(dataclasses.asdict(BaseAgentConfig())))  # tuples as lists, as TOML gives them
    recipe.pop("seed")
    return recipe


@dataclass(frozen=True)
class BaseAgentTable(StageTable):
    """`[base_agent]`: the recipe's keys (`BaseAgentConfig`, checked there), and these."""

    TABLE: ClassVar[str] = "base_agent"
    fixture: bool = False
    """Play the committed test fixture instead (plumbing runs: the smoke budget)."""
    model: str | None = None
    """A model directory used as the base agent as is (no build): what the trainer and the composer load."""
    base_url: str | None = None
    """The OpenAI-compatible endpoint (vLLM) serving `model` to the base agent's own episodes."""
    served_model: str | None = None
    """The name the endpoint serves it under (default: `model`)."""
    recipe: dict[str, Any] = field(default_factory=_recipe_defaults)
    """The build recipe's keys (every other key of the table)."""

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """`fixture` and the recipe's keys (the optional keys are absent until given)."""
        return {"fixture": False, **_recipe_defaults()}

    @classmethod
    def from_table(cls, table: dict[str, Any], where: str) -> BaseAgentTable:
        """`fixture`, the optional keys (strings) and the recipe's keys; any other is refused."""
        if not isinstance(table, dict):
            raise InvalidConfig(f"{where}: [base_agent] must be a table")
        recipe = _recipe_defaults()
        bad = sorted(set(table) - set(recipe) - {"fixture", *AGENT_KEYS})
        if bad:
            raise InvalidConfig(f"{where}: [base_agent] has unknown key(s) {bad}; allowed: "
                                f"{', '.join(['fixture', *recipe, *AGENT_KEYS])}")
        for key in AGENT_KEYS:
            if key in table and not isinstance(table[key], str):
                raise InvalidConfig(f"{where}: [base_agent] {key}={table[key]!r} must be a string")
        given = {k: v for k, v in table.items() if k in recipe}
        return cls(fixture=bool(table.get("fixture", False)), recipe={**recipe, **given},
                   **{k: table[k] for k in AGENT_KEYS if k in table})

    def values(self) -> dict[str, Any]:
        """The table as the file gave it, defaults filled in (the cache key's section)."""
        return {"fixture": self.fixture, **self.recipe,
                **{k: getattr(self, k) for k in AGENT_KEYS if getattr(self, k) is not None}}


def given_model(config: RunConfig) -> str:
    """The model directory `[base_agent] model` names ("" when the agent is the fixture or a
    build): the fixture, when on, replaces it."""
    table = config.table(BaseAgentTable)
    return "" if table.fixture else table.model or ""


def endpoint(config: RunConfig) -> dict[str, str] | None:
    """Where the base agent's own episodes are served (`base_url`, `model` as the server names
    it), or None where they play on a local engine (the fixture, when on, does)."""
    table = config.table(BaseAgentTable)
    if table.fixture or not table.base_url:
        return None
    return {"base_url": table.base_url, "model": table.served_model or table.model or ""}


def recipe(config: RunConfig) -> BaseAgentConfig:
    """The build recipe of `[base_agent]`, with the run's seed."""
    from trace_gym.baseagent.build import BaseAgentConfig

    return BaseAgentConfig.from_table(config.table(BaseAgentTable).recipe,
                                      where=f"{config.source} [base_agent]", seed=config.seed)


def check(config: RunConfig) -> None:
    """An endpoint serves a given model, and the coding domain has a base agent that can code
    (a given model) or the fixture."""
    table, path = config.table(BaseAgentTable), config.source
    if table.base_url and not table.model:
        raise InvalidConfig(f"{path}: [base_agent] base_url={table.base_url!r} needs model: the directory of "
                            "the weights it serves, which the trainer and the composer load")
    if config.domain == "coding" and not table.fixture and not table.model:
        raise InvalidConfig(
            f"{path}: [pipeline] domain='coding' needs a base agent that can code: the [base_agent] recipe builds "
            "the embedded SmolLM2-135M customer-service agent. Set [base_agent] model to a model directory and "
            "base_url to the vLLM (or other OpenAI-compatible) endpoint serving it (the shipped 'coding' "
            "configuration does), or fixture = true (--budget smoke) for a plumbing run")


def base_spec(config: RunConfig, agent: Agent, temperature: float, max_new_tokens: int) -> PolicySpec:
    """The base agent's own policy: the "endpoint" policy on the server that `[base_agent]
    base_url` names (vLLM serving the given model), else the "local" one on its directory."""
    served = endpoint(config)
    if served is None:
        return local_spec(agent.path, temperature, max_new_tokens)
    return PolicySpec("endpoint", {"base_url": served["base_url"], "model": served["model"],
                                   "temperature": temperature, "max_tokens": max_new_tokens})


def adapter_spec(config: RunConfig, agent: Agent, adapter: str, max_new_tokens: int) -> PolicySpec:
    """The base model with `adapter`, greedy: on its local weights, or on the endpoint that
    serves the base agent (which loads the adapter at runtime: `EndpointPolicy`'s adapter)."""
    served = endpoint(config)
    if served is None:
        return local_spec(agent.path, 0.0, max_new_tokens, adapter=adapter)
    return PolicySpec("endpoint", {"base_url": served["base_url"], "model": served["model"], "adapter": adapter,
                                   "temperature": 0.0, "max_tokens": max_new_tokens})


@dataclass
class Agent(Record):
    """The base agent: its model directory, the directory's hash, and the name an endpoint
    serves it under (a served run only)."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ("served_model",)
    path: str
    sha256: str
    served_model: str | None = None


class BaseAgentStage(Stage[BaseAgentTable, Agent]):
    """Stage 1: the base agent's model directory and its hash."""

    name, table, record = "base_agent", BaseAgentTable, Agent

    def inputs(self, state: State) -> dict[str, Any]:
        """The table and the run's seed (a build's recipe is both)."""
        return {"section": self.config(state.config).values(), "seed": state.config.seed}

    def run(self, directory: Path, state: State) -> Agent:
        """The given model, the fixture or a build."""
        config = state.config
        model = given_model(config)
        if model:
            if not (Path(model) / "config.json").is_file():
                raise InvalidConfig(f"{config.source}: [base_agent] model={model!r} is not a model directory (no "
                                    "config.json): name the directory of the weights (those the endpoint serves)")
            served = endpoint(config)
            return Agent(str(Path(model)), dir_sha256(model), served["model"] if served else None)
        if self.config(config).fixture:
            checkout = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "tiny_agent"
            if (checkout / "config.json").is_file():
                path = checkout
            else:  # an installed package: build the same fixture with its from-scratch recipe
                from trace_gym.baseagent.scratch import FIXTURE_RECIPE, TinyAgentConfig, build

                path = build(TinyAgentConfig(**cast(dict[str, Any], FIXTURE_RECIPE)), directory / "fixture")
        else:
            from trace_gym.baseagent.build import build as build_agent

            path = build_agent(recipe(config))
        return Agent(str(path), dir_sha256(path))

    def estimate(self, config: RunConfig, before: list[Stage[Any, Any]]) -> list[Step]:
        """Nothing for the fixture, a given model or a cached build; else the build's
        demonstrations at the rate builds measured here."""
        from trace_gym import rates
        from trace_gym.pipeline.domains import PIPELINE_DOMAINS

        if self.config(config).fixture:
            return [Step(self.name, "the committed test fixture (no build)", 0.0, "nothing to build")]
        model = given_model(config)
        if model:
            here = "" if (Path(model) / "config.json").is_file() else " (not a model directory on this machine)"
            served = endpoint(config)
            work = f"the given model {model}{here}, as is" + (
                f", served by {served['base_url']} as {served['model']!r}" if served else "")
            return [Step(self.name, work, 0.0, "nothing to build")]
        from trace_gym.baseagent.build import default_out

        built_recipe = recipe(config)
        out = default_out(built_recipe)
        try:
            built = json.loads((out / "trace_gym_build.json").read_text()).get("config") == \
                json.loads(json.dumps(built_recipe.identity()))
        except (OSError, ValueError):
            built = False
        if built:
            return [Step(self.name, f"cached: {out}", 0.0, "built before")]
        # the recipe builds the customer-service agent: its demonstrations are of that domain's envs
        demos = (2 * built_recipe.episodes + len(PIPELINE_DOMAINS["customer_service"].capability_envs)
                 * built_recipe.capability_episodes) * built_recipe.epochs
        measured = rates.rate("base-agent build", built_recipe.source)
        work = f"build {out.name}: SFT on about {demos} oracle demonstrations (once; then cached)"
        if measured is None:
            return [Step(self.name, work, None, "no build measured on this machine")]
        return [Step(self.name, work, demos / measured.per_minute * 60,
                     f"builds here: {measured.per_minute:.1f} demonstrations/min")]

    def rows(self, config: RunConfig) -> int:
        """The base agent's row."""
        return 1

    def contenders(self, state: State, max_new_tokens: int) -> dict[str, Contender]:
        """The base agent, greedy."""
        return {"base": Contender(base_spec(state.config, state.get(self), 0.0, max_new_tokens))}

    def contender_inputs(self, state: State) -> dict[str, Any]:
        """The agent decides the base row."""
        return {"agent": state.get(self).to_json()}


STAGE = BaseAgentStage()
