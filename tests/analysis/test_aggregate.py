"""The aggregation follows TRACE exactly: properties over labels and runs."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.analysis.aggregate import Params, aggregate, run_metrics
from trace_gym.errors import InvalidConfig

labels_st = st.sampled_from(["NA", "PRESENT", "LACKING"])


@st.composite
def labelled(draw, min_size=1, max_size=30):
    n = draw(st.integers(min_size, max_size))
    passed = {f"t{i}": draw(st.booleans()) for i in range(n)}
    labels = {t: draw(labels_st) for t in passed}
    return labels, passed


@given(labelled())
def test_metrics_in_range(data):
    labels, passed = data
    m = run_metrics(labels, passed)
    assert 0.0 <= m["cov"] <= 1.0 and 0.0 <= m["er_minus"] <= 1.0 and 0.0 <= m["er_plus"] <= 1.0
    assert -1.0 <= m["delta"] <= 1.0 and m["delta"] == pytest.approx(m["er_minus"] - m["er_plus"])


def test_zero_denominators_give_zero():
    m = run_metrics({"a": "NA", "b": "NA"}, {"a": True, "b": False})
    assert (m["cov"], m["er_minus"], m["er_plus"], m["delta"]) == (0.0, 0.0, 0.0, 0.0)
    assert run_metrics({}, {})["cov"] == 0.0


@given(labelled())
def test_present_to_lacking_on_a_failure_never_lowers_delta_or_cov(data):
    labels, passed = data
    before = run_metrics(labels, passed)
    for t, lab in labels.items():
        if lab == "PRESENT" and not passed[t]:
            after = run_metrics({**labels, t: "LACKING"}, passed)
            assert after["delta"] >= before["delta"] - 1e-12 and after["cov"] >= before["cov"] - 1e-12


def _runs(passing: int, total: int = 10):
    """`passing` runs where c clearly passes, the rest where it clearly does not."""
    passed = {"f1": False, "f2": False, "p1": True}
    good = {"c": {"f1": "LACKING", "f2": "LACKING", "p1": "PRESENT"}}
    bad = {"c": {"f1": "PRESENT", "f2": "PRESENT", "p1": "PRESENT"}}
    return [good] * passing + [bad] * (total - passing), passed


def test_k_of_n_rule_is_exact_at_the_boundary():
    for passing, selected in ((7, False), (8, True), (10, True)):
        runs, passed = _runs(passing)
        (summary,) = aggregate(runs, passed, Params())
        assert summary["runs_passed"] == passing and summary["passes_consistency"] is selected


def test_thresholds_are_inclusive():
    # Cov exactly rho and Delta exactly delta pass.
    passed = {f"f{i}": False for i in range(10)} | {f"p{i}": True for i in range(5)}
    labels = {f"f{i}": "PRESENT" for i in range(10)}
    labels["f0"] = "LACKING"  # Cov 0.1, ER- 0.1
    labels |= {f"p{i}": "NA" for i in range(5)}
    m = run_metrics(labels, passed)
    assert m["cov"] == pytest.approx(0.1)
    (s,) = aggregate([{"c": labels}] * 10, passed, Params(rho=0.1, delta=0.1, k=10, n=10))
    assert s["passes_consistency"]


@given(st.lists(labelled(min_size=3, max_size=12), min_size=2, max_size=4), st.randoms(use_true_random=False))
def test_permuting_runs_or_trajectories_changes_nothing(datasets, random):
    passed = datasets[0][1]
    ids = list(passed)
    runs = [{"c": {t: labels.get(t, "NA") for t in ids}, "d": {t: "LACKING" for t in ids}} for labels, _ in datasets]
    base = aggregate(runs, passed, Params(k=1, n=len(runs)))
    shuffled_runs = runs[:]
    random.shuffle(shuffled_runs)
    order = ids[:]
    random.shuffle(order)
    reordered = [{c: {t: run[c][t] for t in order} for c in run} for run in shuffled_runs]
    again = aggregate(reordered, {t: passed[t] for t in order}, Params(k=1, n=len(runs)))
    strip = lambda xs: [{k: v for k, v in x.items() if k != "per_run"} for x in xs]  # noqa: E731
    assert strip(base) == strip(again)


def test_params_are_validated():
    with pytest.raises(InvalidConfig, match="k"):
        Params(k=11, n=10)
    with pytest.raises(InvalidConfig, match="rho"):
        Params(rho=1.5)
