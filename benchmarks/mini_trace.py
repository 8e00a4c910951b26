"""mini-TRACE: the paper's central claims at CPU scale, reported as they come out.

    python benchmarks/mini_trace.py [--config embedded] [--out runs/mini-trace]
                                    [--fractions 0.25,0.5,1] [--iterations 8] [--seeds 64] [--quick]
                                    [--gepa-base-url URL --gepa-model NAME]

Runs `trace-gym pipeline` on the embedded default with the baselines turned on: direct GRPO
on each target (the same number of episodes as all capability adapters together) and GEPA's
instructions for the base agent (`--gepa-base-url`, its reflection model's endpoint), `--seeds` test seeds per
target, and the capability adapters trained for each fraction of `--iterations` (one run
directory per fraction; every stage is reused on a rerun, so the benchmark resumes). Prints:

(a) targeted adapters + composition (router, mixture) against direct GRPO on the target, at
    equal rollouts: pass rate with 95% intervals per target;
(b) the mixture against the best single adapter;
(c) pass rate against rollouts (episodes of training) for the mixture and direct GRPO, one
    point per fraction, as a PNG (`OUT/sample_efficiency.png`).

It may run for hours.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path


def main() -> None:
    from trace_gym.pipeline.run import run_pipeline
    from trace_gym.pipeline.stages.baselines import STAGE as BASELINES
    from trace_gym.pipeline.stages.eval import STAGE as EVAL
    from trace_gym.pipeline.stages.train import STAGE as TRAIN

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="run configuration: a path, or a shipped one by name (default: embedded)")
    parser.add_argument("--out", default="runs/mini-trace")
    parser.add_argument("--fractions", default="0.25,0.5,1")
    parser.add_argument("--iterations", type=int, default=8, help="adapter iterations at fraction 1")
    parser.add_argument("--seeds", type=int, default=64, help="test seeds per target")
    parser.add_argument("--quick", action="store_true", help="one point: adapters of 2 iterations, 16 test seeds, "
                        "GEPA at 48 episodes a target")
    parser.add_argument("--gepa-base-url", default="", help="an OpenAI-compatible endpoint for GEPA's reflection "
                        "model (without one the GEPA row is absent, and the report says why)")
    parser.add_argument("--gepa-model", default="", help="the reflection model's name on that endpoint")
    args = parser.parse_args()
    gepa_calls = 300
    if args.quick:
        args.fractions, args.iterations, args.seeds, gepa_calls = "1", 2, 16, 48
    started = time.perf_counter()
    out = Path(args.out)
    points = []
    for fraction in (float(f) for f in args.fractions.split(",")):
        iterations = max(1, math.ceil(fraction * args.iterations))
        state = run_pipeline(args.config, out / f"iterations-{iterations}", "default",
                             overrides={"train": {"iterations": iterations},
                                        "baselines": {"direct_grpo": True, "gepa": True,
                                                      "gepa_base_url": args.gepa_base_url,
                                                      "gepa_model": args.gepa_model,
                                                      "gepa_max_metric_calls": gepa_calls},
                                        "eval": {"seeds": args.seeds}})
        note = state.get(BASELINES).note
        if note:
            print(note)
        evaluation, targets = state.get(EVAL), state.config.targets
        table = {label: {t: cell.to_json() for t, cell in row.items()} for label, row in evaluation.table.items()}
        episodes = sum(a.episodes for a in state.get(TRAIN).adapters.values())
        print(f"\n== adapters trained {iterations} iterations ({episodes} training episodes in all; direct GRPO the "
              f"same per target) ==", flush=True)
        for target in targets:
            short = target.split("/")[1]
            print(f"{target}:")
            for label in evaluation.order:
                cell = table[label][target]
                print(f"  {label:>40}: {cell['pass_rate']:.3f} [{cell['ci95'][0]:.3f}, {cell['ci95'][1]:.3f}]")
            singles = {k: v[target]["pass_rate"] for k, v in table.items() if k.startswith("adapter ")}
            direct = table.get(f"direct GRPO on {short}", {}).get(target)
            best = max(singles.items(), key=lambda kv: kv[1]) if singles else None
            mixture = table.get("mixture", {}).get(target)
            router = table.get("router", {}).get(target)
            if direct and mixture and router:
                print(f"  (a) router {router['pass_rate']:.3f}, mixture {mixture['pass_rate']:.3f} vs direct GRPO "
                      f"{direct['pass_rate']:.3f} at {episodes} training episodes each")
            if best and mixture:
                print(f"  (b) mixture {mixture['pass_rate']:.3f} vs the best single adapter ({best[0]}) {best[1]:.3f}")
            points.append((target, episodes, mixture["pass_rate"] if mixture else float("nan"),
                           direct["pass_rate"] if direct else float("nan")))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for target in sorted({p[0] for p in points}):
        mine = sorted(p for p in points if p[0] == target)
        ax.plot([p[1] for p in mine], [p[2] for p in mine], marker="o", label=f"mixture, {target}")
        ax.plot([p[1] for p in mine], [p[3] for p in mine], marker="s", linestyle="--", label=f"direct GRPO, {target}")
    ax.set_xlabel("training episodes")
    ax.set_ylabel("test pass rate")
    ax.legend(fontsize=7)
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / "sample_efficiency.png", dpi=100, bbox_inches="tight")
    print(f"\n(c) {out / 'sample_efficiency.png'}")
    from trace_gym.agents.hardware import vector_flags

    print(f"CPU flags seen: {vector_flags()}")
    print(f"wall time: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
