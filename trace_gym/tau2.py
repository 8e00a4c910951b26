"""Import tau2-bench results into trace-gym trajectory records.

tau2 writes results in two formats: one JSON file (`timestamp, info, tasks, simulations,
simulation_index`), or a directory with `results.json` (metadata, tasks, index) and one file
per simulation in `simulations/`. Either becomes one record per simulation, with the same
fields as a trace-gym rollout:

- id `tau2/<domain>/<task_id>/<trial>`, env_id `tau2/<domain>`, seed, sample (the trial),
  split "tau2", policy (the agent's implementation and model);
- messages in the OpenAI wire format (tool-call arguments as JSON strings, tool messages
  answering by `tool_call_id`);
- reward, passed (reward 1), and a verdict whose checks come from tau2's reward_info (the
  database check, each action, communicate and natural-language check), with the raw
  reward_info kept under `verdict.source`;
- termination_reason, instructions (the task's purpose and the user's scenario), timings.

tau2 records no task kind or needed capabilities: those fields are "tau2" and [].
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trace_gym.errors import TraceGymError
from trace_gym.jsondata import loads
from trace_gym.trajectory import SCHEMA_VERSION, passed
from trace_gym.worlds import DOMAINS


def _load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metadata, simulations) of a results file or results directory."""
    meta_path = path / "results.json" if path.is_dir() else path
    sims_dir = meta_path.parent / "simulations"
    try:
        meta = loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TraceGymError(f"{meta_path}: cannot read a tau2 results file ({exc})") from None
    if not isinstance(meta, dict) or "tasks" not in meta or "info" not in meta:
        raise TraceGymError(f"{meta_path}: not a tau2 results file (expected 'info' and 'tasks')")
    sims = meta.get("simulations") or []
    if not sims and sims_dir.is_dir():
        sims = []
        for f in sorted(sims_dir.glob("*.json")):
            try:
                sims.append(loads(f.read_text(encoding="utf-8")))
            except ValueError as exc:
                raise TraceGymError(f"{f}: not valid JSON ({exc})") from None
        index = meta.get("simulation_index")
        if index is not None and {e["id"] for e in index} != {s["id"] for s in sims}:
            raise TraceGymError(f"{sims_dir}: the simulation files do not match the index in {meta_path}")
    return meta, sims


def _domain(meta: dict[str, Any]) -> str:
    env = meta["info"].get("environment_info") or {}
    domain = env.get("domain_name") or env.get("domain")
    if not domain:
        for task in meta["tasks"]:
            domain = ((task.get("user_scenario") or {}).get("instructions") or {}).get("domain")
            if domain:
                break
    return domain or "unknown"


def _messages(sim: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in sim.get("messages") or []:
        role = m.get("role")
        if role == "assistant":
            msg: dict[str, Any] = {"role": "assistant", "content": m.get("content")}
            calls = m.get("tool_calls") or []
            if calls:
                msg["tool_calls"] = [{
                    "id": c["id"], "type": "function",
                    "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments") or {})},
                } for c in calls]
            elif msg["content"] is None:
                msg["content"] = ""
            out.append(msg)
        elif role == "user":
            out.append({"role": "user", "content": m.get("content") or ""})
        elif role == "tool":
            out.append({"role": "tool", "tool_call_id": m.get("id", ""), "content": m.get("content") or ""})
    return out


def _verdict(reward_info: dict[str, Any] | None, reward: float) -> dict[str, Any]:
    info = reward_info or {}
    checks = []
    db = info.get("db_check")
    if db:
        checks.append({"name": "database", "passed": bool(db.get("db_match")),
                       "credit": float(db.get("db_reward", 0.0)), "detail": ""})
    for a in info.get("action_checks") or []:
        action = a.get("action", {})
        checks.append({"name": f"action:{action.get('name')}", "passed": bool(a.get("action_match")),
                       "credit": float(a.get("action_reward", 0.0)), "detail": json.dumps(action.get("arguments"))})
    for c in info.get("communicate_checks") or []:
        checks.append({"name": f"communicate:{c.get('info')}", "passed": bool(c.get("met")),
                       "credit": 1.0 if c.get("met") else 0.0, "detail": c.get("justification") or ""})
    for n in info.get("nl_assertions") or []:
        checks.append({"name": f"nl:{n.get('nl_assertion')}", "passed": bool(n.get("met")),
                       "credit": 1.0 if n.get("met") else 0.0, "detail": n.get("justification") or ""})
    return {"score": reward, "checks": checks, "source": info}


def _instructions(task: dict[str, Any] | None) -> str:
    if not task:
        return ""
    parts = []
    purpose = (task.get("description") or {}).get("purpose")
    if purpose:
        parts.append(f"Purpose: {purpose}")
    instr = (task.get("user_scenario") or {}).get("instructions")
    if isinstance(instr, dict):
        for key in ("reason_for_call", "known_info", "unknown_info", "task_instructions"):
            if instr.get(key):
                parts.append(f"{key.replace('_', ' ').capitalize()}: {instr[key]}")
    elif instr:
        parts.append(str(instr))
    return "\n".join(parts)


def import_results(path: str | Path) -> Iterator[dict[str, Any]]:
    """One trajectory record per simulation of a tau2 results file or directory."""
    meta, sims = _load(Path(path))
    domain = _domain(meta)
    tasks = {str(t["id"]): t for t in meta["tasks"]}
    agent = meta["info"].get("agent_info") or {}
    policy = "/".join(str(x) for x in (agent.get("implementation"), agent.get("llm")) if x) or "unknown"
    for sim in sims:
        reward_info = sim.get("reward_info")
        reward = float((reward_info or {}).get("reward", 0.0) or 0.0)
        task_id, trial = str(sim["task_id"]), int(sim.get("trial", 0))
        yield {
            "schema_version": SCHEMA_VERSION,
            "id": f"tau2/{domain}/{task_id}/{trial}",
            "env_id": DOMAINS[domain].tau2_env_id if domain in DOMAINS else f"tau2/{domain}",
            "env_sha256": None,
            "seed": sim.get("seed"),
            "sample": trial,
            "split": "tau2",
            "policy": policy,
            "hint": False,
            "messages": _messages(sim),
            "reward": reward,
            "passed": passed(reward),
            "verdict": _verdict(reward_info, reward),
            "task_kind": "tau2",
            "capabilities_needed": [],
            "termination_reason": sim.get("termination_reason"),
            "instructions": _instructions(tasks.get(task_id)),
            "timings": {"total_s": sim.get("duration")},
        }
