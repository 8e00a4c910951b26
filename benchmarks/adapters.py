"""Capability adapters against the base agent: does each adapter help, by more than the draw?

    python benchmarks/adapters.py [--envs ENV,...] [--base DIR] [--config embedded]
                                  [--seeds 128] [--target-seeds 128] [--iterations N]
                                  [--in-flight 64] [--out runs/bench-adapters]

For each env of `--envs` (default: trace/precondition_verification-v0): `trace-gym train`'s
run with the config's `[train]` recipe and the env's knobs (resumed where `--out` already
holds part of it), then the base agent and the base agent with the adapter play, greedily on
the OpenVINO engine, the same `--seeds` test seeds of that env and the same `--target-seeds`
test seeds of each target with the config's knobs (the miniature on the embedded default).
The two outcomes of a seed form a pair, and every difference is the mean over pairs with its
95% paired bootstrap interval (`trace_gym.evaluation.bootstrap_interval`).

Printed per adapter: the training minutes (goal: at most 20 on a 2-core CPU with native
bf16, bound only there), the reward and success before and after on its env, the paired
success difference (goal: the interval above 0), and on the targets the paired pass-rate
difference on the episodes whose task needs the adapter's capability (`capabilities_needed`;
goal +0.10, reported, not a gate) and on the others (goal: the interval's lower end at least
-0.05). The run's curves (success, reward and each verdict check by iteration,
`trace_gym.trainer.curves`) go to `OUT/<env>/curves.png`. The end prints the wall time and one
line per goal. Every finished piece (the training run, each side's records as JSON Lines) is
kept in `--out` and reused by the next call.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

from trace_gym.agents.hardware import usable_cores  # imports no torch: before OMP is read

os.environ.setdefault("OMP_NUM_THREADS", str(usable_cores()))

import trace_gym  # noqa: F401  (registers the envs)
from trace_gym.seeding import SPLITS

TRAIN_MINUTES_GOAL = 20.0
SERVED_GAIN_GOAL = 0.10
OTHERS_FLOOR = -0.05
GOALS: list[tuple[str, str, bool | None]] = []


def goal(label: str, figure: str, met: bool | None) -> str:
    """Record a goal's figure; the words printed beside it."""
    GOALS.append((label, figure, met))
    return {True: "met", False: "not met", None: "reported, not bound"}[met]


def difference(pairs: list[tuple[dict, dict]], key: str = "passed") -> tuple[float, float, float, int]:
    """after - before of `key` over the pairs: mean, 95% paired interval, pairs
    (`trace_gym.evaluation.paired_difference`)."""
    from trace_gym.evaluation import paired_difference

    d = paired_difference(pairs, key)
    return d["difference"], *d["ci95"], d["seeds"]


def mean(records: list[dict[str, Any]], key: str) -> float:
    return sum(float(r[key]) for r in records) / len(records) if records else float("nan")


