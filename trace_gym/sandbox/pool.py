"""The client side of env workers: one `Worker` per process, and a `WorkerPool` that
spreads env instances over a few of them (a training batch of G x K envs shares a handful
of processes, not G x K).

Every request has a wall-clock bound (`Limits.request_seconds`, and the pool's whole
budget when it has one); a worker that overruns it, dies, or answers something that is not
the protocol is killed and marked lost with the reason in words. The pool starts a fresh
worker for the next env that needs one.

Every answer is hostile until read: at most `MAX_ANSWER_BYTES` a line, JSON nested at most
`MAX_DEPTH` deep, and no number that is not finite (NaN, Infinity, 1e999); a worker that
breaks any of these is killed, and what it sent is never used.

So is a command of the coding sandbox that a worker asks the client to run in the middle of
a request (`{"run": ...}` in place of an answer; see trace_gym.sandbox.host.Host.run_command):
it is run here, in the sandbox, only when `read_run_request` finds it within bounds, at most
`MAX_RUNS` times a request and within the request's wall-clock bound; otherwise the worker
is killed.
"""

from __future__ import annotations

import atexit
import base64
import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
import weakref
from collections import deque
from typing import Any

from trace_gym.errors import EpisodeError, InvalidConfig, TraceGymError
from trace_gym.sandbox.isolation import (
    Isolation,
    IsolationUnavailable,
    Limits,
    apply_limits,
    env_mode,
    resolve,
    worker_command,
)

_encode = json.JSONEncoder(separators=(",", ":")).encode
MAX_ANSWER_BYTES = 4 * 2**20
"""The longest answer line a worker may send (an episode's answers are a few kilobytes)."""
MAX_DEPTH = 64
"""The deepest nesting of lists and objects an answer may have (a tool schema nests about 8)."""
_STDERR_TAIL = 8192
MAX_RUNS = 64
"""The most commands a worker may have the client run within one request (a coding step
runs one or two)."""
MAX_ARGV = 64
"""The most words of a command's argv; each at most MAX_ARG_CHARS characters."""
MAX_ARG_CHARS = 4096
MAX_STDIN_BYTES = 1 << 20
"""The most a command may be fed on stdin."""


class _NotFinite(ValueError):
    pass


