"""The seeds the kit plays, drawn from a base.

A fixed sample of seeds is a target: a verifier that pays on every seed the sample never
visits passes the kit and pays a random policy everywhere else. So every seed the kit plays
is drawn uniformly over the whole of its split (`trace_gym.seeding.SPLITS`), from a stream
of the kit's `seed_base` and the draw's purpose alone (no clock, no global RNG, no `hash()`
of a string): one base gives the same seeds in every process, and `trace-gym audit` draws a
new base for each audit and records it.

A plan (`Plan`) is what most properties play: half train seeds, half test seeds, every
other seed of each split reset with a hint (`reset(options={"hint": True})`), so that a
verifier paying only after hinted resets, or only after unhinted ones, is played both ways
without playing any seed twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from trace_gym.errors import InvalidConfig
from trace_gym.rng import Rng
from trace_gym.seeding import SPLITS, split_of


def stream(base: int, purpose: str) -> Rng:
    """A random stream that depends on `base` and `purpose` only (the purpose's words come
    from SHA-256: `hash()` of a string changes with PYTHONHASHSEED)."""
    words = hashlib.sha256(purpose.encode()).digest()[:16]
    key = tuple(int.from_bytes(words[i:i + 4], "little") for i in range(0, 16, 4))
    return Rng(np.random.default_rng(np.random.SeedSequence(base, spawn_key=key)))


def draw(base: int, purpose: str, split: str, n: int) -> list[int]:
    """`n` distinct seeds of `split`, uniform over its whole range, in the order drawn (a
    draw of n is the first n of a draw of more)."""
    r = SPLITS[split]
    if not 0 <= n <= len(r):
        raise InvalidConfig(f"cannot draw {n} distinct seeds from split {split!r} ({len(r)} seeds)")
    rng = stream(base, f"{purpose}/{split}")
    seen: dict[int, None] = {}
    while len(seen) < n:
        seen.setdefault(r[rng.below(len(r))], None)
    return list(seen)


@dataclass(frozen=True)
class Plan:
    """Seeds to play (train seeds first, then test seeds) and which of them to reset hinted."""

    seeds: tuple[int, ...]
    hinted: frozenset[int]

    def hint(self, seed: int) -> bool:
        """Whether the kit resets `seed` with a hint (False for a seed outside the plan)."""
        return seed in self.hinted

    def groups(self) -> dict[str, list[int]]:
        """The seeds of each split and of each kind of reset: every bound holds on each
        (the train and test seeds, the hinted and unhinted resets, each about half)."""
        out: dict[str, list[int]] = {"train": [], "test": [], "hinted": [], "unhinted": []}
        for seed in self.seeds:
            out[split_of(seed)].append(seed)
            out["hinted" if seed in self.hinted else "unhinted"].append(seed)
        return out


def alternating(*draws: list[int]) -> Plan:
    """A plan of the seeds of `draws` in order, every other seed of each draw hinted (the
    second, fourth, ...)."""
    return Plan(tuple(seed for d in draws for seed in d), frozenset(seed for d in draws for seed in d[1::2]))


def plan(base: int, purpose: str, n: int) -> Plan:
    """`n` seeds: n - n // 2 train seeds and n // 2 test seeds, every other one of each
    split hinted."""
    return alternating(draw(base, purpose, "train", n - n // 2), draw(base, purpose, "test", n // 2))
