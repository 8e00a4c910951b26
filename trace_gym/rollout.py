"""Rollouts: play a policy on many seeds and append one trajectory record per episode.

The output is JSON Lines (the record format of `trace_gym.trajectory`). Each finished
episode is appended as one line, under an exclusive lock on the file, the write repeated
until every byte is out, so a crash leaves at most one partial last line; rerunning the same
command drops that line and plays only the episodes that are missing (by record id
`env/split/seed/sample`). An uninterrupted run and a resumed one give the same set of
episodes, each exactly once, and so do two rollouts appending to one file at the same time:
each reads what the other appended before it writes, and skips an episode already there.

Every record carries its run's fingerprint (`run`: env sha256 and knobs, hint, policy and
its model, adapter and sampling settings; `trace_gym.runs`). Appending to a file that holds
records of another run is refused, saying what differs.

Parallelism follows the backend: worker processes for policies that compute in Python
(oracle, random), threads for endpoint policies (the server does the work), batched
generation for a local model.
"""

from __future__ import annotations

import fcntl
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
    """The complete records of a JSONL file. Every record is written with its newline under
    the file's lock, so text after the last newline is a write cut short: it is ignored, and
    with `repair` cut off the file. A malformed complete line is an error naming the line."""
    if not path.exists():
        return []
    if repair:
        with RecordFile(path) as records:
            return records.read_all()
    return _parse_lines(path.read_bytes().rpartition(b"\n")[0], path, 1)


def _parse_lines(data: bytes, path: Path, first_line: int) -> list[dict[str, Any]]:
    records = []
    for number, line in enumerate(data.split(b"\n"), first_line):
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


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is out (a write may take fewer than it was given)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class RecordFile:
    """A JSONL file of records, appended to under an exclusive lock (fcntl.flock), so that
    concurrent writers neither interleave nor duplicate: before each append the writer
    reads what others appended since it last looked, and skips a record whose id is there."""

    def __init__(self, path: Path, fingerprint: dict[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.fingerprint = fingerprint
        self.ids: set[str] = set()
        self._offset = 0
        self._lines = 1

    def __enter__(self) -> RecordFile:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        return self

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)

    def _catch_up(self) -> list[dict[str, Any]]:
        """Read what was appended since the last look (the lock is held): repair a tail a
        crashed writer cut short, note the ids, check the fingerprints."""
        size = os.fstat(self.fd).st_size
        if size <= self._offset:
            return []
        data = os.pread(self.fd, size - self._offset, self._offset)
        complete, newline, tail = data.rpartition(b"\n")
        if tail:  # a write cut short by a crash: no live writer holds the lock
            os.ftruncate(self.fd, self._offset + len(complete) + len(newline))
        records = _parse_lines(complete, self.path, self._lines)
        self._offset += len(complete) + len(newline)
        self._lines += complete.count(b"\n") + bool(newline)
        for record in records:
            self._check(record)
            self.ids.add(record.get("id"))
        return records

    def _check(self, record: dict[str, Any]) -> None:
        if self.fingerprint is None:
            return
        run = record.get("run")
        if run != self.fingerprint:
            from trace_gym.runs import differences

            what = ("; ".join(differences(run, self.fingerprint)[:8]) if isinstance(run, dict) else
                    "it holds records without a run fingerprint (imported, or written by an older version)")
            raise TraceGymError(f"{self.path} holds episodes of another run ({what}); write to another --out, "
                                "or resume with the settings it was written with")

    def read_all(self) -> list[dict[str, Any]]:
        """Every complete record (a partial tail is cut off), under the lock."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            self._offset, self._lines, self.ids = 0, 1, set()
            return self._catch_up()
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def append(self, record: dict[str, Any]) -> bool:
        """Append one record as one line; False when its id is already in the file."""
        line = (json.dumps(record) + "\n").encode()
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            self._catch_up()
            if record.get("id") in self.ids:
                return False
            _write_all(self.fd, line)
            os.fsync(self.fd)
            self._offset += len(line)
            self._lines += 1
            self.ids.add(record.get("id"))
            return True
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)


def append_record(path: Path, record: dict[str, Any]) -> None:
    """Append one record as one line, under the file's lock (a partial tail a crash left is
    cut off first)."""
    line = (json.dumps(record) + "\n").encode()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = os.pread(fd, size, 0)
            os.ftruncate(fd, data.rfind(b"\n") + 1)
        _write_all(fd, line)
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
    fingerprint: dict[str, Any] | None = None


def rollout(env_id: str, factory: PolicyFactory, seeds: Iterable[int], out: Path, *, samples: int = 1,
            hint: bool = False, workers: int = 1, mode: str = "process",
            env_kwargs: dict[str, Any] | None = None, progress: bool = True,
            runner: Callable[..., Iterator[dict[str, Any]]] | None = None,
            fingerprint: dict[str, Any] | None = None) -> RolloutSummary:
    """Play every (seed, sample) not already in `out` and append its record. Refused when
    `out` holds records of another run (`fingerprint`, by default computed from the env,
    the policy factory, hint and knobs)."""
    from trace_gym.runs import run_fingerprint

    out = Path(out)
    fingerprint = fingerprint or run_fingerprint(env_id, factory, hint=hint, env_kwargs=env_kwargs)
    seeds = list(seeds)
    with RecordFile(out, fingerprint) as records:
        records.read_all()
        jobs = plan(env_id, seeds, samples, records.ids)
        summary = RolloutSummary(str(out), len(seeds) * samples, len(seeds) * samples - len(jobs), 0, fingerprint)
        runner = runner or run_jobs
        played = runner(jobs, factory, hint=hint, workers=workers, mode=mode, env_kwargs=env_kwargs)
        with _progress(progress, len(jobs), env_id) as advance:
            for record in played:
                if records.append({**record, "run": fingerprint}):
                    summary.written += 1
                else:  # another rollout into this file got there first
                    summary.skipped += 1
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
