"""Trajectory records: one JSON object per episode, the format every step reads.

Fields (docs/cli.md): schema_version, id (`env/split/seed/sample`), env_id,
env_sha256, seed, sample, split, policy, messages, reward, passed (reward >= 1 - 1e-9),
verdict, task_kind, capabilities_needed, termination_reason, instructions, timings
(seconds: reset, steps, total). `trace-gym play --json` prints exactly one. The episode
driver builds them (`trace_gym.driver.PlayedEpisode.record`); an episode whose env failed also has
`error` (why) and scores 0, with termination_reason "error".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trace_gym.spaces import is_valid_message

SCHEMA_VERSION = 1


def record_problem(record: dict[str, Any]) -> str | None:
    """What keeps a JSON object from being a trajectory record that analysis can read (the
    fields it reads, of their types), or None."""
    missing = [k for k in ("id", "messages", "reward", "passed") if k not in record]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    if not isinstance(record["id"], str):
        return f"id must be a string, got {record['id']!r}"
    if not isinstance(record["passed"], bool):
        return f"passed must be true or false, got {record['passed']!r}"
    if isinstance(record["reward"], bool) or not isinstance(record["reward"], (int, float)):
        return f"reward must be a number, got {record['reward']!r}"
    messages = record["messages"]
    if not isinstance(messages, list):
        return "messages must be a list of chat messages"
    bad = next((i for i, m in enumerate(messages) if not is_valid_message(m)), None)
    if bad is not None:
        return f"messages must be a list of chat messages (message {bad} is not an OpenAI chat message)"
    return None


def passed(reward: float) -> bool:
    """Whether a reward counts as a pass (1, up to rounding)."""
    return reward >= 1.0 - 1e-9


@dataclass(frozen=True)
class SummaryLimits:
    """How much of a trajectory the compact summary keeps, in characters."""

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
