"""`trace-gym export`: an env's tasks as a JSON Lines dataset, one row per seed (the opening
conversation, the tool schemas, the seed, the task as JSON; `trace_gym/schemas/task.schema.json`)."""

from __future__ import annotations

import argparse
import sys

from trace_gym.cli.common import SPLIT_HELP, add_knob_flags
from trace_gym.seeding import SPLITS

NAME = "export"
HELP = "write an env's tasks (prompt, tools, seed, task JSON) to a JSON Lines file, one row per seed"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("env_id", help="environment id, e.g. trace/precondition_verification-v0")
    p.add_argument("--seeds", required=True, help="A:B, indices into the split (seed = split start + index)")
    p.add_argument("--split", default="train", choices=list(SPLITS), help=f"which seeds: {SPLIT_HELP} (default: train)")
    p.add_argument("--hint", action="store_true", help="the prompts with the env's expert guidance")
    add_knob_flags(p)
    p.add_argument("--out", required=True, help="JSON Lines file to write (replaced whole, atomically)")


def run(args: argparse.Namespace) -> int:
    """Write the rows to --out."""
    from trace_gym.cli.common import env_kwargs, out_file
    from trace_gym.interop.tasks import task_rows, write_tasks
    from trace_gym.registry import entry
    from trace_gym.seeding import parse_seed_range, seeds

    out = out_file(args.out)
    env_id = entry(args.env_id).id
    knobs = env_kwargs(args, env_id) or {}
    count = write_tasks(out, task_rows(env_id, seeds(args.split, *parse_seed_range(args.seeds)), hint=args.hint,
                                       **knobs))
    print(f"{count} task(s) of {env_id} written to {out}", file=sys.stderr)
    return 0
