"""Fast scalar draws derived from a seeded numpy Generator.

World and task generation makes about a thousand small draws per episode. A numpy call
costs as much as a few hundred scalar draws whatever its size, so `Rng` takes one 64-bit
seed from the episode's numpy Generator and draws from a private Mersenne Twister seeded
with it (an instance of `random.Random`'s C base class, never the global module: the same
draws, without the Python-level seeding wrapper that costs as much as the seeding).
Everything still comes from the episode seed: no global RNG, no clock, the same sequence
on every platform.

Making that Generator (numpy's SeedSequence, then PCG64) is a large part of a small
episode's cost, and an episode needs only its first output, so `Rng.from_seed` computes that
output directly (`pcg64_first_output`, numpy's algorithms in integer arithmetic; a test
compares the two over many seeds).
"""

from __future__ import annotations

from _random import Random as _MersenneTwister  # random.Random's C base: the same draws
from collections.abc import Sequence
from typing import TypeVar

import numpy as np

T = TypeVar("T")


class Rng:
    """Scalar random draws derived from a numpy Generator (the only source of randomness)."""

    __slots__ = ("_mt", "random")

    def __init__(self, gen: np.random.Generator) -> None:
        self._mt = _MersenneTwister(gen.bit_generator.random_raw())
        self.random = self._mt.random
        """A uniform float in [0, 1)."""

    @classmethod
    def from_seed(cls, seed: int) -> Rng:
        """The same draws as `Rng(np.random.default_rng(seed))`, without making the Generator."""
        rng = object.__new__(cls)
        rng._mt = _MersenneTwister(pcg64_first_output(seed))
        rng.random = rng._mt.random
        return rng

    def state(self) -> tuple:
        """The stream's whole state: two streams in the same state draw the same from there on."""
        return self._mt.getstate()

    def set_state(self, state: tuple) -> None:
        """Continue the stream from `state` (what `state()` returned)."""
        self._mt.setstate(state)

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
        """One element of seq, drawn uniformly."""
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
        """Shuffle `items` in place (Fisher-Yates)."""
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


# numpy's SeedSequence hashes the seed's 32-bit words into a pool of four, mixes the pool,
# and derives PCG64's 128-bit state and increment from it. Its hash constants do not depend
# on the seed, so each hashing step below is a precomputed (constant, next constant) pair.
_M32, _M64, _M128 = (1 << 32) - 1, (1 << 64) - 1, (1 << 128) - 1


def _powers(start: int, multiplier: int, n: int) -> list[int]:
    out = [start]
    while len(out) < n:
        out.append(out[-1] * multiplier & _M32)
    return out


_h = _powers(0x43B0D7E5, 0x931E8875, 17)
_FILL = tuple((32 * k, _h[k], _h[k + 1]) for k in range(4))  # (word's shift, constants)
_MIX = tuple((src, dst, _h[k], _h[k + 1]) for k, (src, dst) in
             enumerate(((s, d) for s in range(4) for d in range(4) if s != d), start=4))
_h = _powers(0x8B51F9DD, 0x58F38DED, 9)
_STATE = tuple((i % 4, _h[i], _h[i + 1]) for i in range(8))  # (pool word, constants)
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_PCG_MULT_2 = _PCG_MULT * _PCG_MULT & _M128
del _h


def pcg64_first_output(seed: int) -> int:
    """`np.random.default_rng(seed).bit_generator.random_raw()`: the first 64-bit output of
    PCG64 seeded through SeedSequence, for a non-negative integer seed."""
    if type(seed) is not int or not 0 <= seed < 1 << 128:  # bools, numpy ints, longer entropy, errors
        return int(np.random.default_rng(seed).bit_generator.random_raw())
    pool = []
    for shift, h0, h1 in _FILL:
        v = ((seed >> shift & _M32) ^ h0) * h1 & _M32
        pool.append(v ^ v >> 16)
    for src, dst, h0, h1 in _MIX:
        v = (pool[src] ^ h0) * h1 & _M32
        m = (_MIX_L * pool[dst] - _MIX_R * (v ^ v >> 16)) & _M32
        pool[dst] = m ^ m >> 16
    w = []
    for i, h0, h1 in _STATE:
        v = (pool[i] ^ h0) * h1 & _M32
        w.append(v ^ v >> 16)
    state = (w[0] | w[1] << 32) << 64 | w[2] | w[3] << 32
    inc = ((w[4] | w[5] << 32) << 64 | w[6] | w[7] << 32) << 1 & _M128 | 1
    # Seeding steps the LCG twice (from 0, then after adding the state); the draw once more.
    state = ((inc + state) * _PCG_MULT_2 + inc * (_PCG_MULT + 1)) & _M128
    x = (state >> 64) ^ (state & _M64)  # XSL-RR output
    rot = state >> 122
    return (x >> rot | x << (64 - rot)) & _M64
