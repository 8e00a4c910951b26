"""The aggregation follows TRACE exactly: properties over labels and runs."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.analysis.aggregate import Params, aggregate, default_k, run_metrics
from trace_gym.errors import InvalidConfig

labels_st = st.sampled_from(["NA", "PRESENT", "LACKING"])


@st.composite
def labelled(draw, min_size=1, max_size=30):
    n = draw(st.integers(min_size, max_size))
    passed = {f"t{i}": draw(st.booleans()) for i in range(n)}
    labels = {t: draw(labels_st) for t in passed}
    return labels, passed


@given(labelled())
def test_metrics_are_trace_formulas_over_counts_made_here(data):
    labels, passed = data
    failed = [t for t in passed if not passed[t]]
    count = {(lab, ok): sum(1 for t in labels if labels[t] == lab and passed[t] == ok)
             for lab in ("LACKING", "PRESENT") for ok in (True, False)}
    lf, pf, lp, pp = count["LACKING", False], count["PRESENT", False], count["LACKING", True], count["PRESENT", True]
    er_minus = Fraction(lf, lf + pf) if lf + pf else 0
    er_plus = Fraction(lp, lp + pp) if lp + pp else 0
    m = run_metrics(labels, passed)
    assert (m["LF"], m["PF"], m["LP"], m["PP"]) == (lf, pf, lp, pp)
    assert m["cov"] == (Fraction(lf, len(failed)) if failed else 0)
    assert m["er_minus"] == er_minus and m["er_plus"] == er_plus and m["delta"] == er_minus - er_plus


def _labels(lacking_failed, present_failed, lacking_passed, present_passed):
    labels, passed = {}, {}
    for prefix, n, label, ok in (("lf", lacking_failed, "LACKING", False), ("pf", present_failed, "PRESENT", False),
                                 ("lp", lacking_passed, "LACKING", True), ("pp", present_passed, "PRESENT", True)):
        for i in range(n):
            labels[f"{prefix}{i}"], passed[f"{prefix}{i}"] = label, ok
    return labels, passed


@pytest.mark.parametrize("counts, selected", [
    ((3, 7, 1, 9), True),     # Delta = 3/10 - 1/10 = 0.2 exactly (floats give 0.19999999999999998)
    ((29, 71, 1, 9), False),  # Delta = 0.29 - 0.1 = 0.19 < 0.2
    ((1, 9, 0, 5), False),    # Cov = 0.1 passes, Delta = 0.1 < 0.2
    ((7, 3, 1, 9), True),     # Delta = 0.7 - 0.1 = 0.6 (float 0.6 - 0.1 = 0.49999999999999994 > 0.2 either way)
])
def test_threshold_decisions_are_exact(counts, selected):
    labels, passed = _labels(*counts)
    assert 0.3 - 0.1 < 0.2  # the float trap this guards against
    (summary,) = aggregate([{"c": labels}] * 10, passed, Params())
    assert summary["passes_consistency"] is selected and summary["runs_passed"] == (10 if selected else 0)


def test_coverage_exactly_at_rho_passes_and_just_below_fails():
    labels, passed = _labels(1, 0, 0, 5)  # one failed trajectory of ten is LACKING: Cov 1/10
    passed.update({f"f{i}": False for i in range(9)})
    labels.update({f"f{i}": "NA" for i in range(9)})
    (at,) = aggregate([{"c": labels}] * 10, passed, Params(rho=0.1))
    (above,) = aggregate([{"c": labels}] * 10, passed, Params(rho=0.11))
    assert at["passes_consistency"] and not above["passes_consistency"]


def test_aggregation_takes_exactly_n_runs():
    labels, passed = _labels(3, 0, 0, 3)
    with pytest.raises(InvalidConfig, match="20 labelling runs given, but the selection rule is K=8 of N=10"):
        aggregate([{"c": labels}] * 8 + [{"c": {}}] * 12, passed, Params())
    (summary,) = aggregate([{"c": labels}] * 8 + [{"c": {}}] * 12, passed, Params(k=16, n=20))
    assert summary["runs_passed"] == 8 and not summary["passes_consistency"]
    assert default_k(10) == 8 and default_k(20) == 16 and default_k(3) == 3


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


def test_thresholds_are_inclusive_at_a_non_binary_decimal():
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


@pytest.mark.parametrize("kwargs, ok", [
    ({"rho": 0.0}, True), ({"rho": 1.0}, True), ({"rho": -0.01}, False), ({"rho": 1.01}, False),
    ({"delta": -1.0}, True), ({"delta": 1.0}, True), ({"delta": -1.01}, False), ({"delta": 1.01}, False),
    ({"delta": -0.5}, True), ({"n": 1, "k": 1}, True), ({"n": 0, "k": 1}, False), ({"n": 2.5, "k": 1}, False),
    ({"k": 0}, False), ({"k": 10}, True), ({"k": 11}, False), ({"k": 8.0}, False),
])
def test_params_bounds_are_inclusive_and_checked(kwargs, ok):
    if ok:
        Params(**kwargs)
    else:
        with pytest.raises(InvalidConfig, match=f"Params.{next(iter(kwargs))}="):
            Params(**kwargs)


def test_params_cannot_be_changed_after_construction():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        Params().k = 1


def test_labels_read_from_json_count_like_literals():
    """Labels come from an analyst's JSON: strings equal to the label, not the same object."""
    import json

    labels, passed = _labels(3, 7, 1, 9)
    built = json.loads(json.dumps(labels))  # equal to the literals, other objects
    assert all(built[t] is not labels[t] for t in labels)
    assert run_metrics(built, passed) == run_metrics(labels, passed)
    assert (run_metrics(built, passed)["LF"], run_metrics(built, passed)["PF"]) == (3, 7)
    assert (run_metrics(built, passed)["LP"], run_metrics(built, passed)["PP"]) == (1, 9)


def test_fewer_runs_than_n_are_refused_too_and_any_n_is_compared_by_value():
    labels, passed = _labels(3, 0, 0, 3)
    with pytest.raises(InvalidConfig, match="8 labelling runs given"):
        aggregate([{"c": labels}] * 8, passed, Params())
    (summary,) = aggregate([{"c": labels}] * 300, passed, Params(k=240, n=300))  # ints past the small-int cache
    assert summary["runs_passed"] == 300


def test_selected_capabilities_come_first_then_by_mean_delta_then_by_name():
    passed = {f"f{i}": False for i in range(10)} | {f"p{i}": True for i in range(10)}

    def labels(lacking_failed: int, lacking_passed: int) -> dict[str, str]:
        return {t: "LACKING" if int(t[1:]) < (lacking_passed if ok else lacking_failed) else "PRESENT"
                for t, ok in passed.items()}

    strong, weak, low = labels(9, 0), labels(5, 1), labels(1, 0)  # Delta 0.9 and 0.4 selected, 0.1 not
    run = {"b_weak": weak, "a_low": low, "c_strong": strong, "d_weak": dict(weak)}
    order = [s["name"] for s in aggregate([run] * 10, passed, Params())]
    assert order == ["c_strong", "b_weak", "d_weak", "a_low"]
