"""Evaluation metrics over trajectory records.

- pass rate: share of episodes that passed (reward 1);
- pass^k (tau-bench's definition): for a task tried n times with c passes,
  C(c, k) / C(n, k), averaged over tasks: the chance that k fresh trials all pass;
- mean reward, and a 95% bootstrap interval of the pass rate (tasks resampled, 1,000 times,
  from a fixed seed);
- the same broken down by task kind and by needed capability.
"""

from __future__ import annotations

import math
from collections import defaultdict
from math import comb
from typing import Any

import numpy as np


def pass_hat_k(trials: list[list[bool]], k: int) -> float:
    """tau-bench's pass^k over tasks, each a list of trial outcomes (n >= k)."""
    values = [comb(sum(t), k) / comb(len(t), k) for t in trials if len(t) >= k]
    return float(np.mean(values)) if values else float("nan")


def bootstrap_interval(values: list[float], resamples: int = 1000, seed: int = 0) -> tuple[float, float]:
    """The 95% bootstrap interval of the mean of `values` (percentiles of `resamples`
    resampled means, from a fixed seed); NaNs when there are no values."""
    if not values:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    data = np.asarray(values, dtype=float)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def wilson_interval(rate: float, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of a pass rate `rate` over `n` independent tasks; NaNs
    when n is 0. Unlike a percentile bootstrap it is not of zero width at 0 or 1: 20 passes
    of 20 give (0.839, 1.0)."""
    if n <= 0:
        return (float("nan"), float("nan"))
    centre = (rate + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(rate * (1 - rate) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def paired(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The records of the same episode (env, seed, sample) in both lists, as (before, after)
    pairs in `before`'s order: two policies on the same tasks."""
    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return r.get("env_id"), r["seed"], r.get("sample", 0)

    later = {key(r): r for r in after}
    return [(r, later[key(r)]) for r in before if key(r) in later]


def paired_difference(pairs: list[tuple[dict[str, Any], dict[str, Any]]], key: str = "passed") -> dict[str, Any]:
    """after - before of `key` over the pairs (`paired`): the mean difference, its 95%
    bootstrap interval (each pair's two outcomes resampled together) and the number of pairs."""
    diffs = [float(a[key]) - float(b[key]) for b, a in pairs]
    return {"difference": sum(diffs) / len(diffs) if diffs else float("nan"), "ci95": bootstrap_interval(diffs),
            "seeds": len(diffs)}


def _summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {"episodes": len(records),
            "pass_rate": float(np.mean([r["passed"] for r in records])) if records else float("nan"),
            "mean_reward": float(np.mean([r["reward"] for r in records])) if records else float("nan")}


def evaluate(records: list[dict[str, Any]], max_k: int | None = None) -> dict[str, Any]:
    """The evaluation of trajectory records: pass rate, mean reward, the number of tasks
    (env, seed), the pass rate's 95% Wilson interval over tasks (each task's mean over its
    trials counted as one observation, so that trials of one task are not taken for
    independent tasks), pass^k for k up to the
    fewest trials of a task (or `max_k`), and the same summary by task kind and by needed
    capability."""
    by_task: dict[tuple[str, Any], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_task[(r["env_id"], r["seed"])].append(r)
    trials = [[r["passed"] for r in sorted(rs, key=lambda r: r["sample"])] for rs in by_task.values()]
    n_min = min((len(t) for t in trials), default=0)
    max_k = min(max_k or n_min, n_min)
    task_rates = [float(np.mean(t)) for t in trials]
    low, high = wilson_interval(float(np.mean(task_rates)) if task_rates else 0.0, len(task_rates))
    result = {
        **_summary(records),
        "tasks": len(by_task),
        "pass_rate_ci95": [low, high],
        "pass_hat_k": {str(k): pass_hat_k(trials, k) for k in range(1, max_k + 1)},
        "by_task_kind": {},
        "by_capability": {},
    }
    kinds: dict[str, list] = defaultdict(list)
    caps: dict[str, list] = defaultdict(list)
    for r in records:
        kinds[r.get("task_kind") or "unknown"].append(r)
        for c in r.get("capabilities_needed") or []:
            caps[c].append(r)
    result["by_task_kind"] = {k: _summary(v) for k, v in sorted(kinds.items())}
    result["by_capability"] = {k: _summary(v) for k, v in sorted(caps.items())}
    return result
