"""Run audited code in a separate process with CPU-time, memory, file-size and wall-clock
limits, and without network: in a new network namespace when the system allows one
(`unshare -n`), otherwise through the child's audit hook alone. Reports which it used."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int = 60
    """CPU time of the child (RLIMIT_CPU)."""
    memory_bytes: int = 3 * 2**30
    """Address space of the child (RLIMIT_AS)."""
    wall_seconds: int = 90
    """Wall-clock time before the child is killed."""


@dataclass(frozen=True)
class Outcome:
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool

    def failure(self, limits: Limits) -> str | None:
        """Why the child did not finish normally, in words (None when it did)."""
        if self.timed_out:
            return f"did not finish within {limits.wall_seconds} s of wall-clock time (an endless loop?)"
        if self.returncode is not None and self.returncode < 0:
            sig = signal.Signals(-self.returncode)
            reason = {signal.SIGXCPU: f"used more than {limits.cpu_seconds} s of CPU (an endless loop?)",
                      signal.SIGKILL: "was killed (out of memory?)",
                      signal.SIGSEGV: "crashed (out of memory?)",
                      signal.SIGXFSZ: "tried to write a file"}.get(sig, f"was killed by {sig.name}")
            return reason
        if self.returncode:
            tail = self.stderr.strip().splitlines()[-1:] or ["no output"]
            if "MemoryError" in self.stderr:
                return f"ran out of memory (limit {limits.memory_bytes // 2**20} MiB)"
            return f"exited with status {self.returncode}: {tail[0][:300]}"
        return None


@functools.cache
def network_isolation() -> str:
    """'netns' when `unshare -n` works here, else 'audit-hook'."""
    exe = shutil.which("unshare")
    if exe:
        try:
            if subprocess.run([exe, "-n", "true"], capture_output=True, timeout=10).returncode == 0:
                return "netns"
        except (OSError, subprocess.SubprocessError):
            pass
    return "audit-hook"


def describe_isolation() -> str:
    if network_isolation() == "netns":
        return "separate process with rlimits, no network (new network namespace), audit hook"
    return ("separate process with rlimits, audit hook refusing network, programs and file writes "
            "(no network namespace available here)")


def _limit(limits: Limits) -> None:  # runs in the child, before exec
    import resource

    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_child(args: list[str], limits: Limits = Limits(), env: dict[str, str] | None = None) -> Outcome:
    """`python -m trace_gym.audit.child ARGS...` under the limits."""
    argv = [sys.executable, "-m", "trace_gym.audit.child", *args]
    if network_isolation() == "netns":
        argv = [shutil.which("unshare") or "unshare", "-n", *argv]
    child_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "HOME": os.environ.get("HOME", "/tmp"),
        **(env or {}),
    }
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=limits.wall_seconds,
                              env=child_env, preexec_fn=lambda: _limit(limits))
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return Outcome(out, err, None, True)
    return Outcome(proc.stdout, proc.stderr, proc.returncode, False)
