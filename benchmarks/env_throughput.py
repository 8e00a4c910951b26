"""Oracle episodes per second per env, on one core: reset, every step, verification.

    python benchmarks/env_throughput.py [--episodes 400] [--repeats 5] [ENV_ID ...]
    python benchmarks/env_throughput.py --instructions [--episodes 100] [ENV_ID ...]

Each env runs `repeats` rounds of `episodes` oracle episodes through `gym.make` (as users
get it, wrappers included); the best round is reported (the least disturbed by other work
on the machine), with the median next to it. Goals: 1,000 episodes/s for each target env,
5,000 for each capability env.

Wall-clock rates on a shared VM swing by tens of percent; `--instructions` prints the
stable figure instead: instructions per episode, counted by valgrind's callgrind (the same
episodes run twice, after a warm-up, with and without the measured ones; the difference
over their number), with PYTHONHASHSEED fixed.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402

import trace_gym  # noqa: E402

GOALS = {"target": 1000, "capability": 5000}
WARM_UP = 30


def play(env_id: str, episodes: int, first_seed: int, env: gym.Env | None = None) -> None:
    """`episodes` oracle episodes on consecutive seeds; each must score 1."""
    env = gym.make(env_id) if env is None else env
    base = env.unwrapped
    for seed in range(first_seed, first_seed + episodes):
        obs, _ = env.reset(seed=seed)
        done = False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(base.oracle_action(obs))
            done = terminated or truncated
        assert reward == 1.0, (env_id, seed)


def episodes_per_second(env_id: str, episodes: int, first_seed: int) -> float:
    env = gym.make(env_id)
    start = time.perf_counter()
    play(env_id, episodes, first_seed, env)
    return episodes / (time.perf_counter() - start)


def instructions(env_id: str, episodes: int) -> float:
    """Instructions per oracle episode, from two callgrind runs."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("--instructions needs valgrind (Debian package 'valgrind')")
    totals = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (0, episodes):
            out = Path(tmp) / f"cg.{n}"
            child = subprocess.run([valgrind, "-q", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable,
                                    __file__, "--play", str(n), env_id], capture_output=True, text=True,
                                   env={**os.environ, "PYTHONHASHSEED": "0"})
            if child.returncode != 0:  # show why, rather than a bare CalledProcessError
                sys.exit(f"{env_id}: the measured run failed:\n{child.stderr[-2000:]}")
            totals.append(int(re.search(r"^(?:summary|totals): (\d+)", out.read_text(), re.M).group(1)))
    return (totals[1] - totals[0]) / episodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("env_ids", nargs="*", help="envs to measure (default: every registered env)")
    parser.add_argument("--episodes", type=int, default=None, help="per round (default 400; 100 with --instructions)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--instructions", action="store_true", help="count instructions per episode (callgrind)")
    parser.add_argument("--play", type=int, help=argparse.SUPPRESS)  # the measured child of --instructions
    args = parser.parse_args()
    if args.play is not None:
        env = gym.make(args.env_ids[0])
        play(args.env_ids[0], WARM_UP, 10**6, env)  # imports, schema compilation, caches
        play(args.env_ids[0], args.play, 0, env)
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})  # one core
    entries = {e.id: e for e in trace_gym.list_envs()}
    ids = args.env_ids or list(entries)
    if args.instructions:
        episodes = args.episodes or 100
        print(f"{'env':44s} {'instructions/episode':>21s}")
        for env_id in ids:
            print(f"{env_id:44s} {instructions(env_id, episodes) / 1e6:19.2f} M", flush=True)
        return
    episodes = args.episodes or 400
    print(f"{'env':44s} {'best eps/s':>11s} {'median':>9s} {'goal':>6s}")
    for env_id in ids:
        episodes_per_second(env_id, 50, 10**6)  # warm up: imports, schema compilation
        rates = [episodes_per_second(env_id, episodes, r * episodes) for r in range(args.repeats)]
        goal = GOALS[entries[env_id].kind]
        best = max(rates)
        print(f"{env_id:44s} {best:11.0f} {statistics.median(rates):9.0f} {goal:6d}"
              f"  {'ok' if best >= goal else 'BELOW GOAL'}", flush=True)


if __name__ == "__main__":
    main()
