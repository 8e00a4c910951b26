"""`trace-gym import-swebench`: SWE-agent trajectories and OpenHands SWE-bench output, graded
by the SWE-bench harness's report, as trajectory records."""

from __future__ import annotations

import argparse
import sys

NAME = "import-swebench"
HELP = "convert SWE-agent .traj files or OpenHands output.jsonl (SWE-bench runs) into trajectory records"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("files", nargs="+", metavar="FILES",
                   help="SWE-agent .traj files, directories of them, or OpenHands output.jsonl files")
    p.add_argument("--report", required=True,
                   help="the SWE-bench harness's report: a run summary (resolved_ids, unresolved_ids), a "
                        "report.json ({instance_id: {resolved, tests_status}}), or a directory of report.json files")
    p.add_argument("--dataset", help="SWE-bench dataset JSONL (instance_id, patch): the gold patches, for the "
                                     "`localized` check where the source does not carry them")
    p.add_argument("--out", required=True, help="JSON Lines file to write (replaced whole, atomically)")
    p.add_argument("--skip-missing", action="store_true",
                   help="leave out instances the report does not grade (by default they are refused)")


def run(args: argparse.Namespace) -> int:
    """Write every run's record to --out."""
    from trace_gym.cli.common import out_file
    from trace_gym.swebench import import_runs, write_records

    out_file(args.out)  # before the import's work
    imported = import_runs(args.files, args.report, dataset=args.dataset, skip_missing=args.skip_missing)
    out = write_records(args.out, imported.records)
    solved = sum(r["passed"] for r in imported.records)
    print(f"{len(imported.records)} trajectory record(s) written to {out} ({solved} resolved, "
          f"{len(imported.records) - solved} not)", file=sys.stderr)
    if imported.skipped:
        shown = ", ".join(imported.skipped[:5]) + (" ..." if len(imported.skipped) > 5 else "")
        print(f"{len(imported.skipped)} instance(s) the report does not grade left out: {shown}", file=sys.stderr)
    return 0
