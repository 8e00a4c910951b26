"""The env contract every trace-gym environment follows (docs/envs.md, "The env contract").

`TraceEnv` is a Gymnasium env whose observation is the conversation so far (OpenAI chat
messages) and whose action is one agent turn (a tool-call dict, an assistant message or
raw model text, read by `trace_gym.actions.parse_action`). Subclasses supply the episode
(task, world, opening messages), what a reply to the user does, the verifier and the
oracle; this class owns the loop, so every env handles bad output, rewards, truncation,
hints and rendering the same way.

- Bad model output is never an exception: it becomes an "Error: ..." tool message.
- Reward is 0 until the episode ends, then the verifier's score in [0, 1]
  (`info["verdict"]` has the checks). Truncation at the task's step limit gives 0 and keeps
  the verdict in info.
- `reset(options={"hint": True})` adds an `<expert_guidance>` block to the system prompt;
  `info["system_prompt_unhinted"]` always holds the prompt without it.
- `info` holds, during the episode, only what tells nothing of the decision the agent must
  take (tools, the unhinted prompt, the turn and the step limit); `task_kind` and
  `capabilities_needed` join it at the end, with the verdict.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import gymnasium as gym
import numpy as np

from trace_gym import messages as msg
from trace_gym.actions import parse_action
from trace_gym.deprecation import renamed
from trace_gym.errors import EpisodeError, InvalidConfig
from trace_gym.replay import ReplayPickling
from trace_gym.rng import Rng
from trace_gym.spaces import ActionSpace, ConversationSpace
from trace_gym.tools import ToolKind, Toolset
from trace_gym.verdict import Verdict

HINT_OPEN, HINT_CLOSE = "<expert_guidance>", "</expert_guidance>"
_CODE_SHA256: dict[type, str] = {}


class Task(Protocol):
    """What every env's task offers."""

    @property
    def kind(self) -> str:
        """The kind of task (reported per kind by evaluation)."""
        ...
    @property
    def capabilities_needed(self) -> list[str]:
        """The capabilities an agent needs to solve the task."""
        ...
    @property
    def instructions(self) -> str:
        """The customer's brief."""
        ...
    def to_json(self) -> dict[str, Any]:
        """The task as a JSON object."""
        ...


_Forked = TypeVar("_Forked", bound="EpisodeWorld")


class EpisodeWorld(Protocol):
    """What the loop needs of an episode's world: a copy for the agent to change, a content hash.

    A `trace_gym.worlds.world.World` has both, and so has a coding env's repository.
    """

    def fork(self: _Forked) -> _Forked:
        """Return a copy that changes apart from this world."""
        ...
    def hash(self) -> str:
        """Return the content hash: equal worlds, equal hashes."""
        ...


TaskT = TypeVar("TaskT", bound=Task)
"""An env's task type."""
WorldT = TypeVar("WorldT", bound=EpisodeWorld)
"""An env's world type."""


@dataclass
class EpisodeState(Generic[TaskT, WorldT]):
    """Everything an env keeps about the episode in progress (`TraceEnv.episode`)."""

    task: TaskT
    initial_world: WorldT
    world: WorldT
    messages: list[msg.Message]
    system_prompt_unhinted: str
    max_steps: int
    toolset: Toolset
    """The tools of this episode: the task's own, else the env's."""
    capabilities_needed: tuple[str, ...] = ()
    seed: int | None = None
    hint: bool = False
    turn: int = 0
    writes: int = 0
    termination_reason: str | None = None
    verdict: Verdict | None = None
    rendered: int = 0

    @property
    def over(self) -> bool:
        """True once the episode has a termination reason."""
        return self.termination_reason is not None


@dataclass
class NewEpisode(Generic[TaskT, WorldT]):
    """What a subclass returns from `_new_episode`."""

    task: TaskT
    world: WorldT
    system_prompt: str
    opening: list[msg.Message]
    max_steps: int
    hint: str = ""
    """Guidance text for hint mode (never names a tool or an argument)."""
    toolset: Toolset | None = None
    """The tools of this episode, when they depend on the task (default: the env's)."""


def with_hint(system_prompt: str, hint: str) -> str:
    """The system prompt with the hint appended inside an `<expert_guidance>` block."""
    return f"{system_prompt}\n\n{HINT_OPEN}\n{hint}\n{HINT_CLOSE}"


