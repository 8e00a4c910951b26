"""Oracle episodes per second per env, on one core: reset, every step, verification.

    python benchmarks/env_throughput.py [--episodes 400] [--repeats 5] [ENV_ID ...]
    python benchmarks/env_throughput.py --instructions [--episodes 100] [ENV_ID ...]
    python benchmarks/env_throughput.py --phases [--episodes 400] [ENV_ID ...]

Each env runs `repeats` rounds of `episodes` oracle episodes through `gym.make` (as users
get it, wrappers included); the best round is reported (the least disturbed by other work
on the machine), with the median next to it. Goals: 1,000 episodes/s for each target env,
5,000 for each capability env; 3 for the coding envs (`trace_gym.coding.DOMAIN`), whose
episodes run the code in the sandbox (a command, then the hidden tests), and which play at
most 40 episodes a round.

Wall-clock rates on a shared VM swing by tens of percent; `--instructions` prints the
stable figure instead: instructions per episode, counted by valgrind's callgrind (the same
episodes run twice, after a warm-up, with and without the measured ones; the difference
over their number), with PYTHONHASHSEED fixed.

`--phases` prints where an episode's time goes, in microseconds per episode: reset (the
task, its world and the opening conversation), steps (the oracle's turns and the env's
answers, verification excluded) and verification, each the best of `repeats` rounds on its
own (so the three may come from different rounds).
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
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402

import trace_gym  # noqa: E402
import trace_gym.coding  # noqa: E402
from trace_gym.agents.hardware import vector_flags  # noqa: E402

GOALS = {"target": 1000, "capability": 5000}
CODING_GOAL = 3
CODING_EPISODES = 40
CODING_ENVS = (trace_gym.coding.DOMAIN.target_env_id, *trace_gym.coding.DOMAIN.capability_env_ids)
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


class _Timed(gym.Wrapper):
    """Adds up the seconds spent in reset, in step and in the env's verifier."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.seconds = {"reset": 0.0, "step": 0.0, "verify": 0.0}
        base, verify = env.unwrapped, env.unwrapped.verify
        base.verify = lambda *args: self._timed("verify", verify, *args)  # step calls self.verify

    def _timed(self, phase: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds[phase] += time.perf_counter() - start

    def reset(self, **kwargs: Any) -> Any:
        return self._timed("reset", self.env.reset, **kwargs)

    def step(self, action: Any) -> Any:
        return self._timed("step", self.env.step, action)


def phases(env_id: str, episodes: int, first_seed: int) -> tuple[float, float, float]:
    """Seconds per episode spent in reset, in steps (verification excluded), in verification."""
    env = _Timed(gym.make(env_id))
    play(env_id, episodes, first_seed, env)
    s = env.seconds
    return s["reset"] / episodes, (s["step"] - s["verify"]) / episodes, s["verify"] / episodes


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
    parser.add_argument("--phases", action="store_true", help="time reset, steps and verification apart")
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
    if args.phases:
        print(f"{'env':44s} {'reset us':>9s} {'steps us':>9s} {'verify us':>10s}")
        for env_id in ids:
            phases(env_id, 50, 10**6)  # warm up
            rounds = [phases(env_id, episodes, r * episodes) for r in range(args.repeats)]
            reset, steps, verify = (min(r[i] for r in rounds) * 1e6 for i in range(3))
            print(f"{env_id:44s} {reset:9.0f} {steps:9.0f} {verify:10.0f}", flush=True)
        return
    print(f"cpu flags seen: {vector_flags()}")
    print(f"{'env':44s} {'best eps/s':>11s} {'median':>9s} {'goal':>6s}")
    for env_id in ids:
        coding = env_id in CODING_ENVS
        n = min(episodes, CODING_EPISODES) if coding else episodes
        episodes_per_second(env_id, 5 if coding else 50, 10**6)  # warm up: imports, schema compilation
        rates = [episodes_per_second(env_id, n, r * n) for r in range(args.repeats)]
        goal = CODING_GOAL if coding else GOALS[entries[env_id].kind]
        best = max(rates)
        places = 1 if coding else 0  # a coding env's few episodes a second, to a tenth against its goal of 3
        print(f"{env_id:44s} {best:11.{places}f} {statistics.median(rates):9.{places}f} {goal:6d}"
              f"  {'ok' if best >= goal else 'BELOW GOAL'}", flush=True)


if __name__ == "__main__":
    main()
