"""The target's tool schemas, taken from the trajectories: a registered trace-gym env gives
its own; tau2-bench's airline and retail give the worlds' (the same schemas); any other
target's are inferred from the calls its agent made (names, argument names, JSON types;
an argument every call passed is required)."""

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
    import gymnasium as gym

    import trace_gym  # noqa: F401
    from trace_gym.worlds import airline, retail

    domains = {"tau2/airline": airline.TOOLS, "tau2/retail": retail.TOOLS}
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
        for s in (*airline.TOOLS.schemas, *retail.TOOLS.schemas):
            out.setdefault(s["function"]["name"], s)
    return list(out.values())
