"""`trace-gym audit`: the static rules and the sandboxed property kit on a generated env."""

from __future__ import annotations

import argparse
import dataclasses
import json

from trace_gym.cli.common import COUNT, NON_NEGATIVE
from trace_gym.cli.flags import add_config_flags, config_values

NAME = "audit"
HELP = "audit a generated env (static rules + sandboxed property kit)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags (the kit's from `KitSettings`)."""
    from trace_gym.sandbox.isolation import MODES
    from trace_gym.testing import KitSettings

    p.add_argument("target", help="env id (e.g. trace/precondition_verification-v0) or module path")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    add_config_flags(p.add_argument_group("property kit"), KitSettings, only=("examples",))
    p.add_argument("--timeout", type=COUNT, default=300, help="wall-clock seconds for the whole audit")
    p.add_argument("--no-record", action="store_true", help="do not write the audit lock")
    p.add_argument("--seed-base", type=NON_NEGATIVE, default=None,
                   help="the base the kit draws its seeds from (default: drawn at random; a report names its base)")
    p.add_argument("--isolation", choices=MODES,
                   help="how the env worker is isolated (default: $TRACE_GYM_ISOLATION or bubblewrap; the fallback "
                        "is not a boundary and runs only when named)")
    p.add_argument("--require-isolation", action="store_true",
                   help="fail unless the module ran under bubblewrap, even if the fallback is named")


def run(args: argparse.Namespace) -> int:
    """Audit, print the report; exit 1 when the env fails it."""
    from trace_gym.audit import AUDIT_LIMITS, Progress, audit
    from trace_gym.testing import KitSettings

    settings = KitSettings(**config_values(args, KitSettings, only=("examples",)))  # refused before any line
    progress = None
    if not args.json:  # a line per property as it ends, on stderr: the report stays the output
        from rich.console import Console as Log

        log = Log(stderr=True, highlight=False, soft_wrap=True)  # a path is never cut
        log.print(f"auditing {args.target}: the static rules, then the property kit in a sandboxed worker",
                  style="dim", markup=False)

        def progress(p: Progress) -> None:
            log.print(f"  {p.name}: {'ok' if p.passed else 'FAILED'} ({p.seconds:.1f} s)", style="dim", markup=False)

    report = audit(args.target, settings, dataclasses.replace(AUDIT_LIMITS, wall_seconds=args.timeout), record=not args.no_record,
                   isolation=args.isolation, require_isolation=args.require_isolation, seed_base=args.seed_base,
                   progress=progress)
    if args.json:  # json escapes control characters itself
        print(json.dumps(report.to_json()))
        return 0 if report.passed else 1
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from trace_gym.render import printable

    def plain(text: str) -> str:  # a module's words, shown as written: no markup, no control characters
        return escape(printable(text))

    console = Console()
    verdict = "[green]PASSED[/green]" if report.passed else "[red]FAILED[/red]"
    console.print(f"audit of [bold]{plain(report.env_id or report.path)}[/bold]: {verdict}  "
                  f"(sha256 {report.code_sha256[:12]}, kit v{report.kit_version}, seed base {report.seed_base}, "
                  f"{report.seconds:.1f} s)")
    console.print(f"sandbox: {plain(report.isolation)}", style=None if report.sandboxed else "yellow")
    if report.static:
        table = Table(title="static rules")
        for col in ("line", "rule", "finding"):
            table.add_column(col)
        for f in report.static:
            table.add_row(str(f.line), plain(f.rule), plain(f.message))
        console.print(table)
        console.print("dynamic checks skipped: the code is not run while a static rule refuses it")
    if report.error:
        console.print(plain(report.error), style="red")
    if report.results:
        table = Table(title="property kit")
        for col in ("property", "result", "detail"):
            table.add_column(col)
        for r in report.results:
            table.add_row(plain(r["name"]), "[green]ok[/green]" if r["passed"] else "[red]FAIL[/red]",
                          plain(r["detail"]))
        console.print(table)
    if report.recorded:
        console.print("recorded in the audit lock; manifest sha256 up to date")
    elif not report.passed:
        console.print(f"to play the same seeds again: --seed-base {report.seed_base}")
    return 0 if report.passed else 1