class TraceEnv(ReplayPickling, gym.Env[list, Any], Generic[TaskT, WorldT]):
    """Base class of every trace-gym env. See the module docstring for the contract.

    An episode: the observation is the conversation so far, an action is the agent's turn
    (a tool call or a reply), and the verdict comes with the reward when it ends. The
    env's own oracle plays it to reward 1.0; a reply that helps nobody earns nothing:

    >>> import gymnasium as gym
    >>> import trace_gym
    >>> env = gym.make("trace/precondition_verification-v0")
    >>> messages, info = env.reset(seed=0)
    >>> [m["role"] for m in messages[:2]], len(info["tools"])
    (['system', 'user'], 6)
    >>> done = False
    >>> while not done:
    ...     action = env.unwrapped.oracle_action(messages)
    ...     messages, reward, terminated, truncated, info = env.step(action)
    ...     done = terminated or truncated
    >>> reward, [check["name"] for check in info["verdict"]["checks"]]
    (1.0, ['database', 'rejected_writes'])
    >>> _ = env.reset(seed=0)
    >>> env.step("Sorry, I cannot help with that.")[1:3]
    (0.0, True)
    """

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    toolset: Toolset

    def __init__(self, toolset: Toolset, render_mode: str | None = None) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise InvalidConfig(
                f"render_mode={render_mode!r} is not supported; allowed: "
                f"{', '.join(self.metadata['render_modes'])} or None"
            )
        self.render_mode = render_mode
        self.toolset = toolset
        self.observation_space = ConversationSpace()
        self.action_space = ActionSpace(toolset)
        self._episode: EpisodeState[TaskT, WorldT] | None = None

    # -- what a subclass provides ---------------------------------------------------

    def _new_episode(self, rng: Rng) -> NewEpisode[TaskT, WorldT]:
        raise NotImplementedError

    def _after_reply(self, episode: EpisodeState[TaskT, WorldT], text: str) -> str | None:
        """A reply to the user was sent; return a termination reason to end the episode."""
        raise NotImplementedError

    def _after_tools(self, episode: EpisodeState[TaskT, WorldT], names: list[str]) -> str | None:
        """Tool calls were executed; return a termination reason to end the episode."""
        return None

    def verify(self, task: TaskT, initial_world: WorldT, final_world: WorldT,
               messages: list[msg.Message]) -> Verdict:
        """Score an episode; a pure function of its arguments."""
        raise NotImplementedError

    def oracle_action(self, messages: list[msg.Message]) -> Any:
        """The oracle's next turn given the conversation so far (reaches reward 1.0)."""
        raise NotImplementedError

    # -- the loop ----------------------------------------------------------------------

    # gymnasium's `reset(seed=...)` makes a new numpy Generator (SeedSequence, then PCG64),
    # a large part of a small episode's cost (benchmarks/RESULTS.md), and the episode needs
    # only the Generator's first output: `Rng.from_seed` computes it directly. So a seeded reset records the seed, and
    # `_np_random` (what gymnasium's `np_random` and its env checker read) makes the
    # Generator on first read, advanced past that output: the state gymnasium's reset and
    # `Rng(self.np_random)` would have left.
    _generator: np.random.Generator | None = None
    _pending_seed: int | None = None

    @property
    def _np_random(self) -> np.random.Generator | None:
        if self._pending_seed is not None:
            self._generator = np.random.default_rng(self._pending_seed)
            self._generator.bit_generator.random_raw()
            self._pending_seed = None
        return self._generator

    @_np_random.setter
    def _np_random(self, generator: np.random.Generator | None) -> None:
        self._generator, self._pending_seed = generator, None

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[list, dict[str, Any]]:
        """Start a new episode; the only option is `hint` (True adds the env's guidance to
        the system prompt). Returns the opening messages and the info."""
        options = {} if options is None else options
        if not isinstance(options, dict):
            raise InvalidConfig(f"reset options={options!r} are invalid: must be a dict such as {{'hint': True}}")
        unknown = set(options) - {"hint"}
        if unknown:
            raise InvalidConfig(f"unknown reset option(s) {sorted(unknown, key=repr)}; allowed: hint")
        if not isinstance(options.get("hint", False), (bool, np.bool_)):
            raise InvalidConfig(f"reset option hint={options['hint']!r} is invalid: must be True or False")
        before = None
        if type(seed) is int and seed >= 0:
            rng = Rng.from_seed(seed)
            self._pending_seed = self._np_random_seed = seed
        else:  # no seed (continue the Generator), a bool, or gymnasium's error for a bad seed
            super().reset(seed=seed)
            before = self.np_random.bit_generator.state  # (made here when there is none yet)
            rng = Rng(self.np_random)
        new = self._new_episode(rng)
        hint = bool(options.get("hint", False)) and bool(new.hint)
        prompt = with_hint(new.system_prompt, new.hint) if hint else new.system_prompt
        self._episode = EpisodeState(
            task=new.task,
            initial_world=new.world,
            world=new.world.fork(),
            messages=[msg.system(prompt), *new.opening],
            system_prompt_unhinted=new.system_prompt,
            max_steps=new.max_steps,
            toolset=new.toolset or self.toolset,
            capabilities_needed=tuple(new.task.capabilities_needed),
            seed=seed,
            hint=hint,
        )
        self._record_reset(seed if before is None else None, options, before)  # what a pickle replays
        return msg.copy_messages(self._episode.messages), self._info()

    def step(self, action: Any) -> tuple[list, float, bool, bool, dict[str, Any]]:
        """Play one agent turn: run its tool calls or send its reply, and score the episode
        when it ends (0 when truncated)."""
        ep = self._episode
        if ep is None:
            raise EpisodeError("step() called before reset()")
        if ep.over:
            raise EpisodeError(f"step() called after the episode ended ({ep.termination_reason}); call reset()")
        self._record_action(action)
        parsed = parse_action(action)
        turn = ep.turn
        ep.turn += 1
        ep.messages.append(msg.assistant(
            parsed.content, [(c.name, c.arguments_json()) for c in parsed.calls], turn))
        if parsed.calls:
            names = []
            toolset = ep.toolset
            for i, call in enumerate(parsed.calls):
                if call.valid:
                    result = toolset.execute(ep.world, call.name, call.arguments)
                    content = result.content
                    if result.ok:
                        names.append(call.name)
                        if toolset[call.name].kind is ToolKind.WRITE:
                            ep.writes += 1
                else:
                    content = f"Error: {call.error}"
                ep.messages.append(msg.tool_result(msg.tool_call_id(turn, i), content))
            reason = self._after_tools(ep, names)
        else:
            reason = self._after_reply(ep, parsed.content or "")
        truncated = False
        if reason is None and ep.turn >= ep.max_steps:
            reason, truncated = "max_steps", True
        reward = 0.0
        if reason is not None:
            ep.termination_reason = reason
            ep.verdict = self.verify(ep.task, ep.initial_world, ep.world, ep.messages)
            reward = 0.0 if truncated else ep.verdict.score
        if self.render_mode == "human":
            self.render()
        return msg.copy_messages(ep.messages), reward, reason is not None and not truncated, truncated, self._info()

    def _info(self) -> dict[str, Any]:
        ep = self._episode
        assert ep is not None
        info: dict[str, Any] = {
            "tools": ep.toolset.schemas,
            "system_prompt_unhinted": ep.system_prompt_unhinted,
            "turn": ep.turn,
            "max_steps": ep.max_steps,
        }
        if ep.termination_reason is not None:  # ep.over, without a property call per step
            # What the task is, only once it is over: during the episode the kind and the
            # capabilities it needs can tell the decision (a forbidden request needs
            # precondition checking), which the agent must find in the records.
            info["task_kind"] = ep.task.kind
            info["capabilities_needed"] = list(ep.capabilities_needed)
            info["termination_reason"] = ep.termination_reason
            info["verdict"] = ep.verdict.to_json() if ep.verdict else None
        return info

    # -- what users and tools read ----------------------------------------------------

    @property
    def episode(self) -> EpisodeState[TaskT, WorldT]:
        """The episode in progress (raises EpisodeError before the first reset)."""
        if self._episode is None:
            raise EpisodeError("no episode yet: call reset()")
        return self._episode

    @property
    def task(self) -> TaskT:
        """The task of the episode in progress."""
        return self.episode.task

    @classmethod
    def code_sha256(cls) -> str:
        """sha256 over this env's module and the trace_gym modules it builds on (recorded in
        every trajectory): equal hashes, equal episodes for equal seeds and actions.
        Computed once per class (`trace_gym.provenance`)."""
        sha = _CODE_SHA256.get(cls)
        if sha is None:
            from trace_gym.provenance import env_code_sha256

            sha = _CODE_SHA256[cls] = env_code_sha256(inspect.getfile(cls))
        return sha

    def render(self) -> str | None:
        """The conversation as text in "ansi" mode; in "human" mode, print the messages not
        yet shown and return None."""
        from trace_gym.render import render_ansi, render_human

        if self.render_mode is None or self._episode is None:
            return None
        if self.render_mode == "ansi":
            return render_ansi(self._episode.messages)
        render_human(self._episode.messages[self._episode.rendered:])
        self._episode.rendered = len(self._episode.messages)
        return None


# `Episode` was also the driver's name for an episode to play: the old name still works, warning.
__getattr__ = renamed(__name__, {"Episode": "EpisodeState"})