def _finite(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # inf or nan
        raise _NotFinite(text)
    return value


def _not_a_number(text: str) -> Any:
    raise _NotFinite(text)


_scan_answer = json.JSONDecoder(parse_float=_finite, parse_constant=_not_a_number).scan_once


def deeper_than(value: Any, limit: int) -> bool:
    """True when lists and dicts nest more than `limit` deep in `value` (a walk with its own
    stack: no recursion on data from outside)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if type(item) is dict else item
        for child in children:
            if type(child) is list or type(child) is dict:
                stack.append((child, depth + 1))
    return False


def read_answer(line: bytes) -> Any:
    """One answer line as a value; ValueError says why it is refused (not one JSON value, a
    number that is not finite, nested deeper than MAX_DEPTH)."""
    try:
        text = line.decode()
        value, end = _scan_answer(text, 0)
    except _NotFinite as exc:
        raise ValueError(f"a number that is not finite ({str(exc)[:40]})") from None
    except (UnicodeDecodeError, StopIteration, RecursionError, ValueError):
        raise ValueError("an answer that is not JSON") from None
    if end != len(text):
        raise ValueError("an answer that is not one JSON value")
    if (type(value) is list or type(value) is dict) and line.count(b"[") + line.count(b"{") > MAX_DEPTH \
            and deeper_than(value, MAX_DEPTH):
        raise ValueError(f"an answer nested deeper than {MAX_DEPTH}")
    return value


def read_run_request(message: Any) -> tuple[dict[str, str], list[str], bytes, Any, bool]:
    """A worker's `{"run": {files, argv, stdin, limits, keep}}` as the arguments of
    `trace_gym.coding.workspace.run`; ValueError says why it is refused. The files are a
    repository as `run` keeps one (canonical relative paths, at most `REPO_KEEP_BYTES` of
    text and `MAX_FILES` files); argv is 1 to MAX_ARGV words; stdin (base64) at most
    MAX_STDIN_BYTES; every limit at most `CommandLimits()`'s: the worker may ask for less,
    never more."""
    from trace_gym.coding import workspace  # only once a worker asks: envs that run nothing pay nothing
    from trace_gym.coding.sandbox import CommandLimits

    body = message.get("run") if type(message) is dict and len(message) == 1 else None
    if type(body) is not dict or body.keys() != {"files", "argv", "stdin", "limits", "keep"}:
        raise ValueError("a command request that is not {files, argv, stdin, limits, keep}")
    files, argv, stdin, limits, keep = body["files"], body["argv"], body["stdin"], body["limits"], body["keep"]

    if type(files) is not dict or len(files) > workspace.MAX_FILES:
        raise ValueError(f"a command request whose files are not a map of at most {workspace.MAX_FILES} paths")
    total, folders = 0, set()
    for path, text in files.items():
        if workspace.clean_path(path) != path or path == "." or type(text) is not str:
            raise ValueError(f"a command request with a file path that is not inside the repository, "
                             f"or not canonical, or not text: {path!r:.100}")
        try:
            total += len(text.encode())
        except UnicodeEncodeError:
            raise ValueError(f"a command request with a file that is not UTF-8 text: {path!r:.100}") from None
        if total > workspace.REPO_KEEP_BYTES:
            raise ValueError(f"a command request with more than {workspace.REPO_KEEP_BYTES >> 20} MiB of files")
        parts = path.split("/")
        folders.update("/".join(parts[:i]) for i in range(1, len(parts)))
    clash = folders & files.keys()
    if clash:  # a path both a file and a folder: no directory can hold both
        raise ValueError(f"a command request with a path that is a file and a folder: {min(clash)!r:.100}")

    if (type(argv) is not list or not 1 <= len(argv) <= MAX_ARGV
            or not all(type(a) is str and len(a) <= MAX_ARG_CHARS and "\0" not in a for a in argv)):
        raise ValueError(f"a command request whose argv is not 1 to {MAX_ARGV} words of at most "
                         f"{MAX_ARG_CHARS} characters")

    if type(stdin) is not str or len(stdin) > (MAX_STDIN_BYTES + 2) // 3 * 4:
        raise ValueError(f"a command request whose stdin is not base64 of at most {MAX_STDIN_BYTES >> 20} MiB")
    try:
        data = base64.b64decode(stdin, validate=True)
    except ValueError:  # binascii.Error
        raise ValueError("a command request whose stdin is not base64") from None

    most = CommandLimits()
    names = [f.name for f in dataclasses.fields(CommandLimits)]
    if type(limits) is not dict or sorted(limits) != sorted(names):
        raise ValueError(f"a command request whose limits are not {{{', '.join(names)}}}")
    try:
        asked = CommandLimits(**limits)
    except InvalidConfig as exc:
        raise ValueError(f"a command request with invalid limits ({str(exc)[:200]})") from None
    for name in names:
        if getattr(asked, name) > getattr(most, name):
            raise ValueError(f"a command request for more than the default limits ({name}={getattr(asked, name)!r}, "
                             f"at most {getattr(most, name)!r})")

    if type(keep) is not bool:
        raise ValueError("a command request whose keep is not a bool")
    return files, argv, data, asked, keep


class EnvWorkerError(TraceGymError):
    """Something went wrong on the worker side of an env proxy."""


class WorkerLost(EnvWorkerError):
    """The worker process is gone (killed, crashed, out of memory, over a limit, or broke
    the protocol); `reason` says which, in words that complete "the worker ..."."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"the env worker {reason}")


class WorkerTimeout(WorkerLost):
    """A request took longer than its wall-clock bound; the worker was killed."""


class RemoteEnvError(EnvWorkerError):
    """The env raised an exception in the worker (`type_name`, `message`)."""

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name, self.message = type_name, message
        super().__init__(f"{type_name}: {message}")


# trace_gym's own errors keep their class across the boundary (a caller catches
# InvalidConfig from a bad reset option whichever side raised it).
_KNOWN_ERRORS = {"InvalidConfig": InvalidConfig, "EpisodeError": EpisodeError}


class Worker:
    """One worker process and the pipe to it. Thread-safe: requests are serialised."""

    def __init__(self, isolation: Isolation, limits: Limits, readable: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, deadline: float | None = None) -> None:
        self.isolation, self.limits, self.deadline = isolation, limits, deadline
        self.readable = set(readable)
        self.lock = threading.Lock()
        self.instances = 0
        self.dropped: list[int] = []
        """Instances whose proxies were garbage-collected: closed with the next request."""
        self.lost: str | None = None
        self.answer_bytes = 0
        """The length of the last answer line (a caller bounds what an episode may send)."""
        self._buffer = bytearray()
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        command = worker_command(isolation, tuple(sorted(self.readable)), env)
        self._cleanup = command.cleanup
        # Its own session: killing the worker's process group also ends what it started there
        # (under bubblewrap, everything it starts dies with its PID namespace anyway).
        self.proc = subprocess.Popen(command.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=command.env, cwd=command.cwd,
                                     preexec_fn=lambda: apply_limits(limits, command.entry), close_fds=True,
                                     start_new_session=True)
        self._out = self.proc.stdout.fileno()
        self._in = self.proc.stdin.fileno()
        self._poll = select.poll()
        self._poll.register(self._out, select.POLLIN | select.POLLHUP | select.POLLERR)
        os.set_blocking(self._in, False)  # see _send
        self._write_poll = select.poll()
        self._write_poll.register(self._in, select.POLLOUT | select.POLLERR)
        self._stop_drain = threading.Event()
        self._drain = threading.Thread(target=self._drain_stderr, daemon=True)
        self._drain.start()

    def can_read(self, path: str) -> bool:
        """True when the worker can load the file at `path` (a sandboxed worker sees only
        the files it was started with)."""
        return not self.isolation.sandboxed or path in self.readable

    # -- requests --------------------------------------------------------------------------

    def call(self, request: dict[str, Any], timeout: float | None = None) -> Any:
        """Send one request and return its answer's value; raises WorkerLost (the worker is
        gone), WorkerTimeout, or RemoteEnvError (the env raised)."""
        if self.dropped:
            dropped, self.dropped = self.dropped, []
            request = {**request, "drop": dropped}
        data = (_encode(request) + "\n").encode()
        with self.lock:
            if self.lost is not None:
                raise WorkerLost(self.lost)
            bound = self._bound(timeout)
            end = time.monotonic() + bound  # commands the worker has run for it count too
            self._send(data, bound, end)
            runs = 0
            while True:
                line = self._read_line(bound, end)
                try:
                    answer = read_answer(line)
                except ValueError as exc:
                    self.kill(f"sent {exc}")
                    raise WorkerLost(self.lost or "") from None
                if type(answer) is not dict or "run" not in answer:
                    break
                runs += 1
                self._run_for_worker(answer, runs, bound, end)
        self.answer_bytes = len(line)
        if type(answer) is dict:
            if "ok" in answer:
                return answer["ok"]
            error = answer.get("error")
            if type(error) is list and len(error) == 2 and all(type(x) is str for x in error):
                known = _KNOWN_ERRORS.get(error[0])
                if known is not None:
                    raise known(error[1])
                raise RemoteEnvError(error[0], error[1])
            if type(answer.get("fatal")) is str:
                self._finish(answer["fatal"][:300])
                raise WorkerLost(self.lost or "")
        self.kill("sent an answer outside the protocol")
        raise WorkerLost(self.lost or "")

    def _bound(self, timeout: float | None) -> float:
        bound = self.limits.request_seconds if timeout is None else timeout
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.kill(f"did not finish within the {self.limits.wall_seconds} s wall-clock budget")
                raise WorkerTimeout(self.lost or "")
            bound = min(bound, left)
        return bound

    def _run_for_worker(self, message: Any, runs: int, bound: float, end: float) -> None:
        """Run the command the worker asked for (see `read_run_request`) in the coding
        sandbox, as `workspace.run` runs it in a trusted process, with at most what is left of
        the request's time, and send the reply: `{"ran": {result, files, notes}}`, or
        `{"failed": [type name, message]}` when it cannot run here. A request out of bounds
        kills the worker (WorkerLost)."""
        if runs > MAX_RUNS:
            self.kill(f"asked for more than {MAX_RUNS} commands in one request")
            raise WorkerLost(self.lost or "")
        try:
            files, argv, stdin, limits, keep = read_run_request(message)
        except ValueError as exc:
            self.kill(f"sent {exc}")
            raise WorkerLost(self.lost or "") from None
        from trace_gym.coding import workspace

        left = end - time.monotonic()
        if left <= 0:
            raise self._timeout(bound)
        limits = dataclasses.replace(limits, wall_seconds=min(limits.wall_seconds, left))
        try:
            if self.isolation.sandboxed and env_mode() != "bubblewrap":
                # the fallback is no boundary: a worker's commands are never less isolated than it
                raise IsolationUnavailable("a worker under bubblewrap runs commands only under bubblewrap, and "
                                           "TRACE_GYM_ISOLATION asks for the fallback")
            result, after, notes = workspace.run(files, argv, stdin, limits, keep)
            reply = {"ran": {"result": dataclasses.asdict(result), "files": after, "notes": notes}}
        except (IsolationUnavailable, InvalidConfig, OSError, ValueError) as exc:  # it cannot run here
            reply = {"failed": [type(exc).__name__, str(exc)[:4000]]}
        except BaseException:
            self.kill("was stopped: the client failed running a command it asked for")  # it waits for a reply
            raise
        self._send((_encode(reply) + "\n").encode(), bound, end)

    def _send(self, data: bytes, bound: float, end: float) -> None:
        """Write to the worker's input (non-blocking) before `end`: a worker that stops
        reading cannot hold the client."""
        view = memoryview(data)
        try:
            while view:
                try:
                    view = view[os.write(self._in, view):]
                except BlockingIOError:
                    left = end - time.monotonic()
                    if left <= 0 or not self._write_poll.poll(left * 1000):
                        raise self._timeout(bound) from None
        except OSError:
            raise self._gone() from None

    def _timeout(self, bound: float) -> WorkerTimeout:
        """Kill the worker for overrunning the request's bound (or the pool's budget)."""
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self.kill(f"did not finish within the {self.limits.wall_seconds} s wall-clock budget")
        else:
            self.kill(f"did not answer within {bound:.3g} s (an endless loop?)")
        return WorkerTimeout(self.lost or "")

    def _read_line(self, bound: float, end: float) -> bytes:
        buffer = self._buffer
        start = 0
        while True:
            newline = buffer.find(b"\n", start)
            if 0 <= newline <= MAX_ANSWER_BYTES:
                line = bytes(buffer[:newline])
                del buffer[:newline + 1]
                return line
            start = len(buffer)
            if newline > MAX_ANSWER_BYTES or start > MAX_ANSWER_BYTES:
                self.kill(f"sent an answer longer than {MAX_ANSWER_BYTES // 2**20} MiB")
                raise WorkerLost(self.lost or "")
            left = end - time.monotonic()
            if left <= 0 or not self._poll.poll(left * 1000):
                raise self._timeout(bound)
            chunk = os.read(self._out, 1 << 20)
            if not chunk:
                raise self._gone()
            buffer += chunk

    def _gone(self) -> WorkerLost:
        """The pipe closed: wait for the exit status and say why."""
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill("closed its pipe")
            return WorkerLost(self.lost or "")
        self._finish(self._exit_reason(code))
        return WorkerLost(self.lost or "")

    def _exit_reason(self, code: int) -> str:
        # bubblewrap reports a child killed by signal N as exit status 128 + N
        sig = -code if code < 0 else (code - 128 if self.isolation.sandboxed and 128 < code < 160 else None)
        if sig is not None:
            try:
                name = signal.Signals(sig)
            except ValueError:
                return f"was killed by signal {sig}"
            cpu = self.limits.cpu_seconds
            return {signal.SIGXCPU: f"used more than {cpu} s of CPU (an endless loop?)",
                    signal.SIGKILL: "was killed (out of memory?)",
                    signal.SIGSEGV: "crashed (out of memory?)",
                    signal.SIGXFSZ: "tried to write a file"}.get(name, f"was killed by {name.name}")
        tail = self.stderr_tail().strip().splitlines()
        if "MemoryError" in self.stderr_tail():
            return f"ran out of memory (limit {self.limits.memory_bytes // 2**20} MiB)"
        return f"exited with status {code}" + (f": {tail[-1][:300]}" if tail else "")

    # -- the process -------------------------------------------------------------------------

    def _drain_stderr(self) -> None:
        """Keep the last few kilobytes of the worker's stderr (a full pipe would block it).
        Polls, so that it stops when told even if a program the worker started still holds
        the pipe open; it alone closes the pipe."""
        fd = self.proc.stderr.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:
            while not self._stop_drain.is_set():
                if not poll.poll(100):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    return
                self._stderr.append(chunk)
                self._stderr_size += len(chunk)
                while self._stderr_size > _STDERR_TAIL and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())
        except OSError:
            return
        finally:
            try:
                self.proc.stderr.close()
            except OSError:
                pass

    def stderr_tail(self) -> str:
        """The last few kilobytes the worker wrote to stderr, as text."""
        return b"".join(self._stderr).decode(errors="replace")

    def kill(self, reason: str) -> None:
        """End the worker and everything it started (under bubblewrap they die with its PID
        namespace; under the fallback, with its process group)."""
        if self.lost is None:
            self.lost = reason
        if self.proc.poll() is None:
            self.proc.kill()
        self._kill_group()
        self._finish(self.lost)

    def _kill_group(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _finish(self, reason: str) -> None:
        if self.lost is None:
            self.lost = reason
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._kill_group()
        self._drain.join(timeout=2)  # the process is gone: its stderr ends (or the drain is told to stop)
        self._stop_drain.set()
        self._drain.join(timeout=1)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        if self._cleanup:
            shutil.rmtree(self._cleanup, ignore_errors=True)
            self._cleanup = None

    def close(self) -> None:
        """End the worker: close its input and wait a little for it to exit, then kill
        whatever is left."""
        if self.lost is None:
            self.lost = "was closed"
            try:
                self.proc.stdin.close()  # the worker ends at the end of its input
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill(self.lost)


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
            readable = (path,) if path else ()
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
