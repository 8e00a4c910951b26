"""Aggregation, exactly as TRACE defines it.

For each labelling run r and capability c, with LF / PF / LP / PP the counts of
LACKING-failed, PRESENT-failed, LACKING-passed and PRESENT-passed trajectories:

    Cov_r   = LF / |failed|
    ER-     = LF / (LF + PF)      ER+ = LP / (LP + PP)      (a zero denominator gives 0)
    Delta_r = ER- - ER+

c passes run r when Cov_r >= rho and Delta_r >= delta; c is selected when it passes in at
least K of the N runs; selected capabilities are ranked by mean Delta.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import mean, pstdev
from typing import Any

LABELS = ("NA", "PRESENT", "LACKING")


@dataclass(frozen=True)
class Params:
    rho: float = 0.10
    delta: float = 0.20
    k: int = 8
    n: int = 10

    def __post_init__(self) -> None:
        from trace_gym.config import require

        require(self, "rho", 0.0 <= self.rho <= 1.0, "must be in [0, 1]")
        require(self, "delta", -1.0 <= self.delta <= 1.0, "must be in [-1, 1]")
        require(self, "n", isinstance(self.n, int) and self.n >= 1, "must be an integer >= 1")
        require(self, "k", isinstance(self.k, int) and 1 <= self.k <= self.n, f"must be an integer in 1..n={self.n}")


def _ratio(a: int, b: int) -> float:
    return a / b if b else 0.0


def run_metrics(labels: dict[str, str], passed: dict[str, bool]) -> dict[str, float]:
    """Cov, ER-, ER+ and Delta of one capability in one run. `labels`: trajectory id ->
    NA / PRESENT / LACKING; `passed`: trajectory id -> passed."""
    lf = sum(1 for t, lab in labels.items() if lab == "LACKING" and not passed[t])
    pf = sum(1 for t, lab in labels.items() if lab == "PRESENT" and not passed[t])
    lp = sum(1 for t, lab in labels.items() if lab == "LACKING" and passed[t])
    pp = sum(1 for t, lab in labels.items() if lab == "PRESENT" and passed[t])
    failed = sum(1 for ok in passed.values() if not ok)
    er_minus, er_plus = _ratio(lf, lf + pf), _ratio(lp, lp + pp)
    return {"cov": _ratio(lf, failed), "er_minus": er_minus, "er_plus": er_plus, "delta": er_minus - er_plus,
            "LF": lf, "PF": pf, "LP": lp, "PP": pp}


def aggregate(runs: list[dict[str, dict[str, str]]], passed: dict[str, bool], params: Params = Params()) -> list[dict[str, Any]]:
    """One summary per capability, selected ones first by mean Delta. `runs`: per run,
    capability -> (trajectory id -> label)."""
    capabilities = sorted({c for run in runs for c in run})
    out = []
    for c in capabilities:
        per_run = [run_metrics(run.get(c, {}), passed) for run in runs]
        passes = sum(1 for m in per_run if m["cov"] >= params.rho and m["delta"] >= params.delta)
        covs, deltas = [m["cov"] for m in per_run], [m["delta"] for m in per_run]
        out.append({
            "name": c,
            "runs": len(per_run),
            "runs_passed": passes,
            "passes_consistency": passes >= params.k,
            "mean_cov": mean(covs) if covs else 0.0, "std_cov": pstdev(covs) if covs else 0.0,
            "mean_delta": mean(deltas) if deltas else 0.0, "std_delta": pstdev(deltas) if deltas else 0.0,
            "per_run": per_run,
        })
    out.sort(key=lambda s: (not s["passes_consistency"], -s["mean_delta"], s["name"]))
    return out
