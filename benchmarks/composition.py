"""Composition of the capability adapters: the mixture and the task router against each single
adapter, one adapter merged from all of them, and the base agent.

    python benchmarks/composition.py [--adapters runs/bench-adapters] [--base DIR] [--seeds 64]
                                     [--cap-seeds 64] [--out runs/bench-composition]

Takes the adapters `benchmarks/adapters.py` trained (one per capability env, under
`--adapters`), composes them (`trace-gym compose`: gate data from each adapter's successful
train-split episodes), then prints:

- held-out routing accuracy per capability;
- on each capability env's test seeds: the mixture's mean reward beside that capability's own
  adapter (goal: within 0.1 of it, composition without interference);
- the task router's accuracy on each capability env's test tasks (its choice for the
  conversation's opening against the env's capability);
- on the target envs' test seeds (`--seeds` each, the embedded config's knobs, greedy): pass rate with a
  95% bootstrap interval for the base agent, each single adapter, a single adapter merged from
  all of them (peft's add_weighted_adapter, equal weights, `cat`), the task router and the
  mixture; then the router's and the mixture's difference from the base and from the best
  single adapter (chosen on the same seeds, which flatters it), paired by seed, with 95%
  intervals.

Every finished piece is kept in `--out` and reused.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

TARGETS = ("trace/airline-v0", "trace/retail-v0")


def play(factory, env_id: str, seeds: list[int], path: Path) -> list[dict]:
    from trace_gym.rollout import read_records, rollout

    if not path.is_file() or len(read_records(path)) < len(seeds):
        from trace_gym.runconfig import env_knobs

        rollout(env_id, factory, seeds, path, workers=16, progress=False,
                env_kwargs=env_knobs("embedded", env_id) or {"prompt_style": "compact"})  # the embedded default's
    return read_records(path)


def main() -> None:
    import functools

    from trace_gym.agents import make_policy
    from trace_gym.evaluation import bootstrap_interval
    from trace_gym.moe.composition import ComposeConfig, capability_of, compose
    from trace_gym.moe.policy import MixturePolicy, RouterPolicy
    from trace_gym.seeding import SPLITS

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--adapters", default="runs/bench-adapters")
    parser.add_argument("--base", help="base model directory (default: the embedded base agent)")
    parser.add_argument("--seeds", type=int, default=64, help="test seeds per target env")
    parser.add_argument("--cap-seeds", type=int, default=64, help="test seeds per capability env")
    parser.add_argument("--out", default="runs/bench-composition")
    args = parser.parse_args()
    if args.base:
        base = Path(args.base)
    else:
        from trace_gym.baseagent.build import default_agent_dir

        base = default_agent_dir()
    out = Path(args.out)
    found = sorted(p for p in Path(args.adapters).glob("*/adapter") if (p / "trace_gym_adapter.json").is_file())
    if not found:
        raise SystemExit(f"no trained adapters under {args.adapters}: run benchmarks/adapters.py first")
    envs = [json.loads((p / "trace_gym_adapter.json").read_text())["env_id"] for p in found]
    names = [capability_of(e) for e in envs]
    composed = out / "composed"
    if not (composed / "routing.json").is_file():
        compose(base, [str(p) for p in found], envs, composed, ComposeConfig())
    routing = json.loads((composed / "routing.json").read_text())
    print("held-out routing accuracy: " + ", ".join(f"{k} {v:.3f}" for k, v in routing["accuracy"].items()), flush=True)

    sampling = {"temperature": 0.0, "max_new_tokens": 192}
    single = {n: functools.partial(make_policy, "local", model_path=str(base), adapter=str(p), **sampling)
              for n, p in zip(names, found)}
    mixture = functools.partial(MixturePolicy, str(base), composed / "mixture", **sampling)
    test = [SPLITS["test"].start + i for i in range(args.cap_seeds)]
    for name, env_id in zip(names, envs):
        own = play(single[name], env_id, test, out / f"{name}-own.jsonl")
        mixed = play(mixture, env_id, test, out / f"{name}-mixture.jsonl")
        a, b = (sum(r["reward"] for r in rs) / len(rs) for rs in (own, mixed))
        print(f"{env_id}: own adapter {a:.3f}, mixture {b:.3f} (difference {b - a:+.3f}; goal: within 0.1)", flush=True)

    merged_dir = out / "merged"
    if not (merged_dir / "adapter_config.json").is_file():
        import torch
        from peft import PeftModel

        from trace_gym.agents.causal_lm import load_causal_lm

        model = PeftModel.from_pretrained(load_causal_lm(base, torch.float32),
                                          str(found[0]), adapter_name=names[0])
        for n, p in zip(names[1:], found[1:]):
            model.load_adapter(str(p), adapter_name=n)
        model.add_weighted_adapter(names, [1.0 / len(names)] * len(names), "merged", combination_type="cat")
        model.save_pretrained(out / "merged-save", selected_adapters=["merged"])
        os.replace(out / "merged-save" / "merged", merged_dir)
    contenders = {"base": functools.partial(make_policy, "local", model_path=str(base), **sampling),
                  **{f"adapter:{n}": f for n, f in single.items()},
                  "merged": functools.partial(make_policy, "local", model_path=str(base), adapter=str(merged_dir),
                                              **sampling),
                  "router": functools.partial(RouterPolicy, str(base), dict(zip(names, map(str, found))), **sampling),
                  "mixture": mixture}
    router = RouterPolicy(str(base), dict(zip(names, map(str, found))), **sampling)
    for name, env_id in zip(names, envs):  # the router on test tasks: each env's opening routed to its capability
        from trace_gym.driver import make_env
        from trace_gym.runconfig import env_knobs

        env = make_env(env_id, **(env_knobs("embedded", env_id) or {"prompt_style": "compact"}))
        chosen = [router.route(env.reset(seed=seed)[0]) for seed in test]
        print(f"routing accuracy on {len(test)} test tasks of {env_id}: "
              f"{sum(c == name for c in chosen) / len(chosen):.3f}", flush=True)
    del router
    seeds = [SPLITS["test"].start + i for i in range(args.seeds)]
    for env_id in TARGETS:
        passed = {}
        for label, factory in contenders.items():
            records = play(factory, env_id, seeds, out / f"{env_id.split('/')[1]}-{label.replace(':', '-')}.jsonl")
            passed[label] = {r["seed"]: float(r["passed"]) for r in records}
            passes = list(passed[label].values())
            lo, hi = bootstrap_interval(passes)
            print(f"{env_id} {label:>36}: pass rate {sum(passes) / len(passes):.3f} (95% CI {lo:.3f}-{hi:.3f}) "
                  f"on {len(passes)} test seeds", flush=True)
        # the best single adapter is chosen on these same seeds: its row flatters it
        best = max((k for k in passed if k.startswith("adapter:")), key=lambda k: sum(passed[k].values()))
        for method in ("router", "mixture"):
            for rival in ("base", best):
                diffs = [passed[method][s] - passed[rival][s] for s in seeds]
                lo, hi = bootstrap_interval(diffs)
                print(f"{env_id} {method} - {rival} (best single)" if rival == best else f"{env_id} {method} - {rival}",
                      f": {sum(diffs) / len(diffs):+.3f} (95% CI {lo:+.3f} to {hi:+.3f}, paired by seed)", flush=True)


if __name__ == "__main__":
    main()
