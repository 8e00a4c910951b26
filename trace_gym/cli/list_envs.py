"""`trace-gym list`: the registered environments."""

from __future__ import annotations

import argparse
import json

NAME = "list"
HELP = "list the registered environments"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def run(args: argparse.Namespace) -> int:
    """Print the registry as a table, or as JSON."""
    from trace_gym.registry import list_envs

    envs = list_envs()
    if args.json:
        print(json.dumps([e.to_json() for e in envs], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="trace-gym environments")
    # ids and the short columns are never cut, on any terminal or pipe: the description wraps
    # (a capability env's capability is its id's name; --json has it apart)
    for col in ("id", "kind", "origin"):
        values = [col, *(str(getattr(e, col) or "-") for e in envs)]
        table.add_column(col, no_wrap=True, min_width=max(map(len, values)))
    table.add_column("description", overflow="fold", min_width=12)
    for e in envs:
        table.add_row(e.id, e.kind, e.origin, e.description)
    Console().print(table)
    return 0
