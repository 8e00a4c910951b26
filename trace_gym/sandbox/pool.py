"""The client side of env workers: a `WorkerPool` that spreads env instances over a few
worker processes (a training batch of G x K envs shares a handful of processes, not G x K),
and the process's shared pool (`default_pool`).

A worker is a `Worker` (`trace_gym.sandbox.worker_client`: one process under its isolation,
every request within its wall-clock bound, `Limits.request_seconds` and the pool's whole
budget when it has one); what passes between them is the wire protocol, read as hostile
(`trace_gym.sandbox.protocol`). A lost worker is replaced by a fresh one for the next env
that needs one. The protocol's and the worker's names import from here too.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import weakref
from typing import Any

from trace_gym.errors import InvalidConfig
from trace_gym.sandbox.isolation import (
    Limits,
    env_mode,
    resolve,
)
from trace_gym.sandbox.protocol import (  # noqa: F401  (the protocol's names, importable from here as before)
    MAX_ANSWER_BYTES,
    MAX_ARG_CHARS,
    MAX_ARGV,
    MAX_DEPTH,
    MAX_RUNS,
    MAX_STDIN_BYTES,
    EnvWorkerError,
    RemoteEnvError,
    WorkerLost,
    WorkerTimeout,
    deeper_than,
    read_answer,
    read_run_request,
)
from trace_gym.sandbox.worker_client import Worker


class WorkerPool:
    """A few workers, each hosting many env instances. A new instance goes to the least
    loaded live worker that can read its module, or to a new worker while the pool has
    fewer than `size`. A lost worker is replaced on demand. Every worker of a pool hashes
    strings alike (PYTHONHASHSEED 0 unless `env` says otherwise), so an episode does not
    depend on the worker it lands on; the kit's cross-process check sets other values."""

    def __init__(self, size: int = 1, limits: Limits = Limits(), isolation: str | None = None,
                 require_isolation: bool = False, env: dict[str, str] | None = None) -> None:
        if not (isinstance(size, int) and size >= 1):
            raise InvalidConfig(f"WorkerPool size={size!r} is invalid: must be an integer >= 1")
        self.size, self.limits, self.env = size, limits, {"PYTHONHASHSEED": "0", **(env or {})}
        self.mode = isolation or env_mode()
        self.require_isolation = require_isolation
        self.isolation = resolve(self.mode, require_isolation)
        self.deadline = time.monotonic() + limits.wall_seconds if limits.wall_seconds else None
        self.workers: list[Worker] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()
        WorkerPool._made += 1
        self.token = f"{self._pid}-{WorkerPool._made}"
        _LIVE[self.token] = self

    _made = 0

    @staticmethod
    def find(token: str | None) -> WorkerPool | None:
        """The live pool of this process with that token (an EnvRef read back from JSON
        keeps its pool)."""
        return _LIVE.get(token) if token else None

    def worker_for(self, path: str | None) -> Worker:
        """A live worker that can load `path` (None: a trusted module by name)."""
        with self._lock:
            self._check_process()
            self.workers = [w for w in self.workers if w.lost is None]
            fits = [w for w in self.workers if path is None or w.can_read(path)]
            if fits and (len(self.workers) >= self.size or min(w.instances for w in fits) == 0):
                return min(fits, key=lambda w: w.instances)
            if len(self.workers) >= self.size:  # full, none can read the file: replace the idlest
                idle = min(self.workers, key=lambda w: w.instances)
                if idle.instances == 0:
                    self.workers.remove(idle)
                    idle.close()
            readable: tuple[str, ...] = (path,) if path else ()
            if self.isolation.sandboxed and path is not None:
                # a new worker reads the files its older siblings read, so that it can take any of them
                readable = tuple({path, *(p for w in self.workers for p in w.readable)})
            worker = Worker(self.isolation, self.limits, readable, self.env, self.deadline)
            self.workers.append(worker)
            return worker

    def _check_process(self) -> None:
        if os.getpid() != self._pid:
            raise EnvWorkerError("a WorkerPool cannot be used from a forked process; make one in the child")

    def spawn(self, env: dict[str, str]) -> WorkerPool:
        """A new pool of one worker with the same limits and isolation and extra environment
        variables (a fresh process for the determinism check)."""
        pool = WorkerPool(1, self.limits, self.mode, self.require_isolation, {**self.env, **env})
        pool.deadline = self.deadline
        return pool

    def close(self) -> None:
        """Close every worker (nothing in a forked child, whose workers are its parent's)."""
        with self._lock:
            if os.getpid() != self._pid:
                return
            for worker in self.workers:
                worker.close()
            self.workers = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


_LIVE: weakref.WeakValueDictionary[str, WorkerPool] = weakref.WeakValueDictionary()
_DEFAULT: dict[str, WorkerPool] = {}


def default_pool() -> WorkerPool:
    """The process's shared pool for generated envs made through the registry: as many
    workers as TRACE_GYM_ENV_WORKERS says (default 2), no CPU limit (a worker lives as long
    as the run), 3 GiB of memory each, 30 s per request."""
    pool = _DEFAULT.get("pool")
    if pool is None or pool._pid != os.getpid():
        size = os.environ.get("TRACE_GYM_ENV_WORKERS", "2")
        if not size.isdigit() or int(size) < 1:
            raise InvalidConfig(f"TRACE_GYM_ENV_WORKERS={size!r} is invalid: must be an integer >= 1")
        pool = _DEFAULT["pool"] = WorkerPool(int(size))
    return pool


def _forget_in_child() -> None:
    # A forked child shares the parent's pipes: it must start its own workers.
    _DEFAULT.clear()


def _close_default() -> None:
    pool = _DEFAULT.get("pool")
    if pool is not None:
        pool.close()


os.register_at_fork(after_in_child=_forget_in_child)
atexit.register(_close_default)
