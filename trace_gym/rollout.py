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

Episodes are played by the episode driver (`trace_gym.driver`), `workers` in flight at once:
a local model decodes them together (a batched policy), an endpoint policy's turns run in
threads (the server does the work), a policy that computes in Python (oracle, random) takes
them in turn on this thread.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Generator, Iterable
from collections.abc import Set as AbstractSet
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from trace_gym import rates
from trace_gym.driver import EpisodeRequest, PlayedEpisode, episode_id, play
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import loads
from trace_gym.progress import progress_bar

logger = logging.getLogger(__name__)

PolicyFactory = Callable[[], Any]
"""Makes the policy: a turn-by-turn one (`trace_gym.agents.base.Policy`) or a batched one
(`trace_gym.driver.BatchedPolicy`)."""


@dataclass(frozen=True)
class Job:
    """One episode to play: env, seed and sample."""

    env_id: str
    seed: int
    sample: int

    @property
    def id(self) -> str:
        """The episode's record id, `env/split/seed/sample`."""
        return episode_id(self.env_id, self.seed, self.sample)


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
        self.ids: set[str | None] = set()  # None: a record without an id (not one of the driver's)
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


def plan(env_id: str, seeds: Iterable[int], samples: int, done: AbstractSet[str | None]) -> list[Job]:
    """The (seed, sample) episodes whose ids are not in `done`, in seed order."""
    return [job for seed in seeds for sample in range(samples)
            if (job := Job(env_id, seed, sample)).id not in done]


@dataclass
class RolloutSummary:
    """What a rollout did: the episodes it planned, those skipped (already in the file, or
    appended first by another rollout) and those written, with the run's fingerprint."""

    path: str
    planned: int
    skipped: int
    written: int
    fingerprint: dict[str, Any] | None = None


def rollout(env_id: str, factory: PolicyFactory, seeds: Iterable[int], out: Path, *, samples: int = 1,
            hint: bool = False, workers: int = 1, threaded: bool = False,
            env_kwargs: dict[str, Any] | None = None, progress: bool = True,
            fingerprint: dict[str, Any] | None = None) -> RolloutSummary:
    """Play every (seed, sample) not already in `out` and append its record as soon as its
    episode ends. Refused when `out` holds records of another run (`fingerprint`, by default
    computed from the env, the policy factory, hint and knobs).

    `factory` makes the policy: a batched one (a local model) plays the `workers` episodes in
    flight together; a turn-by-turn one gets one instance per episode in flight, its turns
    taken one after another, or with `threaded` (a policy that waits on a server) in
    `workers` threads so that the requests overlap."""
    from trace_gym.runs import run_fingerprint

    out = Path(out)
    fingerprint = fingerprint or run_fingerprint(env_id, factory, hint=hint, env_kwargs=env_kwargs)
    seeds = list(seeds)
    with RecordFile(out, fingerprint) as records:
        records.read_all()
        jobs = plan(env_id, seeds, samples, records.ids)
        summary = RolloutSummary(str(out), len(seeds) * samples, len(seeds) * samples - len(jobs), 0, fingerprint)
        if not jobs:  # nothing to play: no env, no policy (a local model) is made
            return summary
        episodes = [EpisodeRequest(job.seed, job.sample, hint) for job in jobs]
        start = time.perf_counter()
        # play is a generator function (annotated as returning an Iterator), so it has close()
        played = cast(Generator[PlayedEpisode, None, None],
                      play(episodes, factory, env_id=env_id, env_kwargs=env_kwargs, in_flight=workers,
                           threads=workers if threaded else 0))
        # closing: a failed append ends the episodes still in flight (envs, threads) at once
        with closing(played), _progress(progress, len(jobs), env_id) as advance:
            for episode in played:
                record = episode.record()
                if records.append({**record, "run": fingerprint}):
                    summary.written += 1
                else:  # another rollout into this file got there first
                    summary.skipped += 1
                advance(record)
    by = rates.player(fingerprint.get("policy", {}))
    if by is not None:  # what --dry-run estimates from (the model's start-up counted in)
        rates.record(by, env_id, summary.written, time.perf_counter() - start)
    return summary


class _progress:
    """A rich progress bar with the running pass rate on stderr (or nothing, when disabled or
    where this module's logger does not show INFO)."""

    def __init__(self, enabled: bool, total: int, label: str) -> None:
        self.enabled, self.total, self.label = enabled and total > 0, total, label
        self.passed = self.count = 0

    def __enter__(self) -> Callable[[dict[str, Any]], None]:
        if not self.enabled:
            return lambda record: None
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

        self.bar = progress_bar(logger, TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
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