def checks_of(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The verdict checks of a record (none where it has no verdict)."""
    return (record.get("verdict") or {}).get("checks") or []


def check_rate(records: list[dict[str, Any]], name: str) -> float:
    """The share of `records` whose verdict passed the check `name` (absent: not passed)."""
    passed = [any(c["name"] == name and c["passed"] for c in checks_of(r)) for r in records]
    return sum(passed) / len(passed) if passed else float("nan")


def played(path: Path, model: Path, adapter: Path | None, env_id: str, knobs: dict[str, Any], seeds: list[int],
           max_new_tokens: int, in_flight: int) -> list[dict[str, Any]]:
    """The greedy records of this model (and adapter) on `seeds`, read from `path` when an
    earlier call wrote them with the same model, adapter, knobs and turn length, else played
    now and written atomically (the file's name carries a digest of those)."""
    from trace_gym.jsondata import sha256_json

    key = sha256_json({"model": str(model), "adapter": str(adapter), "knobs": knobs, "tokens": max_new_tokens})
    path = path.with_name(f"{path.stem}-{key[:8]}{path.suffix}")
    if path.is_file():
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if sorted(r["seed"] for r in records) == sorted(seeds):
            return records
    from trace_gym.agents import make_policy
    from trace_gym.driver import EpisodeRequest, play

    policy = make_policy("local", model_path=str(model), adapter=str(adapter) if adapter else None,
                         temperature=0.0, max_new_tokens=max_new_tokens, engine="openvino", announce=False)
    try:
        records = [p.record() for p in play([EpisodeRequest(s) for s in seeds], policy, env_id=env_id, env_kwargs=knobs,
                                            in_flight=in_flight)]
    finally:
        getattr(policy, "close", lambda: None)()
    records.sort(key=lambda r: r["seed"])
    from trace_gym.jsondata import write_jsonl_atomic

    write_jsonl_atomic(path, records)
    return records


def train_adapter(config: Any, base: Path, run: Path) -> float:
    """Train (or finish) the run; return the seconds its iterations took, as logged."""
    from trace_gym.trainer import train
    from trace_gym.trainer.metrics import MetricsLog

    if not (run / "adapter" / "adapter_config.json").is_file():
        train(config, base, run, resume=(run / "checkpoints").is_dir())
    rows = MetricsLog.read(run / "metrics.jsonl")
    return sum(r.get("time/rollout_s", 0.0) + r.get("time/update_s", 0.0) for r in rows)


def main() -> None:
    from trace_gym import registry, runconfig
    from trace_gym.agents.hardware import native_bf16, vector_flags
    from trace_gym.evaluation import paired
    from trace_gym.trainer import GRPOConfig
    from trace_gym.trainer.curves import plot_curves
    from trace_gym.trainer.metrics import MetricsLog

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", default="trace/precondition_verification-v0", help="comma-separated env ids")
    parser.add_argument("--base", help="the base agent's directory (default: the embedded base agent)")
    parser.add_argument("--config", default="embedded", help="run configuration: a path, or a shipped one by name")
    parser.add_argument("--seeds", type=int, default=128, help="test seeds of each adapter's env")
    parser.add_argument("--target-seeds", type=int, default=128, help="test seeds of each target")
    parser.add_argument("--iterations", type=int, help="the recipe's iterations, overridden")
    parser.add_argument("--in-flight", type=int, default=64, help="episodes in flight while evaluating")
    parser.add_argument("--out", default="runs/bench-adapters")
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"CPU flags seen: {vector_flags()} (native bf16: {'yes' if native_bf16() else 'no'}); "
          f"{usable_cores()} core(s)", flush=True)
    if args.base:
        base = Path(args.base)
    else:
        from trace_gym.baseagent.build import build, embedded_recipe

        base = build(embedded_recipe())  # the cached agent; built first where it is missing
    out = Path(args.out)
    pipeline = runconfig.load(args.config)
    targets = pipeline.get("pipeline", {}).get("targets", ["trace/airline-v0", "trace/retail-v0"])
    target_tokens = int(pipeline.get("rollout", {}).get("max_new_tokens", 192))
    env_seeds = [SPLITS["test"].start + i for i in range(args.seeds)]
    target_seeds = [SPLITS["test"].start + i for i in range(args.target_seeds)]
    print(f"base agent {base}; config {args.config}; {args.seeds} test seeds an env, {args.target_seeds} a target",
          flush=True)
    base_targets = {t: played(out / "base" / f"{t.split('/')[1]}.jsonl", base, None, t,
                              runconfig.env_knobs(args.config, t), target_seeds, target_tokens, args.in_flight)
                    for t in targets}
    for env_id in args.envs.split(","):
        name = env_id.split("/")[1]
        capability = registry.entry(env_id).capability
        config = GRPOConfig.for_env(env_id, args.config, iterations=args.iterations)
        run = out / name
        seconds = train_adapter(config, base, run)
        rows = MetricsLog.read(run / "metrics.jsonl")
        png = plot_curves(rows, run / "curves.png", f"GRPO on {env_id}: success, reward and verdict checks")
        adapter = run / "adapter"
        before = played(out / "base" / f"{name}.jsonl", base, None, env_id, config.env_kwargs, env_seeds,
                        config.max_new_tokens, args.in_flight)
        after = played(run / f"eval-{name}.jsonl", base, adapter, env_id, config.env_kwargs, env_seeds,
                       config.max_new_tokens, args.in_flight)
        minutes = seconds / 60
        print(f"\n{env_id} ({capability}): {len(rows)} iterations, {sum(r['episodes/total'] for r in rows)} "
              f"episodes, trained in {minutes:.1f} min (goal <= {TRAIN_MINUTES_GOAL:.0f}: "
              f"{goal(f'{name}: one adapter <= 20 min', f'{minutes:.1f} min', minutes <= TRAIN_MINUTES_GOAL if native_bf16() else None)}); "
              f"curves {png}", flush=True)
        phases = {k: sum(r.get(f"time/{k}_s", 0.0) for r in rows) / len(rows)
                  for k in ("rollout", "sync", "update", "forward_backward", "movement", "optimizer")}
        print(f"  an iteration, mean of {len(rows)}: {sum(r['episodes/total'] for r in rows) / len(rows):.1f} episodes, "
              f"rollouts {phases['rollout'] - phases['sync']:.1f} s, adapter sync {phases['sync']:.1f} s, update "
              f"{phases['update']:.1f} s (forward and backward {phases['forward_backward']:.1f} s, movement "
              f"{phases['movement']:.1f} s, optimiser {phases['optimizer']:.2f} s)", flush=True)
        own = paired(before, after)
        d, lo, hi, n = difference(own)
        r, rlo, rhi, _ = difference(own, "reward")
        print(f"  own env, {n} paired test seeds: success {mean(before, 'passed'):.3f} -> {mean(after, 'passed'):.3f}, "
              f"paired {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f}; goal: above 0: "
              f"{goal(f'{name}: success gain on its env', f'{d:+.3f} ({lo:+.3f} to {hi:+.3f})', lo > 0)}); "
              f"reward {mean(before, 'reward'):.3f} -> {mean(after, 'reward'):.3f}, paired {r:+.3f} "
              f"({rlo:+.3f} to {rhi:+.3f})", flush=True)
        checks = sorted({c["name"] for rec in before + after for c in checks_of(rec)})
        print("  checks passed (base -> adapter): " + "; ".join(
            f"{c} {check_rate(before, c):.2f} -> {check_rate(after, c):.2f}" for c in checks), flush=True)
        served_all, others_all = [], []
        for target in targets:
            knobs = runconfig.env_knobs(args.config, target)
            mine = played(run / f"eval-{target.split('/')[1]}.jsonl", base, adapter, target, knobs, target_seeds,
                          target_tokens, args.in_flight)
            theirs = base_targets[target]
            pairs = paired(theirs, mine)
            served_all += [(b, a) for b, a in pairs if capability in b["capabilities_needed"]]
            others_all += [(b, a) for b, a in pairs if capability not in b["capabilities_needed"]]
            d, lo, hi, n = difference(pairs)
            print(f"  {target}: pass {mean(theirs, 'passed'):.3f} -> {mean(mine, 'passed'):.3f}, paired {d:+.3f} "
                  f"({lo:+.3f} to {hi:+.3f}) on {n} seeds", flush=True)
        for pairs, check in ((served_all, None), (others_all, OTHERS_FLOOR)):
            d, lo, hi, n = difference(pairs)
            if check is None:
                verdict = goal(f"{name}: targets, kinds it serves", f"{d:+.3f} ({lo:+.3f} to {hi:+.3f}), n {n}", None)
                words = f"goal +{SERVED_GAIN_GOAL:.2f}: {verdict}"
            else:
                words = (f"goal: lower end >= {check:+.2f}: "
                         f"{goal(f'{name}: targets, other kinds', f'{d:+.3f} ({lo:+.3f} to {hi:+.3f}), n {n}', lo >= check)}")
            print(f"  targets, episodes that {'need' if check is None else 'do not need'} {capability}: "
                  f"{n} pairs, pass {mean([b for b, _ in pairs], 'passed'):.3f} -> "
                  f"{mean([a for _, a in pairs], 'passed'):.3f}, paired {d:+.3f} (95% CI {lo:+.3f} to {hi:+.3f}; "
                  f"{words})", flush=True)
    gains = sum(met for label, _, met in GOALS if label.endswith("gain on its env"))
    print(f"\nadapters whose paired success gain on their env lies above 0: {gains} of {len(args.envs.split(','))}")
    print(f"wall time {time.perf_counter() - started:.0f} s; load {os.getloadavg()[0]:.2f}")
    print("summary:")
    for label, figure, met in GOALS:
        print(f"  {label}: {figure}: {'met' if met else 'not met' if met is False else 'reported, not bound'}")


if __name__ == "__main__":
    main()
