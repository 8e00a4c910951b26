"""Pickling an env by replay, so that it crosses to another process (a vector env's worker,
a multiprocessing pool, a Ray actor) and goes on there exactly as it would have here.

An env's state is not plain data: tools are functions, a sandboxed env's episode lives in
a worker process, the coding env's in a scratch repository. But every trace-gym env is a
pure function of its construction arguments, its reset's seed and options, and the actions
played since (randomness only from the seed). So an env pickles as those: what it was made
with, the last reset (the generator's state before an unseeded reset's draws), the actions
since, and its generator as it is now. Unpickling makes a fresh env (a sandboxed one gets
a worker of its own), replays the reset and the actions with rendering off, and puts the
generator back: the copy continues identically, step for step.

A replay costs what the episode cost so far (the coding env reruns its commands); an env
between episodes pickles as its construction alone.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Replay", "ReplayPickling"]


@dataclass
class Replay:
    """The last reset and the actions played since."""

    seed: int | None
    options: dict[str, Any] | None
    generator: dict[str, Any] | None = None
    """The bit generator's state before an unseeded reset drew from it (None: seeded)."""
    actions: list[str | bytes] = field(default_factory=list)
    """Each action since: a text as it is, anything else pickled when it was played (so that
    a caller changing its dict afterwards changes nothing here; a C pickle costs a fraction
    of a deep copy, on every step)."""


class ReplayPickling:
    """Mixin of an env that pickles by replay (see the module docstring). The env calls
    `_record_reset` after a reset succeeds and `_record_action` before it plays a step."""

    _made_with: tuple[tuple[Any, ...], dict[str, Any]]
    _replay: Replay | None
    _unreplayable: str | None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        """A new env that keeps the arguments of its outermost constructor call: what a copy
        is made with."""
        self = super().__new__(cls)
        self._made_with, self._replay, self._unreplayable = (args, dict(kwargs)), None, None
        return self

    def _record_reset(self, seed: int | None, options: Mapping[str, Any] | None,
                      generator: Mapping[str, Any] | None = None) -> None:
        self._replay = Replay(seed, None if options is None else copy.deepcopy(dict(options)),
                              None if generator is None else dict(generator))
        self._unreplayable = None

    def _record_action(self, action: Any) -> None:
        if self._replay is None:
            return
        if isinstance(action, str):
            self._replay.actions.append(action)
            return
        try:
            self._replay.actions.append(pickle.dumps(action, pickle.HIGHEST_PROTOCOL))
        except Exception as exc:  # an action no pickle takes: the env cannot be pickled either
            self._replay, self._unreplayable = None, f"an action of its episode does not pickle ({exc})"

    def _pickle_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The constructor arguments a copy is made with (a subclass drops process-bound ones)."""
        return self._made_with

    def _pickle_extra(self) -> dict[str, Any]:
        """Attributes set on the copy before its replay (a subclass's protocol flags)."""
        return {}

    def __reduce__(self) -> tuple[Any, ...]:
        if self._unreplayable is not None:
            raise pickle.PicklingError(f"{type(self).__name__} cannot be pickled now: {self._unreplayable}")
        args, kwargs = self._pickle_arguments()
        generator = getattr(self, "_generator", None)
        now = {"pending_seed": getattr(self, "_pending_seed", None),
               "generator": None if generator is None else generator.bit_generator.state,
               "np_random_seed": getattr(self, "_np_random_seed", None),
               "spec": getattr(self, "spec", None), "extra": self._pickle_extra()}
        return _restore, (type(self), args, kwargs, self._replay, now)


def _generator(state: dict[str, Any]) -> np.random.Generator:
    bit_generator = getattr(np.random, state["bit_generator"])()
    bit_generator.state = state
    return np.random.Generator(bit_generator)


def _restore(cls: type, args: tuple[Any, ...], kwargs: dict[str, Any], replay: Replay | None,
             now: dict[str, Any]) -> Any:
    """A fresh env of `cls`, replayed to where the pickled one was."""
    env = cls(*args, **kwargs)
    for name, value in now["extra"].items():
        setattr(env, name, value)
    if replay is not None:
        render_mode, env.render_mode = env.render_mode, None  # a replay draws nothing
        try:
            if replay.generator is not None:
                env._np_random = _generator(replay.generator)
            env.reset(seed=replay.seed, options=replay.options)
            for action in replay.actions:
                env.step(action if isinstance(action, str) else pickle.loads(action))
        finally:
            env.render_mode = render_mode
    if now["pending_seed"] is not None:
        env._pending_seed = now["pending_seed"]
    elif now["generator"] is not None:
        env._np_random = _generator(now["generator"])
    env._np_random_seed = now["np_random_seed"]
    if now["spec"] is not None:
        env.spec = now["spec"]
    return env
