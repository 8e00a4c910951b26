"""The `trace-gym` command line.

    trace-gym list [--json]
    trace-gym play ENV_ID --seed N [--policy oracle|random] [--hint] [--json]
    trace-gym audit ENV_ID|PATH [--json] [--examples N] [--timeout S] [--no-record]
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


def _cmd_audit(args: argparse.Namespace) -> int:
    from trace_gym.audit import Limits, audit
    from trace_gym.testing import KitSettings

    report = audit(args.target, KitSettings(examples=args.examples),
                   Limits(wall_seconds=args.timeout), record=not args.no_record)
    if args.json:
        print(json.dumps(report.to_json()))
        return 0 if report.passed else 1
    from rich.console import Console
    from rich.table import Table

    console = Console()
    verdict = "[green]PASSED[/green]" if report.passed else "[red]FAILED[/red]"
    console.print(f"audit of [bold]{report.env_id or report.path}[/bold]: {verdict}  "
                  f"(sha256 {report.code_sha256[:12]}, kit v{report.kit_version}, {report.seconds:.1f} s)")
    console.print(f"sandbox: {report.isolation}")
    if report.static:
        table = Table(title="static rules")
        for col in ("line", "rule", "finding"):
            table.add_column(col)
        for f in report.static:
            table.add_row(str(f.line), f.rule, f.message)
        console.print(table)
        console.print("dynamic checks skipped: the code is not run while a static rule refuses it")
    if report.error:
        console.print(f"[red]{report.error}[/red]")
    if report.results:
        table = Table(title="property kit")
        for col in ("property", "result", "detail"):
            table.add_column(col)
        for r in report.results:
            table.add_row(r["name"], "[green]ok[/green]" if r["passed"] else "[red]FAIL[/red]", r["detail"])
        console.print(table)
    if report.recorded:
        console.print("recorded in the audit lock; manifest sha256 up to date")
    return 0 if report.passed else 1


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

    p = sub.add_parser("audit", help="audit a generated env (static rules + sandboxed property kit)")
    p.add_argument("target", help="env id (e.g. trace/precondition_verification-v0) or module path")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--examples", type=int, default=20, help="hypothesis examples per property")
    p.add_argument("--timeout", type=int, default=90, help="wall-clock seconds for the sandboxed run")
    p.add_argument("--no-record", action="store_true", help="do not write the audit lock")
    p.set_defaults(run=_cmd_audit)
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
