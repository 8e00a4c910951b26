"""`trace-gym play`: one episode, its transcript and its verdict."""

from __future__ import annotations

import argparse
import json

from trace_gym.cli.common import NON_NEGATIVE, SPLIT_HELP, add_policy_flags, policy_factory
from trace_gym.seeding import SPLITS, seeds

NAME = "play"
HELP = "play one episode and print the transcript and verdict"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("env_id", help="environment id, e.g. trace/airline-v0")
    p.add_argument("--seed", type=NON_NEGATIVE, required=True,
                   help="the episode's index into the split, as every command's --seeds (seed = split start + N)")
    p.add_argument("--split", default="train", choices=list(SPLITS), help=f"which seeds: {SPLIT_HELP} (default: train)")
    p.add_argument("--hint", action="store_true", help="add the expert guidance to the system prompt")
    p.add_argument("--json", action="store_true", help="print the trajectory record as one JSON line")
    add_policy_flags(p, title="who plays (default: the env's oracle)", temperature=0.0)


def run(args: argparse.Namespace) -> int:
    """Play the episode and print it."""
    from trace_gym.driver import EpisodeRequest, play
    from trace_gym.registry import entry, make

    env_id = entry(args.env_id).id
    (seed,) = seeds(args.split, args.seed, args.seed + 1)
    spec = policy_factory(args)
    if args.policy == "random":  # its draws follow the episode's seed
        spec = spec.with_options(seed=seed)
    (played,) = play([EpisodeRequest(seed, hint=args.hint)], spec.make(), env_id=env_id, make_env=make)
    record = played.record()
    if args.json:
        print(json.dumps(record))
        return 0
    from trace_gym.cli.common import print_record

    print_record(record, f"{args.split} seed {args.seed} ({seed})  policy {args.policy}")
    return 0
