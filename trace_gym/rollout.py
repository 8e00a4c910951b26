"""Rollouts: play a policy on many seeds and append one trajectory record per episode.

The output is JSON Lines (the record format of `trace_gym.trajectory`). Each finished
episode is appended as one line with a single write, so a crash leaves at most one partial
last line; rerunning the same command drops that line and plays only the episodes that are
missing (by record id `env/split/seed/sample`). An uninterrupted run and a resumed one give
the same set of episodes, each exactly once.

Parallelism follows the backend: worker processes for policies that compute in Python
(oracle, random), threads for endpoint policies (the server does the work), batched
generation for a local model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym.agents.base import Policy
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import loads
from trace_gym.seeding import split_of
from trace_gym.trajectory import run_episode

PolicyFactory = Callable[[], Policy]


@dataclass(frozen=True)
class Job:
    env_id: str
    seed: int
    sample: int

    @property
    def id(self) -> str:
        return f"{self.env_id}/{split_of(self.seed)}/{self.seed}/{self.sample}"


def read_records(path: Path, repair: bool = False) -> list[dict[str, Any]]:
    """The complete records of a JSONL file. Every record is written with its newline in one
    write, so text after the last newline is a write cut short: it is ignored, and with
    `repair` cut off the file. A malformed complete line is an error naming the line."""
    if not path.exists():
        return []
    data = path.read_bytes()
    complete, newline, tail = data.rpartition(b"\n")
    if tail.strip() and repair:
        with open(path, "r+b") as f:
            f.truncate(len(complete) + len(newline))
    records = []
    for number, line in enumerate(complete.split(b"\n"), 1):
        if not line.strip():
            continue
        try:
            record = loads(line)
        except ValueError:
            record = None
        if not isinstance(record, dict):
            raise TraceGymError(f"{path}: line {number} is not a JSON record (an object)")
        records.append(record)
    return records


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one record as one line, in one write."""
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def plan(env_id: str, seeds: Iterable[int], samples: int, done: set[str]) -> list[Job]:
    return [job for seed in seeds for sample in range(samples)
            if (job := Job(env_id, seed, sample)).id not in done]


# -- executors ----------------------------------------------------------------------------

_WORKER: dict[str, Any] = {}


def _init_worker(env_id: str, factory: PolicyFactory, env_kwargs: dict[str, Any]) -> None:
    import gymnasium as gym

    import trace_gym  # noqa: F401

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    _WORKER["env"] = gym.make(env_id, **env_kwargs)
    _WORKER["policy"] = factory()


def _play(job: Job, hint: bool) -> dict[str, Any]:
    return run_episode(_WORKER["env"], _WORKER["policy"], env_id=job.env_id, seed=job.seed,
                       sample=job.sample, hint=hint)


