"""Reward integrity: what the cheapest behaviours earn, next to their baselines and the oracle.

    python benchmarks/reward_integrity.py [--seeds 250] [--wording-seeds 2000] [--lenient]
        [--families NAME,...] [--oracle-seeds 1000] [ENV_ID ...]

Every family of adversaries the kit bounds (`trace_gym.testing.properties.FAMILIES`), each
adversary over the first `--seeds` train and `--seeds` test seeds of every env. One row per
(family, adversary, split): the seeds it applies to, its mean reward, how often it scored
1.0 where its baseline did not ("lucky"), its baseline's mean on those seeds (doing nothing,
or the family's honest but weak policy: the first candidate, a random available choice),
the oracle's mean beside them, and whether it is within the kit's bound (at most its
baseline plus 0.05 on each split, and the family's cap, 0.35, where the baseline is doing
nothing; no lucky seed unless the family is bounded on average only). `--families` plays only those named.

Then the oracle on `--oracle-seeds` train and test seeds (it must score 1.0 on every one),
the reset leak check (lookup tables over what the agent sees at reset, fitted on
`--wording-seeds` train seeds, scored on as many test seeds) and the wording-only
classifier, on what the customer says in the opening observation (the kit's check) and,
on the target envs, on everything the customer can say about a request.

`--lenient` makes the target envs with strict=False (tau2-bench's rule), for comparison.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402

import trace_gym  # noqa: E402
from trace_gym.jsondata import canonical_json  # noqa: E402
from trace_gym.seeding import SPLITS  # noqa: E402
from trace_gym.testing import adversaries, policies  # noqa: E402
from trace_gym.testing.leaks import lookup_leak, reset_fields  # noqa: E402
from trace_gym.testing.properties import FAMILIES, OVER_BASELINE  # noqa: E402
from trace_gym.testing.wording import MAX_GAIN, request_text, wording_leak  # noqa: E402

ONE = 1.0 - 1e-9


def split_seeds(n: int) -> dict[str, list[int]]:
    """The first `n` seeds of each split, as the kit draws them (train spread over its range)."""
    train = SPLITS["train"]
    return {"train": [train[i * 7919 % len(train)] for i in range(n)], "test": list(SPLITS["test"][:n])}


def make(env_id: str, strict: bool):
    kwargs = {"strict": strict} if trace_gym.registry.entry(env_id).kind == "target" else {}
    return gym.make(env_id, **kwargs).unwrapped


def table(env_id: str, n: int, strict: bool, families: list[str]) -> list[str]:
    env = make(env_id, strict)
    oracle: dict[int, float] = {}
    nothing: dict[int, float] = {}

    def reference(seeds: list[int]) -> None:
        for s in seeds:
            if s not in oracle:
                oracle[s] = policies.play(env, s, policies.oracle)[0]
                nothing[s] = adversaries.do_nothing(env, s)

    rows = [f"{'family':20s} {'adversary':30s} {'split':5s} {'seeds':>5s} {'mean':>6s} {'lucky':>5s} "
            f"{'baseline':>8s} {'oracle':>7s}  bound"]
    for split, chosen in split_seeds(n).items():
        reference(chosen)
        rows.append(f"{'':20s} {'do_nothing':30s} {split:5s} {len(chosen):5d} "
                    f"{_mean({s: nothing[s] for s in chosen}):6.3f} {'':>5s} {'':>8s} "
                    f"{_mean({s: oracle[s] for s in chosen}):7.3f}")
    for family_name in families:
        family = FAMILIES[family_name]
        seeds = split_seeds(n * family.seed_factor)
        every = [s for split in seeds.values() for s in split]
        reference(every)
        baselines = family.baselines()
        for name, play in family.players().items():
            rewards = {s: r for s in every if (r := play(env, s)) is not None}
            if not rewards:
                rows.append(f"{family_name:20s} {name:30s} does not apply")
                continue
            baseline = baselines.get(name)
            base = nothing if baseline is None else {s: baseline(env, s) or 0.0 for s in rewards}
            for split, chosen in seeds.items():
                got = {s: rewards[s] for s in chosen if s in rewards}
                if not got:
                    continue
                ref = {s: base[s] for s in got}
                lucky = sum(1 for s, r in got.items() if r >= ONE and ref[s] < ONE)
                ok = (_mean(got) <= _mean(ref) + OVER_BASELINE
                      and (baseline is not None or family.cap is None or _mean(got) <= family.cap)
                      and (not lucky or family.on_average))
                rows.append(f"{family_name:20s} {name:30s} {split:5s} {len(got):5d} {_mean(got):6.3f} {lucky:5d} "
                            f"{_mean(ref):8.3f} {_mean({s: oracle[s] for s in got}):7.3f}  "
                            f"{'ok' if ok else 'OUT OF BOUND'}")
    return rows


def _mean(rewards: dict[int, float]) -> float:
    return sum(rewards.values()) / len(rewards)


def oracle_row(env_id: str, n: int, strict: bool) -> str:
    env = make(env_id, strict)
    parts = []
    for split, chosen in split_seeds(n).items():
        below = [s for s in chosen if policies.play(env, s, policies.oracle)[0] < ONE]
        parts.append(f"{split} {len(chosen) - len(below)}/{len(chosen)} at 1.0"
                     + (f" (first below: seed {below[0]})" if below else ""))
    return "oracle: " + ", ".join(parts)


def reset_leak_row(env_id: str, n: int, strict: bool) -> str:
    env = make(env_id, strict)
    seeds = split_seeds(n)
    fitted, scored = reset_fields(env, seeds["train"]), reset_fields(env, seeds["test"])
    if not fitted or not scored:
        return "reset leak: no task has a decision"
    result = lookup_leak(fitted, scored)
    return f"reset leak: {result.describe()}  {'ok' if result.gain <= MAX_GAIN else 'LEAKS'}"


def wording(env_id: str, n: int) -> list[str]:
    env = gym.make(env_id).unwrapped
    train = [SPLITS["train"][i * 7919 % len(SPLITS["train"])] for i in range(n)]
    test = list(SPLITS["test"][:n])

    def opening(seeds: list[int]) -> list[tuple[str, str]]:
        out = []
        for seed in seeds:
            obs, _ = env.reset(seed=seed)
            decision = env.task.to_json().get("decision")
            if decision is not None:
                out.append((request_text(obs), canonical_json(decision)))
        return out

    def customer(seeds: list[int]) -> list[tuple[str, str]]:
        out = []
        for seed in seeds:
            env.reset(seed=seed)
            for r in env.task.to_json().get("requests", []):
                if r.get("decision") is not None:
                    out.append((" ".join([r["opening"], *r["facts"].values()]), r["decision"]))
        return out

    rows = []
    for what, collect in (("opening observation", opening), ("all the customer can say", customer)):
        fitted, scored = collect(train), collect(test)
        if not fitted or not scored:
            continue
        result = wording_leak(fitted, scored)
        rows.append(f"{what:26s} {result.describe()}  {'ok' if result.gain <= MAX_GAIN else 'LEAKS'}")
    return rows or ["no task has a decision"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("env_ids", nargs="*", help="envs to measure (default: every registered env)")
    parser.add_argument("--seeds", type=int, default=250, help="train seeds and test seeds per env")
    parser.add_argument("--oracle-seeds", type=int, default=1000, help="train and test seeds the oracle plays")
    parser.add_argument("--wording-seeds", type=int, default=2000)
    parser.add_argument("--lenient", action="store_true", help="target envs with strict=False")
    parser.add_argument("--families", type=lambda v: v.split(","), default=list(FAMILIES),
                        help=f"comma-separated families to play (default: all: {', '.join(FAMILIES)})")
    args = parser.parse_args()
    unknown = sorted(set(args.families) - set(FAMILIES))
    if unknown:
        raise SystemExit(f"unknown families {unknown}; known: {', '.join(FAMILIES)}")
    warnings.simplefilter("ignore")  # shipped envs re-stamped later in a change warn as unaudited
    ids = args.env_ids or [e.id for e in trace_gym.list_envs()]
    strict = not args.lenient
    for env_id in ids:
        start = time.perf_counter()
        print(f"\n== {env_id}: {args.seeds} train + {args.seeds} test seeds"
              f"{' (strict=False)' if args.lenient and trace_gym.registry.entry(env_id).kind == 'target' else ''}")
        for row in table(env_id, args.seeds, strict, args.families):
            print("  " + row, flush=True)
        if args.oracle_seeds:
            print("  " + oracle_row(env_id, args.oracle_seeds, strict), flush=True)
        if args.wording_seeds:
            print("  " + reset_leak_row(env_id, args.wording_seeds, strict), flush=True)
            for row in wording(env_id, args.wording_seeds):
                print("  wording-only, " + row, flush=True)
        print(f"  ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
