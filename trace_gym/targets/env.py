"""The target envs `trace/airline-v0` and `trace/retail-v0`: whole customer-service
conversations with a scripted customer, over a seeded tau2-shaped world.

Observation: the conversation (system prompt with the domain policy, then the customer's
opening). Actions: any of the domain's tools (all 14 airline / 16 retail), or a reply to
the customer, who answers as `ScriptedUser` describes.

Episode end: the customer ends the conversation (all requests handled, or they give up),
or the agent transfers to a human; the task's step limit truncates with reward 0.

Reward: 1 when every check passes, else 0 (`trace_gym.targets.verify`): the final database
equals the one the gold writes produce, every required piece of information was stated (the
value and no other of its kind), every forbidden request was refused naming its rule and no
other, after a lookup and without attempting it; and, with `strict=True` (the default), the
protocol: no attempted forbidden write, the customer's explicit yes to a summary before each
write, the customer identified before their records are read, no summary declined.
`strict=False` is tau2-bench's rule. A value stated wrong while a request is open fails
that request's check under both. `info["verdict"]` lists the checks.

What the agent sees at reset tells nothing of the decision: the step limit follows from
the number of requests and of the customer's records (`step_limit`), the hint covers every
capability the requests' kinds can need (`can_need`).

Arguments (`gym.make` keyword arguments): the fields of `TargetConfig` (max_requests,
compound_rate, forbidden_rate, unknown_id_rate, distractors, kinds, prompt_style, strict)
and `world_size` (an AirlineWorldSize / RetailWorldSize or a dict of its fields).

Version history: v0, first version (unreleased; changes are in CHANGELOG.md).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, ClassVar, Protocol, cast

from trace_gym import capabilities as cap
from trace_gym import messages as msg
from trace_gym.env import EpisodeState, NewEpisode, TraceEnv
from trace_gym.errors import InvalidConfig
from trace_gym.rng import Rng
from trace_gym.targets import airline as airline_tasks
from trace_gym.targets import retail as retail_tasks
from trace_gym.targets.config import TargetConfig
from trace_gym.targets.oracle import plan_action
from trace_gym.targets.prompts import guidance
from trace_gym.targets.task import TargetTask
from trace_gym.targets.user import ScriptedUser
from trace_gym.targets.verify import verify
from trace_gym.verdict import Verdict
from trace_gym.worlds import airline, retail
from trace_gym.worlds.domain import Domain
from trace_gym.worlds.world import World

TRANSFER = "transfer_to_human_agents"


class TaskModule(Protocol):
    """A domain's task module (`trace_gym.targets.airline`, `trace_gym.targets.retail`), as the env uses it."""

    def generate_task(self, rng: Rng, config: TargetConfig, size: Any) -> tuple[TargetTask, World]:
        """A task and the world it is set in, from one random stream."""
        ...


