"""How an env worker process is isolated from the machine.

Generated code runs under **bubblewrap** (`bwrap`, Debian package `bubblewrap`) unless the
fallback is asked for by name: the worker runs in new user, network, PID, IPC, UTS and
cgroup namespaces as an unprivileged user with no capabilities (host uid 65534 when
trace-gym runs as root: `trace_gym.sandbox.hostuser`), /proc/sys read-only; it sees the
interpreter, the shared libraries, site-packages and trace_gym's own sources read-only, the
module under audit read-only, and nothing else of the file system; its only writable path is a private
tmpfs at /tmp. It dies with its parent, and every program it starts lives in its PID
namespace, so nothing it started outlives it. The process limits below apply on top. (bwrap's
command line is built by `trace_gym.sandbox.bwrap`, as the command jail's is.)

Where bubblewrap cannot run, making a worker raises `IsolationUnavailable`, saying how to
install it. The **fallback** (mode 'fallback': `--isolation fallback` or
`TRACE_GYM_ISOLATION=fallback`) runs only when asked for: a separate process in its own
session with the same limits, killed with its parent, a new network namespace when
`unshare -n` works, and an audit hook (PEP 578) that refuses sockets, programs and file
writes made through Python's own functions. It is not a boundary: code that reaches a C
function without an audit event (`_posixsubprocess.fork_exec`, a program it starts) passes
the hook, reads what the user can read, and a program that leaves the worker's session
outlives it. The audit lock records the isolation an env was audited under, and an entry
made under the fallback holds only where the fallback is asked for again.

Limits, in both levels: CPU time (RLIMIT_CPU, optional: a training worker lives long),
address space (RLIMIT_AS), no file writes (RLIMIT_FSIZE 0), no core dumps; a wall-clock
bound per request is the caller's (`trace_gym.sandbox.pool`).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.sandbox import bwrap, hostuser

MODES = ("bubblewrap", "fallback")
INSTALL_HINT = ("install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap), or, knowing that it is "
                "not a boundary, ask for the fallback isolation by name: --isolation fallback or "
                "TRACE_GYM_ISOLATION=fallback")
WORKER_MODULE = "trace_gym.sandbox.worker"


class IsolationUnavailable(TraceGymError):
    """Bubblewrap cannot run here and the fallback was not asked for (or was refused by
    `require`); the message says why and how to install it."""


@dataclass(frozen=True)
class Limits:
    """Resource limits of one worker process."""

    cpu_seconds: int | None = None
    """CPU time of the whole worker (RLIMIT_CPU); None for no limit (a long-lived worker
    of a rollout or a training run, guarded by the per-request timeout instead)."""
    memory_bytes: int = 3 * 2**30
    """Address space of the worker (RLIMIT_AS)."""
    request_seconds: float = 30.0
    """Wall-clock time one request (a reset, a step, loading the module) may take; past it
    the worker is killed."""
    wall_seconds: float | None = None
    """Wall-clock budget of the whole pool (an audit); None for no budget."""

    def __post_init__(self) -> None:
        for name in ("cpu_seconds", "wall_seconds"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise InvalidConfig(f"Limits.{name}={value!r} is invalid: must be a positive number or None")
        if not (isinstance(self.memory_bytes, int) and self.memory_bytes >= 2**28):
            raise InvalidConfig(f"Limits.memory_bytes={self.memory_bytes!r} is invalid: must be an integer >= 2**28")
        if not (isinstance(self.request_seconds, (int, float)) and self.request_seconds > 0):
            raise InvalidConfig(f"Limits.request_seconds={self.request_seconds!r} is invalid: must be a positive number")


@dataclass(frozen=True)
class Isolation:
    """What a worker gets: the mode used, and why bubblewrap is not, when it is not."""

    mode: str
    """'bubblewrap' or 'fallback' (what the workers actually run under)."""
    network_namespace: bool
    """True when the worker has no network by a namespace (always under bubblewrap)."""
    reason: str = ""
    """Why bubblewrap is not used, when it is not."""

    @property
    def sandboxed(self) -> bool:
        """True under bubblewrap."""
        return self.mode == "bubblewrap"

    def describe(self) -> str:
        """One line for reports: what the worker is isolated by, and for the fallback why
        bubblewrap is not used and what the fallback does not stop."""
        if self.sandboxed:
            return ("bubblewrap sandbox: new user, network, PID, IPC, UTS and cgroup namespaces, read-only interpreter "
                    "and libraries, private tmpfs, no capabilities; rlimits; audit hook")
        net = "no network (new network namespace)" if self.network_namespace else "network not namespaced"
        return (f"FALLBACK without bubblewrap ({self.reason}): separate process with rlimits, {net}, audit "
                "hook refusing sockets, programs and file writes made through Python")


def resolve(mode: str = "bubblewrap", require: bool = False) -> Isolation:
    """The isolation a worker started now gets. Mode 'bubblewrap' (the default) raises
    IsolationUnavailable, saying why and how to install it, where bubblewrap cannot run;
    'fallback' is the fallback isolation, refused with `require`."""
    if mode not in MODES:
        raise InvalidConfig(f"isolation mode {mode!r} is invalid; allowed: {', '.join(MODES)} (the fallback "
                            "runs only when asked for by name)")
    if mode == "fallback":
        if require:
            raise IsolationUnavailable("isolation is required, and the fallback isolation was asked for")
        return Isolation("fallback", _unshare_works(), "fallback asked for")
    ok, why = bubblewrap_status()
    if ok:
        return Isolation("bubblewrap", True)
    raise IsolationUnavailable(f"generated env code runs only under bubblewrap, which cannot run here ({why}): "
                               f"{INSTALL_HINT}")


def env_mode() -> str:
    """The mode named by TRACE_GYM_ISOLATION (default 'bubblewrap')."""
    mode = os.environ.get("TRACE_GYM_ISOLATION", "bubblewrap")
    if mode not in MODES:
        raise InvalidConfig(f"TRACE_GYM_ISOLATION={mode!r} is invalid; allowed: {', '.join(MODES)}")
    return mode


@functools.cache
def bubblewrap_status() -> tuple[bool, str]:
    """(True, '') when bubblewrap can start a worker here, else (False, why), found by
    starting the interpreter in the exact sandbox a worker gets."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False, "bwrap is not installed (Debian package: bubblewrap)"
    try:
        prefix, entry = _bwrap_prefix(exe, (), _child_env({}))
        argv = [*prefix, sys.executable, "-c", "import trace_gym.sandbox.worker"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=_child_env({}),
                              preexec_fn=None if entry is None else functools.partial(hostuser.enter, entry))
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"bwrap could not be started ({exc})"
    if proc.returncode != 0:
        detail = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return False, f"bwrap failed: {detail[:300]}"
    return True, ""


