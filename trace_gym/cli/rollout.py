"""`trace-gym rollout`: a policy on many seeds, each episode appended as a trajectory record."""

from __future__ import annotations

import argparse
from pathlib import Path

from trace_gym.cli.common import COUNT, add_policy_flags, add_rollout_flags, run_rollout

NAME = "rollout"
HELP = "play a policy on many seeds; append trajectory records"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    add_rollout_flags(p, split="train")
    p.add_argument("--samples", type=COUNT, default=1, help="episodes per seed")
    p.add_argument("--out", required=True, help="JSON Lines file (appended; a rerun with the same settings "
                   "resumes, other settings are refused)")
    add_policy_flags(p)


def run(args: argparse.Namespace) -> int:
    """Roll out into --out."""
    run_rollout(args, Path(args.out), args.samples)
    return 0
