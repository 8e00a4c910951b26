"""`trace-gym eval`: roll out, then the pass rate, pass^k and mean reward of the episodes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trace_gym.cli.common import COUNT, add_policy_flags, add_rollout_flags, run_rollout

NAME = "eval"
HELP = "roll out and report pass rate, pass^k, mean reward"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    add_rollout_flags(p, split="test")
    p.add_argument("--trials", type=COUNT, default=1, help="episodes per seed (for pass^k)")
    p.add_argument("--out", help="where the trajectories go (default: runs/eval/...-<run fingerprint>.jsonl)")
    p.add_argument("--json", action="store_true", help="print the metrics as JSON")
    add_policy_flags(p)


def run(args: argparse.Namespace) -> int:
    """Roll out (resuming a file of the same run) and print the metrics."""
    from trace_gym.evaluation import evaluate
    from trace_gym.registry import entry
    from trace_gym.rollout import read_records
    from trace_gym.seeding import parse_seed_range, seeds

    default = (f"runs/eval/{args.env_id.replace('/', '_')}-{args.policy}-{args.split}-"
               f"{args.seeds.replace(':', '_')}-k{args.trials}")
    out = run_rollout(args, Path(args.out) if args.out else None, args.trials, default)
    wanted = {int(s) for s in seeds(args.split, *parse_seed_range(args.seeds))}
    env_id = entry(args.env_id).id
    records = [r for r in read_records(out)
               if r["env_id"] == env_id and r["seed"] in wanted and r["sample"] < args.trials]
    metrics = evaluate(records, args.trials)
    if args.json:
        print(json.dumps(metrics))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    lo, hi = metrics["pass_rate_ci95"]
    console.print(f"[bold]{env_id}[/bold]  {metrics['tasks']} tasks x {args.trials} trials  policy {args.policy}  "
                  f"({out})")
    console.print(f"pass rate {metrics['pass_rate']:.3f} (95% CI {lo:.3f}-{hi:.3f})  mean reward "
                  f"{metrics['mean_reward']:.3f}  "
                  + "  ".join(f"pass^{k} {v:.3f}" for k, v in metrics["pass_hat_k"].items()))
    for title, key in (("by task kind", "by_task_kind"), ("by capability needed", "by_capability")):
        table = Table(title=title)
        for col in ("", "episodes", "pass rate", "mean reward"):
            table.add_column(col)
        for name, m in metrics[key].items():
            table.add_row(name, str(m["episodes"]), f"{m['pass_rate']:.3f}", f"{m['mean_reward']:.3f}")
        console.print(table)
    return 0
