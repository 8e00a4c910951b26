"""Reward integrity: what the cheapest behaviours earn, next to the oracle, per env.

    python benchmarks/reward_integrity.py [--seeds 250] [--wording-seeds 2000] [--lenient]
        [--adversaries NAME,...] [ENV_ID ...]

Every adversary of `trace_gym.testing.adversaries` and the kit's degenerate policies, each
over the first `--seeds` train and `--seeds` test seeds of every env. One line per (env,
adversary): the seeds it applies to, its mean reward and how often it scored 1.0, the same
for the do-nothing reply on those seeds, the oracle's mean beside it, and whether it is
within the kit's bound (a mean of at most 0.35 and of at most the do-nothing reply's plus
0.05, and no 1.0 on a seed where doing nothing scores less: "lucky", which the adversaries
bounded on average only, `refuse_by_kind`, may be). `--adversaries` plays only those named
(the oracle and the do-nothing reply are always played).

Then the wording-only classifier, fitted on `--wording-seeds` train seeds and scored on as
many test seeds, on what the customer says in the opening observation (the kit's check)
and, on the target envs, on everything the customer can say about a request (its opening
and every fact it answers questions with, one example per request that has a decision).

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
from trace_gym.testing.properties import MAX_ADVERSARY_MEAN, ON_AVERAGE_ONLY, OVER_DO_NOTHING  # noqa: E402
from trace_gym.testing.wording import MAX_GAIN, request_text, wording_leak  # noqa: E402

ONE = 1.0 - 1e-9


def players(only: list[str] | None = None) -> dict[str, adversaries.Adversary]:
    out: dict[str, adversaries.Adversary] = {
        f"policy:{name}": (lambda env, seed, act=act: policies.play(env, seed, act)[0])
        for name, act in policies.degenerate_policies().items()}
    out.update(adversaries.ADVERSARIES)
    if only is not None:
        unknown = sorted(set(only) - set(out))
        if unknown:
            raise SystemExit(f"unknown adversaries {unknown}; known: {', '.join(out)}")
        out = {name: out[name] for name in only}
    return out


def table(env_id: str, seeds: list[int], strict: bool, chosen: dict[str, adversaries.Adversary]) -> list[str]:
    kwargs = {"strict": strict} if trace_gym.registry.entry(env_id).kind == "target" else {}
    env = gym.make(env_id, **kwargs).unwrapped
    oracle = {s: policies.play(env, s, policies.oracle)[0] for s in seeds}
    nothing = {s: adversaries.do_nothing(env, s) for s in seeds}
    rows = [f"{'adversary':34s} {'seeds':>5s} {'mean':>6s} {'#1.0':>5s} {'lucky':>5s} {'nothing':>8s} "
            f"{'oracle':>7s}  bound",
            f"{'do_nothing':34s} {len(seeds):5d} {_mean(nothing):6.3f} {_ones(nothing):5d} {'':>5s} {'':>8s} "
            f"{_mean(oracle):7.3f}  {'ok' if _mean(nothing) <= MAX_ADVERSARY_MEAN else 'ABOVE 0.35'}"]
    for name, play in chosen.items():
        rewards = {}
        for s in seeds:
            reward = play(env, s)
            if reward is not None:
                rewards[s] = reward
        if not rewards:
            rows.append(f"{name:34s} {0:5d}  does not apply")
            continue
        base = {s: nothing[s] for s in rewards}
        lucky = sum(1 for s, r in rewards.items() if r >= ONE and base[s] < ONE)
        ok = (_mean(rewards) <= MAX_ADVERSARY_MEAN and _mean(rewards) <= _mean(base) + OVER_DO_NOTHING
              and (not lucky or name in ON_AVERAGE_ONLY))
        rows.append(f"{name:34s} {len(rewards):5d} {_mean(rewards):6.3f} {_ones(rewards):5d} {lucky:5d} "
                    f"{_mean(base):8.3f} {_mean({s: oracle[s] for s in rewards}):7.3f}  {'ok' if ok else 'OUT OF BOUND'}")
    return rows


def _mean(rewards: dict[int, float]) -> float:
    return sum(rewards.values()) / len(rewards)


def _ones(rewards: dict[int, float]) -> int:
    return sum(1 for r in rewards.values() if r >= ONE)


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
    parser.add_argument("--wording-seeds", type=int, default=2000)
    parser.add_argument("--lenient", action="store_true", help="target envs with strict=False")
    parser.add_argument("--adversaries", type=lambda v: v.split(","), default=None,
                        help="comma-separated names of the adversaries to play (default: all)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # shipped envs re-stamped later in a change warn as unaudited
    ids = args.env_ids or [e.id for e in trace_gym.list_envs()]
    chosen = players(args.adversaries)
    seeds = [*SPLITS["train"][: args.seeds], *SPLITS["test"][: args.seeds]]
    for env_id in ids:
        start = time.perf_counter()
        print(f"\n== {env_id}: {args.seeds} train + {args.seeds} test seeds"
              f"{' (strict=False)' if args.lenient and trace_gym.registry.entry(env_id).kind == 'target' else ''}")
        for row in table(env_id, seeds, strict=not args.lenient, chosen=chosen):
            print("  " + row, flush=True)
        if args.wording_seeds:
            for row in wording(env_id, args.wording_seeds):
                print("  wording-only, " + row, flush=True)
        print(f"  ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
