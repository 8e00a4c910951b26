"""Capability adapters against the base agent: one adapter per capability env with the CPU
recipe, then base and adapter on the same test seeds.

    python benchmarks/adapters.py [--base DIR] [--envs ENV,...] [--config configs/embedded.toml]
                                  [--seeds 128] [--out runs/bench-adapters]

For each env: `trace-gym train` with the recipe's [train] table and the env's knobs (resumed
when the run directory already holds part of it), then both models play the first `--seeds`
test seeds greedily. Printed per env: the training time, the base agent's and the adapter's
mean reward, the mean paired difference with its 95% paired bootstrap interval (goal: above
0), and the mean credit of each verdict check for both (which behaviour the adapter changed).
It may run for hours; every finished piece is kept in `--out` and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

CAPABILITY_ENVS = ("trace/precondition_verification-v0", "trace/structured_data_reasoning-v0",
                   "trace/multi_step_task_completion-v0", "trace/tool_calling_precision-v0")


def paired_interval(diffs: list[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    import numpy as np

    rng = np.random.default_rng(seed)
    values = np.asarray(diffs)
    means = values[rng.integers(0, len(values), (resamples, len(values)))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def evaluate(model, tokenizer, env_id: str, env_kwargs: dict, seeds: list[int], path: Path) -> list[dict]:
    """Greedy episodes on `seeds`: per seed its reward and checks (cached in `path`)."""
    from trace_gym.agents.episodes import LocalBackend, Request

    if path.is_file():
        return json.loads(path.read_text())
    backend = LocalBackend(model, tokenizer, env_id, env_kwargs, temperature=0.0, top_p=1.0, max_new_tokens=256,
                           batch_episodes=32)
    rows = [{"seed": r.seed, "reward": r.reward, "checks": r.checks} for r in
            backend.play([Request(seed, 0, False, 0) for seed in seeds])]
    from trace_gym.jsondata import write_json_atomic

    write_json_atomic(path, rows)
    return rows


def checks_mean(rows: list[dict]) -> dict[str, float]:
    names = sorted({n for r in rows for n in r["checks"]})
    return {n: sum(r["checks"].get(n, 0.0) for r in rows) / len(rows) for n in names}


def main() -> None:
    import torch
    from peft import PeftModel
    from transformers import AutoTokenizer

    from trace_gym import runconfig
    from trace_gym.agents.causal_lm import load_causal_lm
    from trace_gym.seeding import SPLITS
    from trace_gym.trainer.config import GRPOConfig
    from trace_gym.trainer.training import train

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", help="base model directory (default: the embedded base agent)")
    parser.add_argument("--envs", default=",".join(CAPABILITY_ENVS))
    parser.add_argument("--config", default="embedded", help="run configuration: a path, or a shipped one by name")
    parser.add_argument("--seeds", type=int, default=128)
    parser.add_argument("--iterations", type=int, help="override the recipe's iterations")
    parser.add_argument("--out", default="runs/bench-adapters")
    args = parser.parse_args()
    if args.base:
        base = Path(args.base)
    else:
        from trace_gym.baseagent.build import default_agent_dir

        base = default_agent_dir()
    out = Path(args.out)
    table = runconfig.load(args.config).get("train", {})
    seeds = [SPLITS["test"].start + i for i in range(args.seeds)]
    torch.set_num_threads(int(table.get("threads", 2)))
    tokenizer = AutoTokenizer.from_pretrained(base)
    for env_id in args.envs.split(","):
        name = env_id.split("/")[-1].removesuffix("-v0")
        knobs = runconfig.env_knobs(args.config, env_id)
        config = GRPOConfig.from_dict({**table, "env_id": env_id, "device": "cpu",
                                       "env_kwargs": {**GRPOConfig().env_kwargs, **knobs},
                                       **({"iterations": args.iterations} if args.iterations else {})})
        run = out / name
        start = time.perf_counter()
        adapter = run / "adapter"
        if not (adapter / "adapter_config.json").is_file():
            train(config, base, run, resume=(run / "checkpoints").is_dir(), log=None)
        seconds = time.perf_counter() - start
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        trained = sum(r.get("time/rollout_s", 0) + r.get("time/update_s", 0) for r in rows)
        model = load_causal_lm(base, torch.float32).eval()
        before = evaluate(model, tokenizer, env_id, config.env_kwargs, seeds, run / "eval-base.json")
        tuned = PeftModel.from_pretrained(model, str(adapter)).eval()
        after = evaluate(tuned, tokenizer, env_id, config.env_kwargs, seeds, run / "eval-adapter.json")
        diffs = [b["reward"] - a["reward"] for a, b in zip(before, after)]
        lo, hi = paired_interval(diffs)
        mean = lambda rs: sum(r["reward"] for r in rs) / len(rs)
        print(f"{env_id}: trained {config.iterations} iterations in {trained:.0f} s ({seconds:.0f} s this run); "
              f"base {mean(before):.3f}, adapter {mean(after):.3f} on {len(seeds)} test seeds; paired difference "
              f"{sum(diffs) / len(diffs):+.3f} (95% CI {lo:+.3f} to {hi:+.3f}; goal: above 0)  "
              f"[first iteration at T=1: mean reward {rows[0]['reward/mean']:.3f}, constant groups "
              f"{rows[0]['groups/constant_share']:.2f}; load {os.getloadavg()[0]:.2f}]", flush=True)
        b, a = checks_mean(before), checks_mean(after)
        print("  checks (base -> adapter): " + "; ".join(f"{n} {b.get(n, 0):.2f} -> {a.get(n, 0):.2f}"
                                                         for n in sorted(set(b) | set(a))), flush=True)


if __name__ == "__main__":
    main()
