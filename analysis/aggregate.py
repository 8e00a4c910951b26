"""Aggregation, exactly as TRACE defines it.

For each labelling run r and capability c, with LF / PF / LP / PP the counts of
LACKING-failed, PRESENT-failed, LACKING-passed and PRESENT-passed trajectories:

    Cov_r   = LF / |failed|
    ER-     = LF / (LF + PF)      ER+ = LP / (LP + PP)      (a zero denominator gives 0)
    Delta_r = ER- - ER+

c passes run r when Cov_r >= rho and Delta_r >= delta; c is selected when it passes in at
least K of the N runs; selected capabilities are ranked by mean Delta.

The metrics are exact fractions and the thresholds the decimals they are written as
(rho=0.1 is 1/10), so a decision at a threshold is exact: Delta = 3/10 - 1/10 passes
delta = 0.2, where floats make it 0.19999999999999998. Aggregation takes exactly N runs: K
of N means nothing for another number of runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from statistics import mean, pstdev
from typing import Any

from trace_gym.errors import InvalidConfig

LABELS = ("NA", "PRESENT", "LACKING")


@dataclass(frozen=True)
class Params:
    """The selection thresholds: a capability passes a run when its coverage is at least `rho` and
    its Delta at least `delta`, and is selected when it passes `k` of `n` runs."""

    rho: float = 0.10
    """Coverage threshold (inclusive), read as the decimal it is written as."""
    delta: float = 0.20
    """Delta threshold (inclusive), read as the decimal it is written as."""
    k: int = 8
    """Runs a capability must pass to be selected."""
    n: int = 10
    """Labelling runs; aggregation refuses another number."""

    def __post_init__(self) -> None:
        from trace_gym.validation import require

        require(self, "rho", 0.0 <= self.rho <= 1.0, "must be in [0, 1]")
        require(self, "delta", -1.0 <= self.delta <= 1.0, "must be in [-1, 1]")
        require(self, "n", isinstance(self.n, int) and self.n >= 1, "must be an integer >= 1")
        require(self, "k", isinstance(self.k, int) and 1 <= self.k <= self.n, f"must be an integer in 1..n={self.n}")

    @property
    def exact_rho(self) -> Fraction:
        """`rho` as the exact decimal it is written as."""
        return _decimal(self.rho)

    @property
    def exact_delta(self) -> Fraction:
        """`delta` as the exact decimal it is written as."""
        return _decimal(self.delta)


def _decimal(x: float) -> Fraction:
    """The decimal a float was written as (repr is the shortest text that reads back as it)."""
    return Fraction(repr(float(x)))


def default_k(n: int) -> int:
    """TRACE's K for another N: the same share of runs (8 of 10), rounded up."""
    return -(-Params.k * n // Params.n)


def _ratio(a: int, b: int) -> Fraction:
    return Fraction(a, b) if b else Fraction(0)


def run_metrics(labels: dict[str, str], passed: dict[str, bool]) -> dict[str, Any]:
    """Cov, ER-, ER+ and Delta (exact fractions) of one capability in one run. `labels`:
    trajectory id -> NA / PRESENT / LACKING; `passed`: trajectory id -> passed."""
    lf = sum(1 for t, lab in labels.items() if lab == "LACKING" and not passed[t])
    pf = sum(1 for t, lab in labels.items() if lab == "PRESENT" and not passed[t])
    lp = sum(1 for t, lab in labels.items() if lab == "LACKING" and passed[t])
    pp = sum(1 for t, lab in labels.items() if lab == "PRESENT" and passed[t])
    failed = sum(1 for ok in passed.values() if not ok)
    er_minus, er_plus = _ratio(lf, lf + pf), _ratio(lp, lp + pp)
    return {"cov": _ratio(lf, failed), "er_minus": er_minus, "er_plus": er_plus, "delta": er_minus - er_plus,
            "LF": lf, "PF": pf, "LP": lp, "PP": pp}


def passes(metrics: dict[str, Any], params: Params) -> bool:
    """Does one run's metrics pass both thresholds (inclusive, exact)?"""
    return metrics["cov"] >= params.exact_rho and metrics["delta"] >= params.exact_delta


def aggregate(runs: list[dict[str, dict[str, str]]], passed: dict[str, bool], params: Params = Params()) -> list[dict[str, Any]]:
    """One summary per capability, selected ones first by mean Delta. `runs`: per run,
    capability -> (trajectory id -> label); exactly `params.n` of them."""
    if len(runs) != params.n:
        raise InvalidConfig(f"{len(runs)} labelling runs given, but the selection rule is K={params.k} of "
                            f"N={params.n} runs; label {params.n} runs or set n (and k) to {len(runs)}")
    capabilities = sorted({c for run in runs for c in run})
    out = []
    for c in capabilities:
        per_run = [run_metrics(run.get(c, {}), passed) for run in runs]
        runs_passed = sum(1 for m in per_run if passes(m, params))
        covs, deltas = [m["cov"] for m in per_run], [m["delta"] for m in per_run]
        mean_delta = mean(deltas)
        out.append({
            "name": c,
            "runs": len(per_run),
            "runs_passed": runs_passed,
            "passes_consistency": runs_passed >= params.k,
            "mean_cov": float(mean(covs)), "std_cov": float(pstdev(covs)),
            "mean_delta": float(mean_delta), "std_delta": float(pstdev(deltas)),
            "exact_mean_delta": mean_delta,
            "per_run": per_run,
        })
    out.sort(key=lambda s: (not s["passes_consistency"], -s["exact_mean_delta"], s["name"]))
    return out
