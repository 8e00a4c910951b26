"""`trace-gym import-tau2`: tau2-bench results files as trajectory records."""

from __future__ import annotations

import argparse
import sys

NAME = "import-tau2"
HELP = "convert tau2-bench results files into trajectory records"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("results", nargs="+", help="results.json files or results directories")
    p.add_argument("--out", required=True, help="JSON Lines file to append to")


def run(args: argparse.Namespace) -> int:
    """Append the records --out lacks."""
    from trace_gym.rollout import append_record, read_records
    from trace_gym.tau2 import import_results

    from trace_gym.cli.common import out_file

    out = out_file(args.out)
    done = {r["id"] for r in read_records(out, repair=True)}
    written = 0
    for path in args.results:
        for record in import_results(path):
            if record["id"] not in done:
                append_record(out, record)
                done.add(record["id"])
                written += 1
    print(f"{written} trajectory record(s) written to {out}", file=sys.stderr)
    return 0
