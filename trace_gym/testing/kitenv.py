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
from typing import Any

from trace_gym.testing.seeds import Plan


class PropertyFailed(AssertionError):
    """A property does not hold; the message says where and why."""


def checked_reward(reward: Any, seed: int | None = None) -> float:
    """`reward` as a float, or PropertyFailed when it is not a finite real number."""
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real) or not math.isfinite(reward):
        where = f"seed {seed}: " if seed is not None else ""
        raise PropertyFailed(f"{where}step() returned the reward {reward!r} ({type(reward).__name__}), "
                             f"not a finite number: a reward must be a finite float in [0, 1]")
    return float(reward)


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
