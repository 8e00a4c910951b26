"""`trace-gym view`: one trajectory record of a JSON Lines file, shown as `play` shows an episode."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trace_gym.cli.common import NON_NEGATIVE

NAME = "view"
HELP = "show a trajectory record of a JSON Lines file (a rollout's, eval's or an import's)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("file", help="a JSON Lines file of trajectory records")
    p.add_argument("--index", type=NON_NEGATIVE, default=0, help="which record, counted from 0 (default 0)")
    p.add_argument("--json", action="store_true", help="print the record as one JSON line")


def run(args: argparse.Namespace) -> int:
    """Print the record."""
    from trace_gym.cli.common import print_record
    from trace_gym.errors import InvalidConfig
    from trace_gym.rollout import read_records
    from trace_gym.trajectory import record_problem

    path = Path(args.file)
    if not path.is_file():
        raise InvalidConfig(f"no such file: {path}")
    records = read_records(path)
    if args.index >= len(records):
        raise InvalidConfig(f"{path} holds {len(records)} record(s); --index {args.index} is past the last")
    record = records[args.index]
    problem = record_problem(record)
    if problem:
        raise InvalidConfig(f"{path}: record {args.index} is not a trajectory record: {problem}")
    if args.json:
        print(json.dumps(record))
        return 0
    print_record(record, f"seed {record.get('seed')}  sample {record.get('sample')}  policy {record.get('policy')}  "
                 f"({args.index + 1} of {len(records)} in {path.name})")
    return 0
