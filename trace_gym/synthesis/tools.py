"""The target's tool schemas, taken from the trajectories: a registered trace-gym env gives
its own; tau2-bench's airline and retail give their domain records' (`trace_gym.worlds.DOMAINS`,
the same schemas); any other target's are inferred from the calls its agent made (names,
argument names, JSON types; an argument every call passed is required)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from trace_gym.jsondata import loads
from trace_gym.schema import function

_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _schema_of(values: list[Any]) -> dict[str, Any]:
    kinds = {_TYPES.get(type(v), "string") for v in values}
    kind = kinds.pop() if len(kinds) == 1 else "string"
    if kind == "array":
        items = [i for v in values for i in v]
        return {"description": "", "items": _schema_of(items) if items else {"type": "string"}, "type": "array"}
    if kind == "object":
        return {"description": "", "type": "object"}
    return {"description": "", "type": kind}


def inferred_tools(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas inferred from the calls the trajectories' agent made: names, argument
    names and JSON types; an argument every call passed is required."""
    calls: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        for m in r["messages"]:
            for tc in m.get("tool_calls") or []:
                try:
                    args = loads(tc["function"]["arguments"])
                except ValueError:
                    continue
                if isinstance(args, dict) and tc["function"]["name"] != "invalid_tool_call":
                    calls[tc["function"]["name"]].append(args)
    tools = []
    for name, seen in sorted(calls.items()):
        keys = sorted({k for a in seen for k in a})
        props = {k: _schema_of([a[k] for a in seen if k in a]) for k in keys}
        required = [k for k in keys if all(k in a for a in seen)]
        tools.append(function(name, f"{name} (inferred from the target's trajectories)", props, required))
    return tools


def target_tools(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The target's tool schemas, one per name, for trajectories of any mix of envs: a
    domain record's tools for its tau2-bench env id (`Domain.tau2_env_id`), a registered
    env's own, else inferred from the calls; with no trajectories, every domain's tools."""
    import gymnasium as gym

    import trace_gym  # noqa: F401
    from trace_gym.worlds import DOMAINS

    domains = {d.tau2_env_id: d.tools for d in DOMAINS.values()}
    out: dict[str, dict[str, Any]] = {}
    unknown = []
    for env_id in sorted({r["env_id"] for r in records}):
        if env_id in domains:
            schemas = domains[env_id].schemas
        elif env_id in gym.registry:
            schemas = gym.make(env_id).reset(seed=0)[1]["tools"]
        else:
            unknown.append(env_id)
            continue
        for s in schemas:
            out.setdefault(s["function"]["name"], s)
    for s in inferred_tools([r for r in records if r["env_id"] in unknown]):
        out.setdefault(s["function"]["name"], s)
    if not out:  # no trajectories: the built-in target domains
        for d in DOMAINS.values():
            for s in d.tools.schemas:
                out.setdefault(s["function"]["name"], s)
    return list(out.values())
