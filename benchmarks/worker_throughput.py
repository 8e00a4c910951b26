"""Oracle episodes per second of a generated env in the sandboxed env worker, beside the same
env in-process, on one core.

    python benchmarks/worker_throughput.py [--episodes 400] [--repeats 5] [--isolation bubblewrap]

Each env module runs twice: in this process through `gym.make` (as a shipped env runs), and
loaded as a generated module by an env worker behind `RemoteEnv` (as every generated env runs
in rollouts, calibration and training). This process and its worker are pinned to one core
together, so every round trip is two context switches on that core. Rounds of `episodes`
oracle episodes on consecutive seeds, each scoring 1; the best round is the figure (the least
disturbed by other work on the machine), the median beside it, and the load average before
and after. Goal: 1,000 episodes/s in the worker for trace/precondition_verification-v0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402

import trace_gym  # noqa: E402, F401
from trace_gym.sandbox import EnvSource, RemoteEnv, WorkerPool  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from env_throughput import play  # noqa: E402

ENVS = {"trace/precondition_verification-v0": "precondition_verification.py",
        "trace/multi_step_task_completion-v0": "multi_step_task_completion.py"}
GOAL = 1000
GENERATED = Path(__file__).resolve().parent.parent / "generated_envs"


def rate(env_id: str, env: gym.Env, episodes: int, first_seed: int) -> float:
    start = time.perf_counter()
    play(env_id, episodes, first_seed, env)
    return episodes / (time.perf_counter() - start)


def measure(env_id: str, env: gym.Env, episodes: int, repeats: int) -> tuple[float, float]:
    play(env_id, 50, 10**6, env)  # warm up: imports, schema compilation
    rates = [rate(env_id, env, episodes, r * episodes) for r in range(repeats)]
    return max(rates), statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--isolation", default="bubblewrap", choices=["bubblewrap", "fallback"])
    args = parser.parse_args()
    os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})  # one core, inherited by the worker
    load = os.getloadavg()[0]
    with WorkerPool(1, isolation=args.isolation) as pool:
        print(f"worker isolation: {pool.isolation.mode}; load average {load:.2f} at the start")
        print(f"{'env':38s} {'where':>10s} {'best eps/s':>11s} {'median':>9s}")
        for env_id, module in ENVS.items():
            # the worker's env through gym.make too, so both carry the same wrappers
            worker_id = f"trace-bench/{env_id.split('/')[1]}"
            source = EnvSource.from_file(GENERATED / module)
            gym.register(worker_id, entry_point=lambda source=source: RemoteEnv(source, pool=pool),
                         max_episode_steps=400)
            runs = {"in-process": gym.make(env_id), "worker": gym.make(worker_id)}
            for where, env in runs.items():
                best, median = measure(env_id, env, args.episodes, args.repeats)
                verdict = ""
                if where == "worker" and env_id == "trace/precondition_verification-v0":
                    verdict = f"  goal {GOAL}: {'ok' if best >= GOAL else 'BELOW GOAL'}"
                print(f"{env_id:38s} {where:>10s} {best:11.0f} {median:9.0f}{verdict}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
