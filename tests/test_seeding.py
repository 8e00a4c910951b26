"""Seed splits and the train-seed bands (trace_gym/seeding.py)."""

from __future__ import annotations

import pytest


def test_the_train_seed_bands_are_disjoint_and_inside_the_train_split():
    """Each use that draws its own train seeds has one band, declared in trace_gym.seeding:
    no two overlap, every one lies in the train split, and GRPO never draws the validation band."""
    from itertools import combinations

    from trace_gym.errors import InvalidConfig
    from trace_gym.seeding import BANDS, SPLITS, band, demonstration_seed
    from trace_gym.trainer import grpo
    from trace_gym.trainer.config import GRPOConfig

    for (a, x), (b, y) in combinations(BANDS.items(), 2):
        assert x.stop <= y.start or y.stop <= x.start, (a, b)
    assert all(r.start >= SPLITS["train"].start and r.stop <= SPLITS["train"].stop for r in BANDS.values())
    assert demonstration_seed(1, 0) in BANDS["demonstrations"] and demonstration_seed(6, 99) + 99_999 in \
        BANDS["demonstrations"]
    assert band("gate_data", 3) == [500_000_000, 500_000_001, 500_000_002]
    drawn = grpo.draw_seeds(GRPOConfig(), 0, 0, 2000, set())
    assert not set(drawn) & set(BANDS["validation"]) and grpo.validation_seeds(2) == list(BANDS["validation"][:2])
    with pytest.raises(InvalidConfig, match="unknown seed band 'gate'"):
        band("gate", 1)
