"""Step 1 inputs: trajectory records from trace-gym rollouts (JSON Lines) or tau2-bench
results (a results file or directory), split into passed and failed, and compact summaries
of them for an analyst's context window."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym.errors import TraceGymError


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


@dataclass(frozen=True)
class SummaryLimits:
    content: int = 300
    """Characters kept of each message's text."""
    arguments: int = 200
    """Characters kept of each tool call's arguments."""
    tool_output: int = 300
    """Characters kept of each tool result."""
    instructions: int = 600
    """Characters kept of the task's instructions."""


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f"...[{len(text) - n} more]"


def summarize(record: dict[str, Any], limits: SummaryLimits = SummaryLimits()) -> str:
    """A compact text view of one trajectory: what the analyst needs, nothing more."""
    verdict = record.get("verdict") or {}
    failing = [c["name"] for c in verdict.get("checks", []) if not c.get("passed")]
    lines = [
        f"### {record['id']}  ({'PASSED' if record['passed'] else 'FAILED'}, reward {record['reward']:.2f}, "
        f"ended by {record.get('termination_reason')})",
        f"Task: {_cut(record.get('instructions') or '', limits.instructions)}",
    ]
    if failing:
        lines.append("Failed checks: " + ", ".join(failing))
    for m in record["messages"]:
        role = m["role"]
        if role == "system":
            continue
        if role == "tool":
            lines.append(f"TOOL: {_cut(m.get('content') or '', limits.tool_output)}")
            continue
        if m.get("content"):
            lines.append(f"{role.upper()}: {_cut(m['content'], limits.content)}")
        for tc in m.get("tool_calls") or []:
            fn = tc["function"]
            lines.append(f"CALL: {fn['name']}({_cut(fn['arguments'], limits.arguments)})")
    return "\n".join(lines)


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
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