class TargetEnv(TraceEnv):
    """A tau2-style customer-service env over one domain (see the module docstring)."""

    DOMAIN: ClassVar[Domain]
    """The domain's record: tools, policy, intro, world size, records, task kinds."""
    tasks: ClassVar[TaskModule]
    """The domain's task module (`trace_gym.targets.<domain>`): its `generate_task`."""

    def __init__(self, render_mode: str | None = None, world_size: Any = None, **knobs: Any) -> None:
        unknown = set(knobs) - set(TargetConfig.field_names())
        if unknown:
            raise InvalidConfig(
                f"unknown argument(s) {sorted(unknown)} for {type(self).__name__}; allowed: "
                f"{', '.join(TargetConfig.field_names() + ['world_size', 'render_mode'])}"
            )
        self.config = TargetConfig(**knobs)
        self.config.check_kinds(self.DOMAIN.kinds)
        size_type = self.DOMAIN.world_size
        if world_size is None:
            world_size = size_type()
        elif isinstance(world_size, dict):
            try:
                world_size = size_type(**world_size)
            except TypeError as exc:
                raise InvalidConfig(f"world_size={world_size!r}: {exc}") from None
        elif not isinstance(world_size, size_type):
            raise InvalidConfig(f"world_size must be a {size_type.__name__} or a dict of its fields, "
                                f"got {type(world_size).__name__}")
        self.world_size = world_size
        super().__init__(self.DOMAIN.tools, render_mode=render_mode)
        self._user: ScriptedUser | None = None

    @property
    def task(self) -> TargetTask:
        """The task of the episode in progress (raises EpisodeError before the first reset)."""
        return cast(TargetTask, self.episode.task)  # _new_episode gives every episode one of `tasks`' tasks

    @property
    def domain(self) -> str:
        """The domain's name ("airline", "retail")."""
        return self.DOMAIN.name

    @property
    def records(self) -> str:
        """The users' field that lists their records (reservations, orders)."""
        return self.DOMAIN.records

    def _system_prompt(self) -> str:
        prompt = self.DOMAIN.system_prompt(self.config.prompt_style)
        if self.config.agent_instructions:  # a prompt optimiser's text, after the policy
            prompt = f"{prompt.rstrip()}\n\n{self.config.agent_instructions}"
        return prompt

    def _new_episode(self, rng: Rng) -> NewEpisode:
        task, world = self.tasks.generate_task(rng, self.config, self.world_size)
        records = world.tables["users"][task.user_id][self.records]
        self._user = ScriptedUser(task, records)
        return NewEpisode(
            task=task,
            world=world,
            system_prompt=self._system_prompt(),
            opening=[msg.user(self._user.opening())],
            max_steps=self.step_limit(task, len(records)),
            hint=guidance(self.can_need(task)),
        )

    def step_limit(self, task: TargetTask, records: int) -> int:
        """Twice the most turns the oracle could take, plus 10: for each request its
        domain's most turns (`Domain.plan_steps`) and a lookup of each of the customer's records.
        It follows from the number of requests and records alone: a limit from the task's
        own plan is shorter for a request that must be refused, and would tell it."""
        return 2 * (len(task.intro) + len(task.requests) * (self.DOMAIN.plan_steps + records)) + 10

    def can_need(self, task: TargetTask) -> list[str]:
        """Every capability the conversation's request kinds can need, whatever the
        decision (the hint covers these: guidance for only the needed ones would tell it)."""
        needed = {c for r in task.requests for c in self.DOMAIN.can_need[r.kind]}
        if len(task.requests) > 1:
            needed.add(cap.MULTI_STEP)
        return [c for c in cap.ALL if c in needed]

    def _after_reply(self, episode: EpisodeState, text: str) -> str | None:
        assert self._user is not None
        turn = self._user.respond(text, episode.writes)
        episode.messages.append(msg.user(turn.text))
        return "user_stop" if turn.ended else None

    def _after_tools(self, episode: EpisodeState, names: list[str]) -> str | None:
        return "transfer" if TRANSFER in names else None

    def verify(self, task: TargetTask, initial_world: World, final_world: World,
               messages: list[msg.Message]) -> Verdict:
        """The score of an episode (`trace_gym.targets.verify.verify`, strict as configured)."""
        return verify(task, initial_world, final_world, messages, self.toolset, strict=self.config.strict)

    def oracle_action(self, messages: list[msg.Message]) -> Any:
        """The oracle's next action: the task's plan at this point of the conversation."""
        return plan_action(self.task.plan, messages)

    def spec_kwargs(self) -> dict[str, Any]:
        """The keyword arguments that rebuild this env: the config's fields and the world size."""
        return {**asdict(self.config), "world_size": asdict(self.world_size)}


_SPEC = __doc__
"""The module docstring: the spec of both target envs, appended to each class's docstring."""


class AirlineTargetEnv(TargetEnv):
    """The target env of the airline domain (its record: `trace_gym.worlds.airline.DOMAIN`)."""

    __doc__ = f"{__doc__}\n\n{_SPEC}"
    DOMAIN = airline.DOMAIN
    tasks: ClassVar[TaskModule] = airline_tasks


class RetailTargetEnv(TargetEnv):
    """The target env of the retail domain (its record: `trace_gym.worlds.retail.DOMAIN`)."""

    __doc__ = f"{__doc__}\n\n{_SPEC}"
    DOMAIN = retail.DOMAIN
    tasks: ClassVar[TaskModule] = retail_tasks
