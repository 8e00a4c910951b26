"""`trace-gym calibrate`: whether an env's difficulty sits in the bands for a base policy."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from trace_gym.cli.common import COUNT, add_band_flags, add_policy_flags, add_rollout_flags, bands, run_rollout

NAME = "calibrate"
HELP = "check an env's difficulty bands for a base policy"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags (the bands' from `Bands`)."""
    add_rollout_flags(p, split="train", seeds="0:100", workers_default=max(1, os.cpu_count() or 1))
    p.add_argument("--samples", type=COUNT, default=16, help="samples per seed (a GRPO group)")
    p.add_argument("--out", help="trajectory file (default: runs/calibration/...-<run fingerprint>.jsonl)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_policy_flags(p, temperature=1.0)  # the trainer's rollout temperature
    add_band_flags(p)


def run(args: argparse.Namespace) -> int:
    """Roll out, measure, print; exit 1 when the env is not calibrated."""
    from trace_gym.calibration import calibrate
    from trace_gym.rollout import read_records
    from trace_gym.seeding import parse_seed_range, seeds

    chosen = bands(args)
    tag = f"-{Path(args.config).stem}" if args.config else ""
    default = f"runs/calibration/{args.env_id.replace('/', '_')}-{args.policy}{tag}"
    out = run_rollout(args, Path(args.out) if args.out else None, args.samples, default)
    wanted = set(seeds(args.split, *parse_seed_range(args.seeds)))
    records = [r for r in read_records(out) if r["seed"] in wanted and r["sample"] < args.samples]
    result = calibrate(records, chosen)
    if args.json:
        print(json.dumps(result))
    else:
        verdict = "calibrated" if result["calibrated"] else "NOT calibrated"
        print(f"{args.env_id}: {verdict}  mean reward {result['mean_reward']:.3f}  success {result['success_rate']:.3f}  "
              f"std {result['reward_std']:.3f}  all-success groups {result['all_success_groups']:.2f}  all-zero "
              f"{result['all_zero_groups']:.2f}  constant {result['constant_groups']:.2f}  "
              + "  ".join(f"pass@{k} {v:.3f}" for k, v in result["pass_at_k"].items()))
        for problem in result["problems"]:
            print(f"  - {problem}")
    return 0 if result["calibrated"] else 1
