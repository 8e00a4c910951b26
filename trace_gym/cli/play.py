"""`trace-gym play`: one episode, its transcript and its verdict."""

from __future__ import annotations

import argparse
import json

from trace_gym.cli.common import NON_NEGATIVE

NAME = "play"
HELP = "play one episode and print the transcript and verdict"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("env_id", help="environment id, e.g. trace/airline-v0")
    p.add_argument("--seed", type=NON_NEGATIVE, required=True, help="episode seed")
    p.add_argument("--policy", default="oracle", choices=["oracle", "random"], help="who plays")
    p.add_argument("--hint", action="store_true", help="add the expert guidance to the system prompt")
    p.add_argument("--json", action="store_true", help="print the trajectory record as one JSON line")


def run(args: argparse.Namespace) -> int:
    """Play the episode and print it."""
    from trace_gym.agents import make_policy
    from trace_gym.driver import Episode, play
    from trace_gym.registry import entry, make

    env_id = entry(args.env_id).id
    policy = make_policy(args.policy, **({"seed": args.seed} if args.policy == "random" else {}))
    (played,) = play([Episode(args.seed, hint=args.hint)], policy, env_id=env_id, make_env=make)
    record = played.record()
    if args.json:
        print(json.dumps(record))
        return 0
    from rich.console import Console
    from rich.table import Table

    from trace_gym.render import render_human

    console = Console()
    console.print(f"[bold]{env_id}[/bold]  seed {args.seed}  policy {args.policy}  "
                  f"task {record['task_kind']}  needs {', '.join(record['capabilities_needed']) or '-'}")
    render_human(record["messages"])
    table = Table(title=f"reward {record['reward']:.2f} ({record['termination_reason']})")
    for col in ("check", "passed", "credit", "detail"):
        table.add_column(col)
    for check in (record["verdict"] or {}).get("checks", []):
        table.add_row(check["name"], "yes" if check["passed"] else "no", f"{check['credit']:.2f}",
                      check.get("detail", ""))
    console.print(table)
    return 0
