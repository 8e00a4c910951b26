"""`trace-gym info`: an env's knobs (with their defaults), its tools and its reward."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

NAME = "info"
HELP = "show an env's knobs and their defaults, its tools and how it rewards"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("env_id", help="environment id, e.g. trace/precondition_verification-v0")
    p.add_argument("--json", action="store_true", help="print the same as one JSON object")


def describe(env_id: str) -> dict[str, Any]:
    """What `info` shows: the registry's entry and, for an env that runs in this process, its
    knobs (config fields, type and default), tools (name, kind, description) and the reward
    paragraph of its module's docstring. Generated code that is not shipped is not imported:
    its entry says where the module is, to audit."""
    import dataclasses
    import inspect

    import gymnasium as gym

    from trace_gym.env import TraceEnv
    from trace_gym.errors import TraceGymError
    from trace_gym.registry import entry

    e = entry(env_id)
    out: dict[str, Any] = {"entry": e.to_json()}
    if not e.trusted:
        out["note"] = "generated code runs only in its sandbox: `trace-gym audit` it to see what it does"
        return out
    env = gym.make(e.id).unwrapped
    try:
        if not isinstance(env, TraceEnv):  # every env the registry trusts is one
            raise TraceGymError(f"{env_id}: {type(env).__name__} is not a trace-gym env")
        config = getattr(env, "config", None)  # the knobs' dataclass (TraceEnv does not declare one)
        out["knobs"] = [{"name": f.name, "type": str(f.type), "default": getattr(config, f.name)}
                        for f in dataclasses.fields(config)] if dataclasses.is_dataclass(config) else []
        tools = [env.toolset[name] for name in env.toolset]
        out["tools"] = [{"name": t.name, "kind": t.kind.name.lower(),
                         "description": t.schema["function"].get("description", "")} for t in tools]
        doc = inspect.getmodule(type(env)).__doc__ or ""
        out["reward"] = " ".join(" ".join(p.split()) for p in doc.split("\n\n") if re.match(r"\**Reward", p.strip()))
    finally:
        env.close()
    return out


def run(args: argparse.Namespace) -> int:
    """Print the env's description."""
    info = describe(args.env_id)
    if args.json:
        print(json.dumps(info, default=str))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    e = info["entry"]
    console.print(f"[bold]{e['id']}[/bold]  {e['kind']} env{' for ' + e['capability'] if e.get('capability') else ''}"
                  f", {e['origin']}")
    console.print(e["description"])
    if "note" in info:
        console.print(info["note"])
        return 0
    knobs = Table(title="knobs (gym.make keyword arguments)")
    for col in ("knob", "type", "default"):
        knobs.add_column(col, overflow="fold")
    for k in info["knobs"]:
        knobs.add_row(k["name"], k["type"], repr(k["default"]))
    console.print(knobs)
    tools = Table(title="tools")
    for col in ("tool", "kind", "description"):
        tools.add_column(col, overflow="fold")
    for t in info["tools"]:
        tools.add_row(t["name"], t["kind"], t["description"])
    console.print(tools)
    if info["reward"]:
        console.print(info["reward"])
    return 0
