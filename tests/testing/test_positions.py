"""Lists an agent chooses from are ordered independently of the answer.

A red team found that picking a product's variant by its position in `get_product_details`
beat a random available pick (the builder appended the variant a task needs, then its near
misses; payment methods were listed card first). These tests bound every position rule of
`trace_gym.testing.positions` by the random baseline on the envs where it paid, by reward
and, with less noise, choice by choice; and check the root cause directly: where the
variant a task needs sits in its product's list.
"""

from __future__ import annotations

from collections import Counter
from functools import cache

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trace_gym  # noqa: F401  (registers the envs)
from trace_gym.jsondata import loads
from trace_gym.rng import Rng
from trace_gym.seeding import SPLITS
from trace_gym.testing.positions import POSITION_ADVERSARIES, RULES, Choice, oracle_choices, random_available

MARGIN = 0.05
"""How much more than the random pick a position rule may average (the kit's bound)."""

BOUNDED = {
    "structured_retail": ("trace/structured_data_reasoning-v0", {"airline_share": 0.0}, 1000),
    "retail_items": ("trace/retail-v0", {"kinds": ["exchange_items", "modify_items"], "forbidden_rate": 0.0}, 500),
}
"""Env -> (id, arguments, seeds per split): the envs where the position hack paid."""


def _seeds(split: str, n: int) -> list[int]:
    seeds = SPLITS[split]
    return [seeds[i * 7919 % len(seeds)] for i in range(n)] if split == "train" else list(seeds[:n])


@cache
def _mean_rewards(env: str, split: str) -> dict[str, float]:
    """Each player's mean reward over the seeds the baseline applies to (the same seeds for
    every rule: whether an id was a choice does not depend on the rule)."""
    env_id, kwargs, n = BOUNDED[env]
    made = gym.make(env_id, **kwargs).unwrapped
    players = {"random_available": random_available, **POSITION_ADVERSARIES}
    rewards: dict[str, list[float]] = {name: [] for name in players}
    for seed in _seeds(split, n):
        for name, play in players.items():
            reward = play(made, seed)
            if reward is not None:
                rewards[name].append(reward)
    assert len(rewards["random_available"]) >= n // 2, f"the position adversaries applied to too few {env} seeds"
    return {name: sum(r) / len(r) for name, r in rewards.items()}


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("env", sorted(BOUNDED))
def test_no_position_rule_beats_a_random_pick(env: str, split: str) -> None:
    means = _mean_rewards(env, split)
    baseline = means["random_available"]
    beating = {name: round(m, 3) for name, m in means.items() if m > baseline + MARGIN}
    assert not beating, f"{env} ({split}): {beating} beat the random pick's {baseline:.3f} by more than {MARGIN}"


# -- where the answers sit among their candidates -------------------------------------------

SLOT_SEEDS = {
    "structured": ("trace/structured_data_reasoning-v0", {}, 1000),
    "retail_items": BOUNDED["retail_items"][:2] + (500,),
}
"""Env -> (id, arguments, seeds per split) whose oracle choices are looked at one by one."""
MIN_CHOICES = 50


def _hit_margin(n: int) -> float:
    """How much more often than a random available pick a rule may find the answer, over n
    choices: three standard errors of a share near one half, and a little more."""
    return 0.03 + 3 * (0.25 / n) ** 0.5


@pytest.mark.parametrize("split", ["train", "test"])
@pytest.mark.parametrize("env", sorted(SLOT_SEEDS))
def test_no_position_rule_finds_the_answer_more_often(env: str, split: str) -> None:
    """Per write argument, each rule picks the oracle's answer about as often as a random
    available candidate would: a reward-free check, with far less noise than the rewards."""
    env_id, kwargs, n = SLOT_SEEDS[env]
    made = gym.make(env_id, **kwargs).unwrapped
    by_argument: dict[tuple[str, str], list[Choice]] = {}
    for seed in _seeds(split, n):
        for choice in oracle_choices(made, seed):
            by_argument.setdefault((choice.tool, choice.argument), []).append(choice)
    checked = 0
    for (tool, argument), choices in by_argument.items():
        if len(choices) < MIN_CHOICES:
            continue
        checked += 1
        available = [c.candidates.available() or list(c.candidates.ids) for c in choices]
        baseline = sum((c.answer in a) / len(a) for c, a in zip(choices, available)) / len(choices)
        for name, rule in RULES.items():
            hits = sum(rule(c.candidates, Rng.from_seed(0)) == c.answer for c in choices) / len(choices)
            assert hits <= baseline + _hit_margin(len(choices)), (
                f"{env} ({split}) {tool}.{argument}: {name} finds the answer in {hits:.2f} of "
                f"{len(choices)} choices, a random available pick in {baseline:.2f}")
    assert checked, f"no write argument of {env} held {MIN_CHOICES} choices"


# -- where the needed variant sits -------------------------------------------------------

SEEDS_PER_EXAMPLE = 300
MAX_SHARE = 0.4
"""The most tasks one position may hold, counted from either end, among products with at
least four variants. Uniform over four or more places, the largest share of 300 tasks is
about 0.3; appended after the store's own variants and before its near misses, the variant
a task needs sits at the same place from the end in more than half of them."""


def _needed_variant_place(env: gym.Env, seed: int) -> tuple[int, int] | None:
    """(index, number of variants) of the variant a variant-exchange task needs, in the
    product details the agent is shown; None for a task of another kind."""
    obs, _ = env.reset(seed=seed)
    task = env.unwrapped.task
    if task.kind != "variant_exchange":
        return None
    wanted = task.gold["arguments"]["new_item_ids"][0]
    for m in obs:
        if m["role"] == "tool" and '"variants"' in m["content"]:
            variants = list(loads(m["content"])["variants"])
            return variants.index(wanted), len(variants)
    raise AssertionError(f"seed {seed}: the product details are not in the conversation")


def _largest_shares(places: list[tuple[int, int]]) -> tuple[float, float]:
    """The largest share of one index, counted from the start and from the end."""
    wide = [(i, n) for i, n in places if n >= 4]
    assert len(wide) >= len(places) // 2, "too few products with four variants or more to tell"
    from_start = Counter(i for i, _ in wide).most_common(1)[0][1] / len(wide)
    from_end = Counter(n - 1 - i for i, n in wide).most_common(1)[0][1] / len(wide)
    return from_start, from_end


@settings(max_examples=4, deadline=None, derandomize=True)
@given(st.integers(0, 2**32 - 1))
def test_the_needed_variant_is_anywhere_in_the_list(base: int) -> None:
    env = gym.make("trace/structured_data_reasoning-v0", airline_share=0.0)
    rng = Rng.from_seed(base)
    places: list[tuple[int, int]] = []
    while len(places) < SEEDS_PER_EXAMPLE:
        place = _needed_variant_place(env, rng.below(len(SPLITS["train"])))
        if place is not None:
            places.append(place)
    from_start, from_end = _largest_shares(places)
    assert from_start <= MAX_SHARE and from_end <= MAX_SHARE, (
        f"one position holds {from_start:.2f} of the needed variants from the start and "
        f"{from_end:.2f} from the end (at most {MAX_SHARE})")
