"""The seeded random source."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

from trace_gym.rng import Rng, pcg64_first_output


@given(st.integers(0, 2**32))
def test_same_seed_same_draws(seed):
    a, b = Rng.from_seed(seed), Rng.from_seed(seed)
    assert [a.random() for _ in range(700)] == [b.random() for _ in range(700)]
    assert a.digits(20) == b.digits(20) and a.letters(6) == b.letters(6)


@given(st.integers(0, 2**32), st.integers(1, 40))
def test_ranges(seed, n):
    rng = Rng.from_seed(seed)
    for _ in range(50):
        assert 0 <= rng.below(n) < n
        assert -3 <= rng.integer(-3, n) <= n
    assert len(rng.digits(n)) == n and rng.digits(n).isdigit()
    assert sorted(rng.sample(range(n), n)) == list(range(n))


def test_digits_are_spread():
    rng = Rng.from_seed(1)
    counts = [0] * 10
    for _ in range(2000):
        for ch in rng.digits(13):
            counts[int(ch)] += 1
    assert min(counts) > 0.8 * max(counts)


@given(st.integers(0, 2**140))
@example(0)
@example(2**32 - 1)
@example(2**32)
@example(2**128 - 1)
@example(2**128)
def test_first_output_is_numpys(seed):
    assert pcg64_first_output(seed) == np.random.default_rng(seed).bit_generator.random_raw()


def test_from_seed_draws_as_from_the_generator():
    """Rng's definition: a Mersenne Twister seeded with the Generator's first output."""
    for seed in (0, 7, 10**9 + 3):
        a, b = Rng.from_seed(seed), Rng(np.random.default_rng(seed))
        mt = random.Random(np.random.default_rng(seed).bit_generator.random_raw())
        expected = [mt.random() for _ in range(50)]
        assert [a.random() for _ in range(50)] == expected == [b.random() for _ in range(50)]
