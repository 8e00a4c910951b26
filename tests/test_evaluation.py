"""Evaluation metrics: pass^k as tau-bench defines it, intervals, breakdowns."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.evaluation import bootstrap_interval, evaluate, pass_hat_k


def test_pass_hat_k_matches_the_definition():
    trials = [[True, True, False, True], [False, False, False, False], [True, True, True, True]]
    assert pass_hat_k(trials, 1) == pytest.approx((3 / 4 + 0 + 1) / 3)
    assert pass_hat_k(trials, 2) == pytest.approx((math.comb(3, 2) / math.comb(4, 2) + 0 + 1) / 3)
    assert pass_hat_k(trials, 4) == pytest.approx((0 + 0 + 1) / 3)


@given(st.lists(st.lists(st.booleans(), min_size=3, max_size=3), min_size=1, max_size=10))
def test_pass_hat_k_never_increases_with_k(trials):
    values = [pass_hat_k(trials, k) for k in (1, 2, 3)]
    assert values[0] >= values[1] - 1e-12 >= values[2] - 2e-12


def test_bootstrap_interval_contains_the_mean():
    values = [1.0] * 30 + [0.0] * 70
    low, high = bootstrap_interval(values)
    assert low < 0.3 < high and 0.15 < low and high < 0.45
    assert bootstrap_interval(values) == (low, high)  # fixed seed


def _record(seed, sample, passed, kind="cancel", caps=("precondition_verification",)):
    return {"env_id": "e", "seed": seed, "sample": sample, "passed": passed, "reward": float(passed),
            "task_kind": kind, "capabilities_needed": list(caps)}


def test_evaluate_breakdowns():
    records = [_record(s, k, s % 2 == 0, "cancel" if s < 2 else "book", ("structured_data_reasoning",) if s == 3 else ())
               for s in range(4) for k in range(2)]
    m = evaluate(records, 2)
    assert m["episodes"] == 8 and m["tasks"] == 4 and m["pass_rate"] == 0.5
    assert m["pass_hat_k"] == {"1": 0.5, "2": 0.5}
    assert m["by_task_kind"]["cancel"]["pass_rate"] == 0.5 and m["by_task_kind"]["book"]["episodes"] == 4
    assert m["by_capability"]["structured_data_reasoning"] == {"episodes": 2, "pass_rate": 0.0, "mean_reward": 0.0}


def test_a_perfect_pass_rate_has_an_interval_that_is_not_a_point():
    """20 passes of 20 (the oracle): the Wilson interval, not a bootstrap's zero width."""
    from trace_gym.evaluation import evaluate, wilson_interval

    records = [{"env_id": "e", "seed": s, "sample": 0, "passed": True, "reward": 1.0} for s in range(20)]
    low, high = evaluate(records)["pass_rate_ci95"]
    assert (round(low, 3), high) == (0.839, 1.0)
    assert wilson_interval(0.0, 20) == pytest.approx((0.0, 0.1611), abs=1e-4)
    # trials of one task are one observation: 4 tasks x 5 trials is an interval over 4, not 20
    many = [{"env_id": "e", "seed": s, "sample": k, "passed": True, "reward": 1.0} for s in range(4) for k in range(5)]
    assert evaluate(many)["pass_rate_ci95"][0] == pytest.approx(wilson_interval(1.0, 4)[0])


def test_pairs_are_the_same_episode_and_the_difference_is_paired():
    """Two policies on the same tasks: an episode pairs with its own (env, seed, sample) and
    with nothing else; the interval resamples pairs, so a gain every pair shares is certain."""
    from trace_gym.evaluation import paired, paired_difference

    before = [{"env_id": e, "seed": s, "sample": 0, "passed": False} for e in ("a", "b") for s in range(10)]
    after = [{"env_id": e, "seed": s, "sample": 0, "passed": e == "a"} for e in ("b", "a") for s in range(12)]
    pairs = paired(before, after)
    assert len(pairs) == 20 and all((b["env_id"], b["seed"]) == (a["env_id"], a["seed"]) for b, a in pairs)
    assert paired_difference(pairs) == {"difference": 0.5, "ci95": pytest.approx((0.3, 0.7), abs=0.1), "seeds": 20}
    same = paired_difference([(b, dict(b, passed=True)) for b in before])
    assert same["difference"] == 1.0 and same["ci95"] == (1.0, 1.0)
