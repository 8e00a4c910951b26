"""Trajectory records: one JSON object per episode, the format every step reads.

Fields (DESIGN §3): schema_version, id (`env/split/seed/sample`), env_id, env_sha256, seed,
sample, split, policy, messages, reward, passed (reward >= 1 - 1e-9), verdict, task_kind,
capabilities_needed, termination_reason, instructions, timings (seconds: reset, steps,
total). `trace-gym play --json` prints exactly one.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from trace_gym.agents.base import Policy
from trace_gym.seeding import split_of
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
    return reward >= 1.0 - 1e-9


def run_episode(env: gym.Env, policy: Policy, *, env_id: str, seed: int, sample: int = 0,
                hint: bool = False) -> dict[str, Any]:
    """Play one episode and return its trajectory record."""
    start = time.perf_counter()
    obs, info = env.reset(seed=seed, options={"hint": True} if hint else None)
    policy.bind(env, seed, sample)
    tools = info["tools"]
    reset_s = time.perf_counter() - start
    reward, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policy.act(obs, tools))
        done = terminated or truncated
    total = time.perf_counter() - start
    return make_record(env, env_id=env_id, seed=seed, sample=sample, policy=policy.name, hint=hint,
                       messages=obs, reward=reward, info=info,
                       timings={"reset_s": round(reset_s, 6), "steps_s": round(total - reset_s, 6),
                                "total_s": round(total, 6)})


def make_record(env: gym.Env, *, env_id: str, seed: int, sample: int, policy: str, hint: bool,
                messages: list[dict[str, Any]], reward: float, info: dict[str, Any],
                timings: dict[str, float]) -> dict[str, Any]:
    """The trajectory record of a finished episode."""
    base = env.unwrapped
    task = base.task
    return {
        "schema_version": SCHEMA_VERSION,
        "id": f"{env_id}/{split_of(seed)}/{seed}/{sample}",
        "env_id": env_id,
        "env_sha256": base.code_sha256(),
        "seed": seed,
        "sample": sample,
        "split": split_of(seed),
        "policy": policy,
        "hint": hint,
        "messages": messages,
        "reward": float(reward),
        "passed": passed(reward),
        "verdict": info.get("verdict"),
        "task_kind": task.kind,
        "capabilities_needed": list(task.capabilities_needed),
        "termination_reason": info.get("termination_reason"),
        "instructions": task.instructions,
        "timings": timings,
    }


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
