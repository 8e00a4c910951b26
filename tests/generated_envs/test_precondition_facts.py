"""Precondition verification: the fact a refusal must state is only in the records.

A red team found that a fixed refusal per request kind, its fact guessed from the customer's
words, earned far more than refusing with no reason (the flown flight always landed
yesterday, the bags always one or two more than asked for, the gift card always half the
total). These tests bound every such guess: the guessing adversary, the spread of the facts
themselves, and the oracle that still solves every seed.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import gymnasium as gym
import pytest

from trace_gym.seeding import SPLITS
from trace_gym.testing.adversaries import do_nothing, play_oracle
from trace_gym.testing.guesses import GUESSED_VARIANTS

ENV_ID = "trace/precondition_verification-v0"
OVER_DO_NOTHING = 0.05
"""What a guessed refusal may earn above refusing with no reason (the kit's bound)."""
MAX_GUESS_SHARE = 0.25
"""The most forbidden requests of a kind (or of a variant) that the best guess of the fact may
be right on. Chance is a fifth where the range is narrowest (five order statuses); over the
~650 held-out requests of a kind a quarter is three standard deviations above it. The old
generator's guesses were right on half of them or more."""
SPREAD_SEEDS = 4000
SPLIT_SEEDS = {"train": [SPLITS["train"][i * 7919 % len(SPLITS["train"])] for i in range(300)],
               "test": [SPLITS["test"][i] for i in range(300)]}
"""The kit's draw of each split."""

_SMALL_NUMBER = re.compile(r"(?<![\w.-])\d{1,2}(?![\w-])")


def make_env(**knobs: Any) -> Any:
    """The env under test (a test of an older generator swaps this)."""
    return gym.make(ENV_ID, **knobs).unwrapped


@pytest.mark.parametrize("split", ["train", "test"])
def test_guessed_refusals_earn_no_more_than_doing_nothing(split):
    env = make_env()
    seeds = SPLIT_SEEDS[split][:200]
    nothing = {seed: do_nothing(env, seed) for seed in seeds}
    for name, guess in GUESSED_VARIANTS.items():
        rewards = {seed: guess(env, seed) for seed in seeds}
        played = [seed for seed, reward in rewards.items() if reward is not None]
        assert played, name
        mean = sum(rewards[seed] for seed in played) / len(played)
        base = sum(nothing[seed] for seed in played) / len(played)
        assert mean <= base + OVER_DO_NOTHING, f"{name} on {split}: {mean:.3f} vs doing nothing {base:.3f}"


def descriptions(fact: dict[str, Any], said: list[int]) -> set[tuple[Any, ...]]:
    """Every way a guess could give this fact: its value, a number the customer said plus a
    constant, or a fixed share of the total it is compared with (a gift card's)."""
    value = fact["value"]
    out: set[tuple[Any, ...]] = {("value", value)}
    if re.fullmatch(r"\d+", value):
        out |= {("said", i, int(value) - n) for i, n in enumerate(said)}
    if fact["kind"] == "amount":
        out |= {("share of", round(float(value) / float(total), 2)) for total in fact["also"]}
    return out


def best_guess_share(facts: list[tuple[str, set[tuple[Any, ...]]]]) -> float:
    """The share of `facts` ((rule, descriptions) pairs) that the best single guess, a rule
    named with one description, is right on: chosen on every other fact and scored on the
    rest (the best of many guesses on the same facts looks better than it is)."""
    chosen, scored = facts[::2], facts[1::2]
    counts = Counter((rule, d) for rule, described in chosen for d in described)
    (rule, guess), _ = counts.most_common(1)[0]
    return sum(1 for r, described in scored if r == rule and guess in described) / len(scored)


@pytest.mark.parametrize("airline_share", [1.0, 0.0])
def test_no_guess_from_the_request_tells_the_fact(airline_share):
    env = make_env(forbidden_rate=1.0, airline_share=airline_share)
    by_kind: dict[str, list] = {}
    by_variant: dict[tuple[str, str], list] = {}
    for seed in range(SPREAD_SEEDS):
        env.reset(seed=seed)
        task = env.task.to_json()
        said = [int(n) for n in _SMALL_NUMBER.findall(task["request"])]
        described = (task["rule"][0], descriptions(task["fact"], said))
        by_kind.setdefault(task["kind"], []).append(described)
        if task["fact"]["kind"] != "cabin":  # basic economy: the rule's name is the cabin
            by_variant.setdefault((task["kind"], task["rule"][0]), []).append(described)
    shares = {**{kind: best_guess_share(facts) for kind, facts in by_kind.items()},
              **{variant: best_guess_share(facts) for variant, facts in by_variant.items()}}
    assert len(by_kind) == 3
    assert max(shares.values()) <= MAX_GUESS_SHARE, shares


@pytest.mark.parametrize("split", ["train", "test"])
def test_the_oracle_solves_every_seed(split):
    env = make_env()
    for seed in SPLIT_SEEDS[split]:
        reward, _ = play_oracle(env, seed)
        assert reward == 1.0, (split, seed, env.task.to_json()["kind"])
