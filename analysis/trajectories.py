"""Step 1 inputs: trajectory records from trace-gym rollouts (JSON Lines) or tau2-bench
results (a results file or directory), and batches of their compact summaries
(`trace_gym.trajectory.summarize`) that fit an analyst's context window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trace_gym.errors import TraceGymError
from trace_gym.trajectory import SummaryLimits, summarize


def load_records(paths: list[str | Path]) -> list[dict[str, Any]]:
    """Every record of every input, each id once (a later duplicate is an error)."""
    from trace_gym.rollout import read_records
    from trace_gym.tau2 import import_results
    from trace_gym.trajectory import record_problem

    records: list[dict[str, Any]] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise TraceGymError(f"{path}: no such file or directory")
        if path.suffix == ".jsonl":
            batch = read_records(path)
            for number, r in enumerate(batch, 1):
                problem = record_problem(r)
                if problem:
                    raise TraceGymError(f"{path}: record {number} is not a trajectory record: {problem}")
        elif path.is_dir() or path.suffix == ".json":
            batch = list(import_results(path))
        else:
            raise TraceGymError(f"{path}: expected a .jsonl trajectory file or a tau2 results .json/directory")
        for r in batch:
            if r["id"] in seen:
                raise TraceGymError(f"{path}: trajectory id {r['id']!r} appears twice in the inputs")
            seen.add(r["id"])
            records.append(r)
    if not records:
        raise TraceGymError("no trajectories in the inputs")
    return records


def batches(records: list[dict[str, Any]], budget_chars: int, limits: SummaryLimits = SummaryLimits()) -> list[list[dict[str, Any]]]:
    """Records grouped so that each group's summaries fit `budget_chars` (a record too large
    alone gets a group of its own, its summary cut to the budget)."""
    groups: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for r in records:
        n = len(summarize(r, limits))
        if current and size + n > budget_chars:
            groups.append(current)
            current, size = [], 0
        current.append(r)
        size += n
    if current:
        groups.append(current)
    return groups


def stable_json(value: Any) -> str:
    """`value` as compact JSON with sorted keys: the same text for equal values."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
