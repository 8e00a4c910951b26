"""Fast scalar draws derived from a seeded numpy Generator.

World and task generation makes about a thousand small draws per episode. A numpy call
costs as much as a few hundred scalar draws whatever its size, so `Rng` takes one 64-bit
seed from the episode's numpy Generator and draws from a private Mersenne Twister seeded
with it (`random.Random`, an instance, never the global module). Everything still comes
from the episode seed: no global RNG, no clock, the same sequence on every platform.
"""

from __future__ import annotations

import random as _random
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


class Rng:
    """Scalar random draws derived from a numpy Generator (the only source of randomness)."""

    __slots__ = ("_mt", "random")

    def __init__(self, gen: np.random.Generator) -> None:
        self._mt = _random.Random(gen.bit_generator.random_raw())
        self.random = self._mt.random
        """A uniform float in [0, 1)."""

    @classmethod
    def from_seed(cls, seed: int) -> Rng:
        return cls(np.random.default_rng(seed))

    def floats(self, n: int) -> list[float]:
        """n uniform floats in [0, 1)."""
        r = self.random
        return [r() for _ in range(n)]

    def below(self, n: int) -> int:
        """A uniform integer in [0, n)."""
        return int(self.random() * n)

    def integer(self, low: int, high: int) -> int:
        """A uniform integer in [low, high], both ends included."""
        return low + int(self.random() * (high - low + 1))

    def chance(self, p: float) -> bool:
        """True with probability p."""
        return self.random() < p

    def choice(self, seq: Sequence[T]) -> T:
        return seq[int(self.random() * len(seq))]

    def weighted(self, seq: Sequence[T], weights: Sequence[float]) -> T:
        """One element of seq, drawn with the given (unnormalised) weights."""
        x = self.random() * sum(weights)
        for item, w in zip(seq, weights):
            x -= w
            if x < 0:
                return item
        return seq[-1]

    def sample(self, seq: Sequence[T], k: int) -> list[T]:
        """k distinct elements of seq, in random order."""
        pool = list(seq)
        if k > len(pool):
            raise ValueError(f"cannot sample {k} of {len(pool)} elements")
        for i in range(k):
            j = i + int(self.random() * (len(pool) - i))
            pool[i], pool[j] = pool[j], pool[i]
        return pool[:k]

    def shuffle(self, items: list[T]) -> None:
        for i in range(len(items) - 1, 0, -1):
            j = int(self.random() * (i + 1))
            items[i], items[j] = items[j], items[i]

    def digits(self, n: int) -> str:
        """A string of n random decimal digits."""
        if n <= 13:  # one uniform carries 13 decimal digits
            return str(int(self.random() * 10**n)).zfill(n)
        return self.digits(13) + self.digits(n - 13)

    def letters(self, n: int, alphabet: str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") -> str:
        """n random characters of `alphabet`. One uniform yields as many characters as its
        53 bits allow (ids are drawn often)."""
        base = len(alphabet)
        per_draw = max(1, int(52 // base.bit_length()))
        out = []
        while n > 0:
            k = min(n, per_draw)
            x = int(self.random() * base**k)
            for _ in range(k):
                x, r = divmod(x, base)
                out.append(alphabet[r])
            n -= k
        return "".join(out)
