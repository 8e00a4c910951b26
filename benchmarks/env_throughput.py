"""Oracle episodes per second per env, on one core: reset, every step, verification.

    python benchmarks/env_throughput.py [--episodes 400] [--repeats 5] [ENV_ID ...]

Each env runs `repeats` rounds of `episodes` oracle episodes through `gym.make` (as users
get it, wrappers included); the best round is reported (the least disturbed by other work
on the machine), with the median next to it. Goals: 1,000 episodes/s for each target env.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402

import trace_gym  # noqa: E402

GOALS = {"target": 1000, "capability": 5000}


def episodes_per_second(env_id: str, episodes: int, first_seed: int) -> float:
    env = gym.make(env_id)
    base = env.unwrapped
    start = time.perf_counter()
    for seed in range(first_seed, first_seed + episodes):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(base.oracle_action(obs))
            done = terminated or truncated
        assert reward == 1.0, (env_id, seed)
    return episodes / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("env_ids", nargs="*", help="envs to measure (default: every registered env)")
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})  # one core
    entries = {e.id: e for e in trace_gym.list_envs()}
    ids = args.env_ids or list(entries)
    print(f"{'env':44s} {'best eps/s':>11s} {'median':>9s} {'goal':>6s}")
    for env_id in ids:
        episodes_per_second(env_id, 50, 10**6)  # warm up: imports, schema compilation
        rates = [episodes_per_second(env_id, args.episodes, r * args.episodes) for r in range(args.repeats)]
        goal = GOALS[entries[env_id].kind]
        best = max(rates)
        print(f"{env_id:44s} {best:11.0f} {statistics.median(rates):9.0f} {goal:6d}"
              f"  {'ok' if best >= goal else 'BELOW GOAL'}")


if __name__ == "__main__":
    main()
