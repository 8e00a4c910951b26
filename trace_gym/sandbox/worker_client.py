"""One env worker process, client side (`Worker`): started under the isolation it was given,
spoken to over a pipe in the wire protocol (`trace_gym.sandbox.protocol`), every request
within its wall-clock bound; a worker that overruns it, dies, or breaks the protocol is killed
and marked lost with the reason in words.
"""

from __future__ import annotations

import dataclasses
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from typing import IO, Any, cast

from trace_gym.errors import InvalidConfig
from trace_gym.sandbox.isolation import (
    Isolation,
    IsolationUnavailable,
    Limits,
    apply_limits,
    env_mode,
    worker_command,
)
from trace_gym.sandbox.protocol import (
    KNOWN_ERRORS,
    MAX_ANSWER_BYTES,
    MAX_RUNS,
    STDERR_TAIL,
    RemoteEnvError,
    WorkerLost,
    WorkerTimeout,
    encode,
    read_answer,
    read_run_request,
)


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
        # all three streams were asked as PIPE, so Popen made each: none is None
        self._stdin_pipe = cast(IO[bytes], self.proc.stdin)
        self._stdout_pipe = cast(IO[bytes], self.proc.stdout)
        self._stderr_pipe = cast(IO[bytes], self.proc.stderr)
        self._out = self._stdout_pipe.fileno()
        self._in = self._stdin_pipe.fileno()
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
        data = (encode(request) + "\n").encode()
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
                known = KNOWN_ERRORS.get(error[0])
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
        """Run the command the worker asked for (see `read_run_request`) in the command
        jail, as `workspace.run` runs it in a trusted process, with at most what is left of
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
        from trace_gym.sandbox import workspace

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
            reply: dict[str, Any] = {"ran": {"result": dataclasses.asdict(result), "files": after, "notes": notes}}
        except (IsolationUnavailable, InvalidConfig, OSError, ValueError) as exc:  # it cannot run here
            reply = {"failed": [type(exc).__name__, str(exc)[:4000]]}
        except BaseException:
            self.kill("was stopped: the client failed running a command it asked for")  # it waits for a reply
            raise
        self._send((encode(reply) + "\n").encode(), bound, end)

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
        fd = self._stderr_pipe.fileno()
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
                while self._stderr_size > STDERR_TAIL and len(self._stderr) > 1:
                    self._stderr_size -= len(self._stderr.popleft())
        except OSError:
            return
        finally:
            try:
                self._stderr_pipe.close()
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
        for stream in (self._stdin_pipe, self._stdout_pipe):
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
                self._stdin_pipe.close()  # the worker ends at the end of its input
                self.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill(self.lost)
