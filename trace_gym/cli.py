"""The `trace-gym` command line.

    trace-gym list [--json]
    trace-gym play ENV_ID --seed N [--policy oracle|random] [--hint] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from trace_gym.errors import TraceGymError


def _cmd_list(args: argparse.Namespace) -> int:
    from trace_gym.registry import list_envs

    envs = list_envs()
    if args.json:
        print(json.dumps([e.to_json() for e in envs], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="trace-gym environments")
    for col in ("id", "kind", "capability", "origin", "description"):
        table.add_column(col)
    for e in envs:
        table.add_row(e.id, e.kind, e.capability or "-", e.origin, e.description)
    Console().print(table)
    return 0


def _cmd_play(args: argparse.Namespace) -> int:
    from trace_gym.agents import make_policy
    from trace_gym.registry import entry, make
    from trace_gym.trajectory import run_episode

    env_id = entry(args.env_id).id
    policy = make_policy(args.policy, **({"seed": args.seed} if args.policy == "random" else {}))
    env = make(env_id)
    record = run_episode(env, policy, env_id=env_id, seed=args.seed, hint=args.hint)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trace-gym", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the registered environments")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_cmd_list)

    p = sub.add_parser("play", help="play one episode and print the transcript and verdict")
    p.add_argument("env_id", help="environment id, e.g. trace/airline-v0")
    p.add_argument("--seed", type=int, required=True, help="episode seed")
    p.add_argument("--policy", default="oracle", choices=["oracle", "random"], help="who plays")
    p.add_argument("--hint", action="store_true", help="add the expert guidance to the system prompt")
    p.add_argument("--json", action="store_true", help="print the trajectory record as one JSON line")
    p.set_defaults(run=_cmd_play)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except TraceGymError as exc:
        print(f"trace-gym: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
