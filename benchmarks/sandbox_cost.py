"""What one sandboxed coding command costs: bubblewrap's start, Python's, a test run, the verifier.

    python benchmarks/sandbox_cost.py [--runs 40]

Each line is `runs` runs of one kind of command, one after another on one core, with the
median and the 90th percentile in milliseconds:

- `true`: an empty repository and `sh -c true` (bubblewrap, its namespaces and limits);
- `python -c pass`: the interpreter starting in the sandbox;
- `run_tests`: a coding-v0 task's visible suite (`python tests/run.py`), its repository
  copied in and read back as the agent's tool does (`trace_gym.sandbox.workspace.run`);
- `hidden tests`: the verifier's run of the task's hidden tests on the package
  (`trace_gym.coding.verify.hidden_outcomes`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from trace_gym.agents.hardware import vector_flags
from trace_gym.coding.repo import generate
from trace_gym.coding.verify import hidden_outcomes
from trace_gym.rng import Rng
from trace_gym.sandbox.jail import python_argv, run_in_repo
from trace_gym.sandbox.workspace import run


def timed(fn, runs: int) -> tuple[float, float]:
    """(median, 90th percentile) of `runs` calls of `fn`, in milliseconds."""
    seconds = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - start)
    seconds.sort()
    return 1000 * statistics.median(seconds), 1000 * seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args()
    print(f"cpu flags seen: {vector_flags()}")
    task = generate(Rng.from_seed(0))
    # what is timed must be what it says: the visible suite passes, the hidden tests report values
    if not run(task.files, python_argv("tests/run.py"))[0].ok:
        raise SystemExit("the visible suite did not pass in the sandbox: nothing to time")
    outcomes, status = hidden_outcomes(task, task.fixed_files)
    if any(o is None for o in outcomes):
        raise SystemExit(f"the hidden tests reported no result ({status}): nothing to time")
    with tempfile.TemporaryDirectory() as empty:
        kinds = {
            "true": lambda: run_in_repo(empty, ["sh", "-c", "true"]),
            "python -c pass": lambda: run_in_repo(empty, python_argv("-c", "pass")),
            "run_tests": lambda: run(task.files, python_argv("tests/run.py")),
            "hidden tests": lambda: hidden_outcomes(task, task.fixed_files),
        }
        print(f"{'command':16s} {'median ms':>10s} {'p90 ms':>8s}  ({args.runs} runs each)")
        for name, fn in kinds.items():
            fn()  # warm-up: the first run pays for cold caches
            median, p90 = timed(fn, args.runs)
            print(f"{name:16s} {median:10.1f} {p90:8.1f}", flush=True)


if __name__ == "__main__":
    main()