@functools.cache
def _unshare_works() -> bool:
    exe = shutil.which("unshare")
    if exe is None:
        return False
    try:
        return subprocess.run([exe, "-n", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def readable_paths() -> list[str]:
    """What a sandboxed worker may read: the interpreter and its standard library, the
    virtual environment, every import path, and trace_gym's own sources (an editable install
    keeps them outside site-packages)."""
    paths = {sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix,
             str(Path(sys.executable).resolve().parent)}
    paths.update(p for p in sys.path if p and os.path.isabs(p))
    for package in ("trace_gym", "trace_gym.generated_envs"):
        spec = importlib.util.find_spec(package)
        if spec is not None and spec.submodule_search_locations:
            paths.update(spec.submodule_search_locations)
    existing = sorted({str(Path(p).resolve()) for p in paths if os.path.exists(p)})
    # a path inside another bound path is bound with it
    return [p for p in existing if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in existing)]


_SYSTEM_DIRS = ("/usr/lib", "/usr/lib64", "/usr/lib32", "/usr/libexec")
_TOP_LINKS = ("/lib", "/lib64", "/lib32")


def _mounts(extra_readable: tuple[str, ...]) -> list[bwrap.Mount]:
    """What a worker's file system holds: a private /tmp, the system's shared libraries, and
    read-only what it may read (`readable_paths`, and `extra_readable`)."""
    mounts = [bwrap.tmpfs("/tmp")]
    # The shared libraries the interpreter and numpy link against; no /usr/bin, no shell.
    mounts += [bwrap.ro_bind(path) for path in _SYSTEM_DIRS if os.path.isdir(path)]
    for path in _TOP_LINKS:
        if os.path.islink(path):
            mounts.append(bwrap.symlink(os.readlink(path), path))
        elif os.path.isdir(path):
            mounts.append(bwrap.ro_bind(path))
    if os.path.exists("/etc/ld.so.cache"):
        mounts.append(bwrap.ro_bind("/etc/ld.so.cache"))
    mounts += [bwrap.ro_bind(path) for path in [*readable_paths(), *extra_readable]]
    return mounts


def _bwrap_prefix(exe: str, extra_readable: tuple[str, ...],
                  env: dict[str, str]) -> tuple[list[str], hostuser.Entry | None]:
    """bwrap and its options for a worker (`bwrap.command_line`: in /tmp, with `env` as its
    whole environment), and what the child does before it when the caller is root (None when
    it is not)."""
    return bwrap.command_line(exe, _mounts(extra_readable), env=env, chdir="/tmp")


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p and os.path.isabs(p)),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "HOME": "/tmp",
        **extra,
    }


@dataclass(frozen=True)
class Command:
    """How to start one worker: argv, environment, working directory, and what to clean."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    cleanup: str | None = None
    """A temporary directory to remove once the worker has ended (fallback only)."""
    entry: hostuser.Entry | None = None
    """What the child does before it execs bwrap when the caller is root (`hostuser.enter`)."""


def worker_command(isolation: Isolation, readable: tuple[str, ...] = (), env: dict[str, str] | None = None) -> Command:
    """The command that starts a worker under `isolation`; `readable` are extra files the
    worker must read (the modules it loads)."""
    python = [sys.executable, "-m", WORKER_MODULE]
    child_env = _child_env(env or {})
    if isolation.sandboxed:
        argv, entry = _bwrap_prefix(shutil.which("bwrap") or "bwrap", readable, child_env)
        return Command([*argv, *python], {"PATH": child_env["PATH"]}, "/", entry=entry)
    cwd = tempfile.mkdtemp(prefix="trace-gym-worker-")
    child_env["HOME"] = cwd
    argv = [*python, "--hook"]
    if isolation.network_namespace:
        argv = [shutil.which("unshare") or "unshare", "-n", *argv]
    return Command(argv, child_env, cwd, cleanup=cwd)


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded here: nothing is imported between fork and exec


def apply_limits(limits: Limits, entry: hostuser.Entry | None = None) -> None:
    """Become the sandbox's host user when the caller is root (`entry`), set the worker's
    rlimits, and have it killed when its parent dies (so a worker never outlives the process
    that drives it; armed after the change of user, which clears it); runs in the child
    between fork and exec."""
    if entry is not None:
        hostuser.enter(entry)
    if limits.cpu_seconds is not None:
        cpu = int(limits.cpu_seconds)
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
