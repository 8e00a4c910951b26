"""The env as the kit plays it: resets hinted as the kit's plan says, every reward checked.

Every episode the kit plays goes through `KitEnv`, so neither concern is left to each
policy and adversary:

- A reset without options gets `{"hint": plan.hint(seed)}` (`seeds.Plan`): an adversary
  written for `reset(seed=...)` is played on hinted and on unhinted resets alike. A reset
  with options (the reset leak check asks for both) is passed on as it is.
- A reward that is not a finite number (NaN, infinity, a string, a bool) fails the property
  at once: every comparison downstream (`reward < 1.0` is False for NaN) would otherwise
  read it as whatever that comparison happens to give.

Anything else is the wrapped env's own (`episode`, `task`, `oracle_action`, ...).
"""

from __future__ import annotations

import math
import numbers
from typing import Any, Protocol

from trace_gym.env import Task
from trace_gym.testing.seeds import Plan
from trace_gym.tools import Toolset


class PropertyFailed(AssertionError):
    """A property does not hold; the message says where and why."""


def checked_reward(reward: Any, seed: int | None = None) -> float:
    """`reward` as a float, or PropertyFailed when it is not a finite real number."""
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real) or not math.isfinite(reward):
        where = f"seed {seed}: " if seed is not None else ""
        raise PropertyFailed(f"{where}step() returned the reward {reward!r} ({type(reward).__name__}), "
                             f"not a finite number: a reward must be a finite float in [0, 1]")
    return float(reward)


class PlayedWorld(Protocol):
    """What the kit reads of an episode's initial world."""

    def hash(self) -> str:
        """The world's hash."""
        ...


class PlayedEpisode(Protocol):
    """What the kit reads of the episode in progress: a `TraceEnv`'s `Episode`, or the
    `RemoteEpisode` of a sandboxed env."""

    @property
    def toolset(self) -> Toolset | None:
        """The episode's tools (a TraceEnv's episode has them from its reset on)."""
        ...
    @property
    def turn(self) -> int:
        """The turns played so far."""
        ...
    @property
    def initial_world(self) -> PlayedWorld:
        """The world the episode started from."""
        ...


class PlayedEnv(Protocol):
    """What the kit's policies and adversaries use of an env: a `TraceEnv`, the `RemoteEnv` of
    a sandboxed one, or the `KitEnv` around either."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, dict[str, Any]]:
        """Start an episode."""
        ...
    def step(self, action: Any) -> tuple[list, float, bool, bool, dict[str, Any]]:
        """Play one turn."""
        ...
    def oracle_action(self, messages: list[dict[str, Any]]) -> Any:
        """The oracle's next turn."""
        ...
    @property
    def episode(self) -> PlayedEpisode:
        """The episode in progress."""
        ...
    @property
    def task(self) -> Task:
        """The task of the episode in progress."""
        ...


def toolset_of(env: PlayedEnv) -> Toolset:
    """The tools of `env`'s episode in progress; PropertyFailed when it has none (a TraceEnv's
    reset gives every episode its tools, so only an env outside that contract can get here)."""
    toolset = env.episode.toolset
    if toolset is None:
        raise PropertyFailed("the env's episode has no toolset: reset() must give every episode its tools")
    return toolset


class KitEnv:
    """`env` with resets hinted by `plan` and rewards checked (see the module docstring).
    `fit_seeds`: the train seeds the learning adversaries fit on (`adversaries.fit_seeds`)."""

    def __init__(self, env: Any, plan: Plan | None = None, fit_seeds: tuple[int, ...] | None = None) -> None:
        self.env = env
        self.plan = plan
        self.fit_seeds = fit_seeds
        self._seed: int | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, dict[str, Any]]:
        """Reset the env; with no options, hinted as the plan says for this seed."""
        if options is None and self.plan is not None and seed is not None:
            options = {"hint": self.plan.hint(seed)}
        self._seed = seed
        return self.env.reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple[list, float, bool, bool, dict[str, Any]]:
        """Step the env, its reward checked to be a finite number."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, checked_reward(reward, self._seed), terminated, truncated, info

    def __getattr__(self, name: str) -> Any:
        if name == "env":  # not set yet: no recursion
            raise AttributeError(name)
        return getattr(self.env, name)

    def __repr__(self) -> str:
        return f"KitEnv({self.env!r})"