def run_jobs(jobs: list[Job], factory: PolicyFactory, *, hint: bool = False, workers: int = 1,
             mode: str = "process", env_kwargs: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Records of the jobs, as they finish (order may differ from `jobs`)."""
    if not jobs:
        return
    env_id = jobs[0].env_id
    env_kwargs = env_kwargs or {}
    if workers <= 1:
        _init_worker(env_id, factory, env_kwargs)
        for job in jobs:
            yield _play(job, hint)
        return
    if mode == "thread":
        import gymnasium as gym

        local: dict[int, Any] = {}

        def play_threaded(job: Job) -> dict[str, Any]:
            import threading

            key = threading.get_ident()
            if key not in local:
                local[key] = (gym.make(env_id, **env_kwargs), factory())
            env, policy = local[key]
            return run_episode(env, policy, env_id=job.env_id, seed=job.seed, sample=job.sample, hint=hint)

        executor: Any = ThreadPoolExecutor(workers)
        submit = lambda job: executor.submit(play_threaded, job)  # noqa: E731
    else:
        executor = ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(env_id, factory, env_kwargs))
        submit = lambda job: executor.submit(_play, job, hint)  # noqa: E731
    with executor:
        pending: set[Future] = set()
        queue = list(jobs)
        try:
            while queue or pending:
                while queue and len(pending) < 2 * workers:
                    pending.add(submit(queue.pop(0)))
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield future.result()
        except BaseException:
            for future in pending:
                future.cancel()
            raise


def run_batched(jobs: list[Job], factory: PolicyFactory, *, hint: bool = False, workers: int = 8,
                mode: str = "batch", env_kwargs: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
    """Episodes in lockstep, `workers` at a time, one batched generation per turn (for a
    policy with `act_batch`, such as a local model)."""
    import time

    import gymnasium as gym

    import trace_gym  # noqa: F401
    from trace_gym.trajectory import make_record

    if not jobs:
        return
    policy = factory()
    queue = list(jobs)
    active: list[dict[str, Any]] = []
    while queue or active:
        while queue and len(active) < max(1, workers):
            job = queue.pop(0)
            env = gym.make(job.env_id, **(env_kwargs or {}))
            start = time.perf_counter()
            obs, info = env.reset(seed=job.seed, options={"hint": True} if hint else None)
            active.append({"job": job, "env": env, "obs": obs, "tools": info["tools"], "start": start,
                           "seed": (job.seed * 7919 + job.sample) % 2**31})
        actions = policy.act_batch([(a["obs"], a["tools"], a["seed"] + len(a["obs"])) for a in active])
        still = []
        for episode, action in zip(active, actions):
            obs, reward, terminated, truncated, info = episode["env"].step(action)
            episode["obs"] = obs
            if terminated or truncated:
                job = episode["job"]
                yield make_record(episode["env"], env_id=job.env_id, seed=job.seed, sample=job.sample,
                                  policy=policy.name, hint=hint, messages=obs, reward=reward, info=info,
                                  timings={"total_s": round(time.perf_counter() - episode["start"], 6)})
            else:
                still.append(episode)
        active = still


@dataclass
class RolloutSummary:
    path: str
    planned: int
    skipped: int
    written: int


def rollout(env_id: str, factory: PolicyFactory, seeds: Iterable[int], out: Path, *, samples: int = 1,
            hint: bool = False, workers: int = 1, mode: str = "process",
            env_kwargs: dict[str, Any] | None = None, progress: bool = True,
            runner: Callable[..., Iterator[dict[str, Any]]] | None = None) -> RolloutSummary:
    """Play every (seed, sample) not already in `out` and append its record."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {r["id"] for r in read_records(out, repair=True)}
    seeds = list(seeds)
    jobs = plan(env_id, seeds, samples, done)
    summary = RolloutSummary(str(out), len(seeds) * samples, len(seeds) * samples - len(jobs), 0)
    runner = runner or run_jobs
    records = runner(jobs, factory, hint=hint, workers=workers, mode=mode, env_kwargs=env_kwargs)
    with _progress(progress, len(jobs), env_id) as advance:
        for record in records:
            append_record(out, record)
            summary.written += 1
            advance(record)
    return summary


class _progress:
    """A rich progress bar with the running pass rate (or nothing, when disabled)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled, self.total, self.label = enabled and total > 0, total, label
        self.passed = self.count = 0

    def __enter__(self) -> Callable[[dict[str, Any]], None]:
        if not self.enabled:
            return lambda record: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[rate]}"), TimeRemainingColumn(), transient=False)
        self.bar.__enter__()
        self.task = self.bar.add_task(self.label, total=self.total, rate="")

        def advance(record: dict[str, Any]) -> None:
            self.count += 1
            self.passed += bool(record.get("passed"))
            self.bar.update(self.task, advance=1, rate=f"pass {self.passed / self.count:.0%}")

        return advance

    def __exit__(self, *exc: Any) -> None:
        if self.enabled:
            self.bar.__exit__(*exc)
