"""The command jail: run one command of an untrusted coding agent (or a test run of an untrusted
package) inside a repository directory, under bubblewrap, with limits.

`run_in_repo(repo, argv)` runs `argv` with `repo` bound writable at /repo (the working
directory) and returns a `CommandResult`: a fork bomb, an endless loop, a 10 GB write or
an output flood ends that command with an error result, and nothing else happens. Nothing
the command does raises; only a sandbox that cannot start does (`IsolationUnavailable`).

**What the command sees** (bubblewrap, `bwrap`, its command line built by
`trace_gym.sandbox.bwrap` as the env worker's is): new user, PID, network, IPC, UTS and
cgroup namespaces (no network at all), uid and gid 65534 (on the host too), no capabilities, no further user
namespaces; the repository at /repo; a private tmpfs at /tmp (its size is the command's
memory limit) and a small one at /dev/shm; read-only /usr, /bin, /sbin, /lib* (links as
the host has them), /etc/ld.so.cache, /etc/alternatives, and the interpreter with its
standard library (`sys.base_prefix`). The rest of / (bwrap's own tmpfs) and /dev are
read-only. Every site-packages and dist-packages directory under those trees is hidden
under an empty read-only tmpfs, and trace_gym's own sources are never bound (they hold the
episode generator: a command that could read them could copy the right answer); a repo or a
bound directory that overlaps them is refused. The environment is PATH, HOME=/tmp,
LANG=C.UTF-8 and PYTHONDONTWRITEBYTECODE=1, nothing else. `binds` adds host paths,
read-only, at the sandbox paths the caller names. The command dies with its caller
(PR_SET_PDEATHSIG on bwrap, `--die-with-parent` inside), and when its first process ends,
the PID namespace ends with it, so nothing it started outlives it.

**Limits** (`CommandLimits`), and what holds each:

- CPU time: RLIMIT_CPU, soft `cpu_seconds` (SIGXCPU), hard one second later (SIGKILL). It
  is per process: a command that starts busy children spends at most `cpu_seconds` in each,
  and the wall clock bounds them all.
- Memory, as a whole: the private /tmp and /dev/shm (tmpfs) hold at most `tmp_bytes` and
  `shm_bytes`, and every 20 ms the memory the command's processes hold is measured (resident
  sizes summed; past the cap, proportional shares, so that a library or a forked parent's
  pages count once); past `process_memory` (`memory_bytes` less the two tmpfs) the whole
  sandbox is killed, so the processes and the scratch space together stay within
  `memory_bytes` (a command allocating as fast as the
  machine allows overshoots by what it touches in 20 ms). RLIMIT_AS caps each process's
  address space at `memory_bytes` too.
- File size: RLIMIT_FSIZE, the largest file a command may write (SIGXFSZ, or EFBIG for
  Python, which ignores SIGXFSZ). It bounds each file, not their number: the repository's
  size in all is measured every 0.1 s, and past `repo_bytes` the sandbox is killed (a
  command writing as fast as the disk takes overshoots by what it writes in that time).
- Wall clock: past `wall_seconds` the whole sandbox is killed (bwrap's process group, and
  the PID namespace's first process, which takes the namespace down).
- Output: the first `output_bytes` of stdout and of stderr are kept; the rest is read and
  dropped, so a flood of gigabytes costs no memory and cannot stall the command.
- Processes (threads count too), measured on Linux 6.18: RLIMIT_NPROC is counted per user
  namespace and real uid, so it caps the sandbox only when set *inside* its user namespace
  (set before it, in preexec, it is checked against every process of the caller's uid on
  the host: a user already running `processes` processes cannot even start bwrap). So a
  shell started first in the sandbox sets it (`ulimit`) and execs the command: a Python
  forking 200 children under `processes=8` got 6. The kernel never holds host uid 0 to
  RLIMIT_NPROC, but no sandbox runs as host root (see below). The fallback, which has no
  user namespace, is capped by a pids cgroup (`pids.max`) of the command's own where a
  writable pids hierarchy exists (cgroup v1, or a v2 tree that delegates `pids`), which also
  counts the forks it refused; else the process tree is counted every 20 ms and the command
  killed past the cap. `process_cap()` says what holds a bubblewrap command. Either way the
  command's end (or its PID namespace's) ends every process it started. The cgroup and the
  counts of the process tree are `trace_gym.sandbox.proctree`'s.

**Never host root** (`trace_gym.sandbox.hostuser`): bubblewrap started by root maps the
sandbox's uid to host uid 0, which may write `/proc/sys` and read root's 0400 files without
any capability. When the caller is root, the child that execs bwrap first becomes host uid
65534 (binding, in a private mount namespace, the paths that user cannot reach), and the
repository is given to that user before each command. `/proc/sys` and the kernel's other
settings are bound read-only over the sandbox's /proc as well.

`limit` of a result names the limit that ended the command, from its exit status (128 +
SIGXCPU or SIGXFSZ, as bwrap and shells report a signal), the CPU time it used when the
hard CPU limit's SIGKILL ended it, our own kills (wall clock, process count), the pids
cgroup's count of refused forks, and what Python, the C library and the shell write on
stderr when an allocation, a write or a fork is refused. A command whose forks were refused
reports 'processes' even when it exited with status 0: part of its work did not run.

**The fallback** (`isolation="fallback"`, or TRACE_GYM_ISOLATION=fallback; only when asked
for by name) is NOT a boundary: the command runs as the caller's user in `repo` (cwd), reads
what that user can read, and writes wherever that user can. It gets the same rlimits but
RLIMIT_NPROC (outside a user namespace it counts the user's every process), its own session
(killed as a group at the wall clock), a pids cgroup or the process-tree count as above, and
no network when `unshare -n` works. Binds are not mounts there: an argv word naming a bind's
sandbox path, or /repo, is rewritten to the host path.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import importlib.util
import math
import os
import resource
import selectors
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from trace_gym.errors import InvalidConfig
from trace_gym.sandbox import bwrap, hostuser, proctree
from trace_gym.sandbox.isolation import INSTALL_HINT, MODES, IsolationUnavailable, env_mode, resolve

SANDBOX_REPO = "/repo"
"""Where the repository is, inside the sandbox."""
SANDBOX_BIN = "/opt/trace-gym/bin"
"""A directory inside the sandbox holding `python` and `python3`: links to the interpreter
trace-gym runs on, so an agent's `python -c ...` runs the same Python wherever it is installed."""
SANDBOX_ENV = MappingProxyType({"PATH": f"{SANDBOX_BIN}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp",
                                "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"})
"""The command's whole environment."""
SANDBOX_UID = bwrap.UID
"""The command's uid and gid inside the sandbox (nobody)."""

_NO_BINDS: Mapping[str, str] = MappingProxyType({})
_MIN_MEMORY = 64 << 20  # an interpreter does not start in less address space
_OVERHEAD_TASKS = 2  # bwrap and the namespace's first process count against a pids cgroup
_TAIL_BYTES = 4096  # of stderr, kept for telling which limit ended a command
_READ_CHUNK = 1 << 16
_STDIN_CHUNK = 1 << 16
_SHM_BYTES = 64 << 20
TMP_BYTES = 128 << 20
"""The most a command's private /tmp holds (a tmpfs: it is memory)."""


def tmp_bytes(limits: CommandLimits) -> int:
    """The size of a command's private /tmp: `TMP_BYTES`, or a quarter of its memory if less."""
    return min(TMP_BYTES, limits.memory_bytes // 4)


def shm_bytes(limits: CommandLimits) -> int:
    """The size of a command's private /dev/shm: 64 MiB, or an eighth of its memory if less."""
    return min(_SHM_BYTES, limits.memory_bytes // 8)


def process_memory(limits: CommandLimits) -> int:
    """What a command's processes may hold together: its memory less its two tmpfs."""
    return limits.memory_bytes - tmp_bytes(limits) - shm_bytes(limits)
_WATCH_PERIOD = 0.02
_DISK_PERIOD = 0.1  # how often the repository's size is measured while a command runs
_DRAIN_GRACE = 2.0  # after a kill, how long the dying namespace may hold the pipes
_SYSTEM_TREES = ("/usr",)
_TOP_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/alternatives")
_PACKAGE_DIR_NAMES = ("site-packages", "dist-packages")
_MEMORY_WORDS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory")
_FILE_SIZE_WORDS = (b"File too large",)
_FORK_WORDS = (b"Cannot fork", b"fork: retry", b"fork: Resource temporarily unavailable",
               b"can't start new thread")


@dataclass(frozen=True)
class CommandLimits:
    """Resource limits of one command (see the module docstring for what holds each)."""

    cpu_seconds: int = 10
    """CPU time of each process (RLIMIT_CPU; SIGKILL one second after SIGXCPU)."""
    memory_bytes: int = 1 << 30
    """What the command's processes and its private /tmp may hold in memory together (and
    each process's address space, RLIMIT_AS)."""
    file_bytes: int = 64 << 20
    """Largest file a command may write (RLIMIT_FSIZE)."""
    processes: int = 64
    """Most processes and threads the command may have at once."""
    wall_seconds: float = 20.0
    """Wall-clock time; past it the whole sandbox is killed."""
    output_bytes: int = 32 << 10
    """Of stdout and of stderr each, the bytes kept; the rest is drained and dropped."""
    repo_bytes: int = 256 << 20
    """Most bytes the repository may hold in all while the command runs (measured every
    0.1 s); past it the whole sandbox is killed."""

    def __post_init__(self) -> None:
        minimum = {"cpu_seconds": 1, "memory_bytes": _MIN_MEMORY, "file_bytes": 0, "processes": 1, "output_bytes": 0,
                   "repo_bytes": 0}
        for name, low in minimum.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise InvalidConfig(f"CommandLimits.{name}={value!r} is invalid: must be an integer >= {low}")
        wall = self.wall_seconds
        if isinstance(wall, bool) or not isinstance(wall, (int, float)) or not math.isfinite(wall) or wall <= 0:
            raise InvalidConfig(f"CommandLimits.wall_seconds={wall!r} is invalid: must be a finite number > 0")


@dataclass(frozen=True)
class CommandResult:
    """How one command ended, and what it wrote."""

    returncode: int | None
    """Its exit status (128 + N when signal N ended it, as bwrap and shells report); None
    when the sandbox killed it (wall clock, process count)."""
    stdout: str
    """Its stdout, UTF-8 decoded (bad bytes replaced), cut at `output_bytes` with a note
    saying how many bytes were dropped."""
    stderr: str
    """Its stderr, as stdout."""
    timed_out: bool
    """True when it ran past its wall-clock limit and was killed."""
    limit: str | None
    """The limit that ended it, in words: 'cpu time', 'file size', 'wall clock', 'memory',
    'processes', 'repository size'; None when no limit did (or none could be told)."""

    @property
    def ok(self) -> bool:
        """True when it exited with status 0 and no limit ended it."""
        return self.returncode == 0 and self.limit is None and not self.timed_out

    def describe(self) -> str:
        """The text an agent reads: how it ended, then stdout, then stderr."""
        if self.returncode is None:
            head = f"killed by the sandbox: its {self.limit or 'wall clock'} limit was reached"
        elif self.limit is not None:
            head = f"exit status {self.returncode}: its {self.limit} limit was reached"
        else:
            head = f"exit status {self.returncode}{_signal_note(self.returncode)}"
        parts = [head]
        for name, text in (("stdout", self.stdout), ("stderr", self.stderr)):
            body = text.rstrip("\n")
            parts.append(f"{name}:\n{body}" if body else f"{name}: (empty)")
        return "\n".join(parts)


def _signal_note(returncode: int | None) -> str:
    if returncode is None or not 128 < returncode < 128 + 65:
        return ""
    try:
        return f" (128 + {signal.Signals(returncode - 128).name}: ended by that signal)"
    except ValueError:
        return ""


# --- what the sandbox binds, computed once ------------------------------------------------


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _overlap(a: str, b: str) -> bool:
    return _under(a, b) or _under(b, a)


@functools.cache
def _trees() -> tuple[str, ...]:
    """The host directories bound read-only at their own paths (real paths, none inside another)."""
    candidates = [*_SYSTEM_TREES, *(p for p in _TOP_DIRS if os.path.isdir(p) and not os.path.islink(p)),
                  sys.base_prefix, sys.base_exec_prefix]
    real = sorted({os.path.realpath(p) for p in candidates if os.path.isdir(p)})
    return tuple(p for p in real if not any(p != q and _under(p, q) for q in real))


@functools.cache
def _interpreter() -> tuple[str, tuple[str, ...]]:
    """The interpreter's path inside the sandbox (the same as on the host), and files to
    bind for it when it lies outside the bound trees."""
    exe = os.path.realpath(sys.executable)
    if any(_under(exe, tree) for tree in _trees()):
        return exe, ()
    # A venv that copied its interpreter: the base installation's own is the same program.
    base = os.path.join(os.path.realpath(sys.base_prefix), "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    if os.path.isfile(base):
        return base, ()
    return exe, (exe,)


@functools.cache
def _secret_dirs() -> tuple[str, ...]:
    """trace_gym's source directories: never visible in the sandbox."""
    spec = importlib.util.find_spec("trace_gym")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return tuple(sorted({os.path.realpath(p) for p in locations}))


@functools.cache
def _masked_dirs() -> tuple[str, ...]:
    """Every site-packages or dist-packages directory, and trace_gym's sources, found under
    a bound tree: each is hidden under an empty read-only tmpfs."""
    found: set[str] = set()
    getsitepackages = getattr(site, "getsitepackages", None)  # absent in some old virtualenvs
    if getsitepackages is not None:
        found.update(getsitepackages())
    found.add(site.getusersitepackages())
    for entry in sys.path:
        parts = Path(entry).parts if entry and os.path.isabs(entry) else ()
        for i, part in enumerate(parts):
            if part in _PACKAGE_DIR_NAMES:
                found.add(str(Path(*parts[: i + 1])))
                break
    for tree in _trees():
        for pattern in ("lib*/python*/*-packages", "local/lib*/python*/*-packages"):
            found.update(p for p in glob.glob(os.path.join(tree, pattern)) if os.path.basename(p) in _PACKAGE_DIR_NAMES)
    found.update(_secret_dirs())
    real = sorted({os.path.realpath(p) for p in found if os.path.isdir(p)})
    real = [p for p in real if any(_under(p, tree) for tree in _trees())]
    return tuple(p for p in real if not any(p != q and _under(p, q) for q in real))


@functools.cache
def _bwrap_exe() -> str:
    return shutil.which("bwrap") or "bwrap"


@functools.cache
def _layout() -> tuple[bwrap.Mount, ...]:
    """The read-only file system and the masks (the same for every command)."""
    mounts = [bwrap.ro_bind(tree) for tree in _trees()]
    mounts += [bwrap.symlink(os.readlink(path), path) for path in _TOP_DIRS if os.path.islink(path)]
    mounts += [bwrap.ro_bind(path) for path in _ETC if os.path.exists(path)]
    mounts += [bwrap.ro_bind(path) for path in _interpreter()[1]]
    mounts += [bwrap.symlink(_interpreter()[0], f"{SANDBOX_BIN}/{name}") for name in ("python", "python3")]
    # Mounted after the trees they hide; remounted read-only so nothing can be put there.
    for path in _masked_dirs():
        mounts += [bwrap.tmpfs(path), bwrap.remount_ro(path)]
    return tuple(mounts)


def _nproc_wrapper(processes: int) -> list[str]:
    """A shell that sets RLIMIT_NPROC inside the user namespace, where the count is the
    sandbox's own, then execs the command (dash spells it -p, bash -u)."""
    script = f'ulimit -p {processes} 2>/dev/null || ulimit -u {processes} 2>/dev/null; exec "$@"'
    return ["/bin/sh", "-c", script, "sh"]


def python_argv(*args: str) -> list[str]:
    """The argv that runs the trace_gym interpreter in the sandbox with `args`: isolated
    (-I) and without site-packages (-S), which the sandbox does not have."""
    return [_interpreter()[0], "-I", "-S", *args]


# --- the process cap ------------------------------------------------------------------------


def _nproc_rlimit_holds(own_userns: bool) -> bool:
    """RLIMIT_NPROC caps a command that runs in a user namespace of its own as a uid other
    than host root (the kernel exempts root's processes from it): under bubblewrap always,
    since a root caller's sandbox runs as host uid `hostuser.HOST_UID`."""
    return own_userns and (os.getuid() != 0 or hostuser.drops_privileges())


def process_cap() -> str | None:
    """What holds a bubblewrap command to `CommandLimits.processes` here, in words; None when
    only the 20 ms process-tree count does (root without a writable pids cgroup)."""
    if _nproc_rlimit_holds(True):
        return "RLIMIT_NPROC inside the sandbox's user namespace"
    if proctree.pids_cgroup_base() is not None:
        return "a pids cgroup (pids.max)"
    return None


# --- running ----------------------------------------------------------------------------------


_PR_SET_PDEATHSIG = 1
_prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded here: nothing is imported between fork and exec


def _child_setup(rlimits: tuple[tuple[int, tuple[int, int]], ...], procs: str | None, parent: int,
                 entry: hostuser.Entry | None) -> None:
    """Runs in the child between fork and exec (after setsid): join the pids cgroup, become
    the sandbox's host user when the caller is root (`entry`), set the rlimits, and die with
    the parent (armed last: a change of user clears it)."""
    if procs is not None:
        proctree.join_cgroup(procs, False)
    if entry is not None:
        hostuser.enter(entry)
    for which, value in rlimits:
        resource.setrlimit(which, value)
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the death signal was armed
        os._exit(1)


def _rlimits(limits: CommandLimits) -> tuple[tuple[int, tuple[int, int]], ...]:
    """The rlimits to set, each within the hard limit this process already has (raising it
    would fail in the child)."""
    wanted = ((resource.RLIMIT_CPU, limits.cpu_seconds, limits.cpu_seconds + 1),
              (resource.RLIMIT_AS, limits.memory_bytes, limits.memory_bytes),
              (resource.RLIMIT_FSIZE, limits.file_bytes, limits.file_bytes),
              (resource.RLIMIT_CORE, 0, 0))
    out = []
    for which, soft, hard in wanted:
        ceiling = resource.getrlimit(which)[1]
        if ceiling != resource.RLIM_INFINITY:
            soft, hard = min(soft, ceiling), min(hard, ceiling)
        out.append((which, (soft, hard)))
    return tuple(out)


class _Capture:
    """One output stream: its first `keep` bytes, how many more were dropped, and its last
    few KiB (for telling which limit ended the command)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.head = bytearray()
        self.dropped = 0
        self.tail = bytearray()

    def add(self, data: bytes) -> None:
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.dropped += max(0, len(data) - max(room, 0))
        if len(data) >= _TAIL_BYTES:
            self.tail = bytearray(data[-_TAIL_BYTES:])
        else:
            self.tail += data
            del self.tail[:-_TAIL_BYTES]

    def text(self) -> str:
        text = self.head.decode("utf-8", errors="replace")
        return f"{text}\n[... {self.dropped} bytes dropped]" if self.dropped else text


def _execute(argv: list[str], *, cwd: str, repo: str, stdin: bytes, limits: CommandLimits,
             own_userns: bool, entry: hostuser.Entry | None = None) -> CommandResult:
    """Start `argv` with the limits, feed it stdin, read its output, end it at the wall
    clock or the process cap, and say how it ended."""
    # RLIMIT_NPROC holds a non-root caller's sandbox. Else a pids cgroup, when there is one
    # (not always: joining one costs the command ~10 ms, a wait for an RCU grace period);
    # else the process tree is counted.
    rlimit_holds = _nproc_rlimit_holds(own_userns)
    base = None if rlimit_holds else proctree.pids_cgroup_base()
    group = proctree.Cgroup.make(base, limits.processes + _OVERHEAD_TASKS) if base is not None else None
    watch = group is None and not rlimit_holds
    setup = functools.partial(_child_setup, _rlimits(limits), group.procs if group else None, os.getpid(),
                              entry)
    start = time.monotonic()
    try:
        # preexec_fn calls only setrlimit, prctl and a write (no lock another thread may hold).
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(SANDBOX_ENV),
                                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                                preexec_fn=setup)  # noqa: PLW1509
    except OSError as exc:  # the fallback's program does not exist or cannot be run
        if group is not None:
            group.remove()
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        return CommandResult(code, "", f"{argv[0]}: {exc.strerror or exc}\n", False, None)
    try:
        return _supervise(proc, stdin, limits, group, watch, start, repo)
    finally:
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        if proc.returncode is None:  # only on an error of ours: leave nothing running
            _kill_all(proc, group)
            proc.wait()
        if group is not None:
            group.remove(patience=_DRAIN_GRACE)


def _kill_all(proc: subprocess.Popen[bytes], group: proctree.Cgroup | None) -> None:
    """SIGKILL the command's process group and the PID namespace's first process (whose end
    takes the namespace down), and whatever is in its cgroup."""
    first = proctree.children(proc.pid)
    _killpg(proc.pid)
    for pid in first:
        proctree.kill(pid)
    if group is not None:
        for pid in group.pids():
            proctree.kill(pid)


_ENTRY_BYTES = 4096  # what one file or folder costs the file system at least (an inode, a block)


def _tree_bytes(root: str, enough: int) -> int:
    """The bytes under `root` (links not followed), each entry, an empty file or a folder
    included, counted as at least _ENTRY_BYTES (so a bomb of empty files or folders counts
    too), until past `enough`."""
    total, stack = 0, [root]
    while stack and total <= enough:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                        total += _ENTRY_BYTES
                    else:
                        total += max(_ENTRY_BYTES, entry.stat(follow_symlinks=False).st_size)
        except OSError:  # a directory the command removed or locked meanwhile
            continue
    return total


def _supervise(proc: subprocess.Popen[bytes], stdin: bytes, limits: CommandLimits, group: proctree.Cgroup | None,
               watch: bool, start: float, repo: str) -> CommandResult:
    assert proc.stdout is not None and proc.stderr is not None
    deadline = start + limits.wall_seconds
    cap = limits.processes + _OVERHEAD_TASKS
    out, err = _Capture(limits.output_bytes), _Capture(limits.output_bytes)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, out)
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, err)
    pending = memoryview(stdin)
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, "in")
    pidfd: int | None
    try:
        pidfd = os.pidfd_open(proc.pid)
        sel.register(pidfd, selectors.EVENT_READ, "exit")
    except (AttributeError, OSError):  # before Linux 5.3: poll for the exit
        pidfd = None
    exited = timed_out = over_cap = over_disk = over_memory = False
    next_count = start + _WATCH_PERIOD
    # All its processes together, beside its /tmp: measured here, killed past the share.
    memory_cap = process_memory(limits)
    next_memory = start + _WATCH_PERIOD
    # RLIMIT_FSIZE bounds each file, not their number: a command writing file after file
    # into the repository is measured here and killed past `repo_bytes`.
    next_disk = start + _DISK_PERIOD
    drain_until = math.inf

    def reading() -> bool:
        return any(isinstance(key.data, _Capture) for key in sel.get_map().values())

    def handle(key: selectors.SelectorKey) -> None:
        nonlocal pending, exited
        if isinstance(key.data, _Capture):
            data = os.read(key.fd, _READ_CHUNK)
            if data:
                key.data.add(data)
            else:
                sel.unregister(key.fd)
        elif key.data == "in":
            try:
                pending = pending[os.write(key.fd, pending[:_STDIN_CHUNK]):]
            except BlockingIOError:
                pass
            except BrokenPipeError:  # the command stopped reading: the rest is not wanted
                pending = pending[len(pending):]
            if not pending:
                sel.unregister(key.fd)
                assert proc.stdin is not None
                proc.stdin.close()
        else:
            sel.unregister(key.fd)
            exited = True

    try:
        while True:
            now = time.monotonic()
            if not exited and pidfd is None:
                exited = os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
            if exited and drain_until == math.inf:
                # Under bwrap the namespace is gone by now; in the fallback, end the session's
                # leftovers (the leader is not reaped yet, so its group id is still its own).
                _killpg(proc.pid)
                drain_until = now + _DRAIN_GRACE
            if exited and (not reading() or now >= drain_until):
                break  # past the grace, what still holds its pipes is not waited for
            if not exited and now >= deadline:
                timed_out = True
                break
            if watch and not exited and now >= next_count:
                next_count = now + _WATCH_PERIOD
                if proctree.tree_tasks(proc.pid, cap) > cap:
                    over_cap = True
                    break
            if not exited and now >= next_memory:
                next_memory = now + _WATCH_PERIOD
                if proctree.tree_memory(proc.pid, memory_cap) > memory_cap:
                    over_memory = True
                    break
            if not exited and now >= next_disk:
                next_disk = now + _DISK_PERIOD
                if _tree_bytes(repo, limits.repo_bytes) > limits.repo_bytes:
                    over_disk = True
                    break
            wake = min(deadline, drain_until)
            if not exited:
                wake = min(wake, next_disk, next_memory)
            if not exited and (watch or pidfd is None):
                wake = min(wake, next_count if watch else now + _WATCH_PERIOD)
            for key, _ in sel.select(max(0.0, wake - now)):
                handle(key)
        if timed_out or over_cap or over_disk or over_memory:
            _kill_all(proc, group)
            # The dying namespace holds the pipes until its last process is gone: wait for that.
            drain_until = time.monotonic() + _DRAIN_GRACE
            while reading() and time.monotonic() < drain_until:
                for key, _ in sel.select(max(0.0, drain_until - time.monotonic())):
                    if isinstance(key.data, _Capture) or key.data == "in":
                        handle(key)
                    else:
                        sel.unregister(key.fd)
        _, code, usage = os.wait4(proc.pid, 0)
    finally:
        sel.close()
        if pidfd is not None:
            os.close(pidfd)
    returncode: int | None = _exit_code(code)
    proc.returncode = returncode
    if timed_out or over_cap or over_disk or over_memory:
        returncode = None
    refused = group.refused_forks() if group is not None else 0
    limit = "repository size" if over_disk else "memory" if over_memory else _which_limit(
        returncode, timed_out, over_cap or refused > 0, usage.ru_utime + usage.ru_stime, limits, bytes(err.tail))
    return CommandResult(returncode, out.text(), err.text(), timed_out, limit)


def _exit_code(status: int) -> int:
    """The exit status as a shell reports it: 128 + N for signal N."""
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass


def _which_limit(returncode: int | None, timed_out: bool, over_cap: bool, cpu: float, limits: CommandLimits,
                 stderr_tail: bytes) -> str | None:
    """The limit that ended a command, in words, or None."""
    if timed_out or returncode is None:
        return "processes" if over_cap else "wall clock"
    forks_refused = over_cap or any(w in stderr_tail for w in _FORK_WORDS)
    if returncode == 0:
        # It exited well, but some of its processes were refused: its work is not whole.
        return "processes" if forks_refused else None
    if returncode == 128 + signal.SIGXCPU or (returncode == 128 + signal.SIGKILL and cpu >= limits.cpu_seconds):
        return "cpu time"
    if returncode == 128 + signal.SIGXFSZ or any(w in stderr_tail for w in _FILE_SIZE_WORDS):
        return "file size"
    if forks_refused:
        return "processes"
    if any(w in stderr_tail for w in _MEMORY_WORDS):
        return "memory"
    return None


def _check_paths(repo: str | Path, binds: Mapping[str, str]) -> tuple[str, list[tuple[str, str]]]:
    """The repository's real path and the binds, refusing what would expose trace_gym's
    sources (or, for the writable repository, a site-packages directory)."""
    real = os.path.realpath(repo)
    if not os.path.isdir(real):
        raise InvalidConfig(f"repo={str(repo)!r} is invalid: not a directory")
    for hidden in (*_secret_dirs(), *_masked_dirs()):
        if _overlap(real, hidden):
            raise InvalidConfig(f"repo={str(repo)!r} is invalid: it overlaps {hidden}, which the sandbox must "
                                "not expose")
    pairs = []
    for src, dest in binds.items():
        src_real = os.path.realpath(src)
        if not os.path.exists(src_real):
            raise InvalidConfig(f"binds: {src!r} is invalid: it does not exist")
        if not isinstance(dest, str) or not os.path.isabs(dest) or os.path.normpath(dest) in ("/", SANDBOX_REPO):
            raise InvalidConfig(f"binds: the sandbox path {dest!r} for {src!r} is invalid: must be absolute, not / "
                                f"or {SANDBOX_REPO}")
        # A single file (the in-sandbox test runner) may come from trace_gym; a directory may not.
        if os.path.isdir(src_real) and any(_overlap(src_real, hidden) for hidden in _secret_dirs()):
            raise InvalidConfig(f"binds: {src!r} is invalid: a directory overlapping trace_gym's sources")
        pairs.append((src_real, os.path.normpath(dest)))
    return real, pairs


def _sandbox_argv(repo: str, binds: Sequence[tuple[str, str]], argv: Sequence[str],
                  limits: CommandLimits) -> tuple[list[str], hostuser.Entry | None]:
    """bwrap's argv, and what the child does before it when the caller is root (None when
    it is not): every bind's source where the sandbox's host user finds it."""
    # POSIX shared memory and semaphores (multiprocessing) live in /dev/shm: a small tmpfs of
    # its own, as /dev itself becomes read-only.
    mounts = [bwrap.tmpfs("/dev/shm", shm_bytes(limits)), bwrap.tmpfs("/tmp", tmp_bytes(limits)), *_layout(),
              bwrap.bind(repo, SANDBOX_REPO), *(bwrap.ro_bind(src, dest) for src, dest in binds),
              # bwrap's root and /dev are tmpfs the sandbox user owns: without this, writable and
              # unbounded memory. Last, as every mount above makes its mount point in them.
              bwrap.remount_ro("/dev"), bwrap.remount_ro("/")]
    if hostuser.drops_privileges():
        hostuser.give(repo)
    out, entry = bwrap.command_line(_bwrap_exe(), mounts, env=SANDBOX_ENV, chdir=SANDBOX_REPO, nested_userns=False)
    return [*out, *_nproc_wrapper(limits.processes), *argv], entry


def _fallback_argv(repo: str, binds: Sequence[tuple[str, str]], argv: Sequence[str]) -> list[str]:
    """The argv with sandbox paths rewritten to host paths (no mounts in the fallback), under
    `unshare -n` when that works."""
    table = [(SANDBOX_REPO, repo), *((dest, src) for src, dest in binds)]
    words = []
    for word in argv:
        for inside, host in table:
            if _under(word, inside):
                word = host + word[len(inside):]
                break
        words.append(word)
    if resolve("fallback").network_namespace:
        words = [shutil.which("unshare") or "unshare", "-n", *words]
    return words


def run_in_repo(repo: str | Path, argv: list[str], *, stdin: bytes = b"", limits: CommandLimits = CommandLimits(),
                binds: Mapping[str, str] = _NO_BINDS, isolation: str | None = None) -> CommandResult:
    """Run `argv` (as is: ["sh", "-c", "ls -la"], `python_argv("-c", ...)`) in `repo`, seen
    at /repo, under bubblewrap with `limits`, feeding it `stdin`; `binds` maps further host
    paths to sandbox paths, bound read-only. Returns how it ended; nothing the command does
    raises. Raises IsolationUnavailable when bubblewrap cannot run and `isolation` (default:
    TRACE_GYM_ISOLATION, else 'bubblewrap') is not 'fallback', and InvalidConfig for a repo
    or bind that is not there or would expose trace_gym's sources."""
    mode = env_mode() if isolation is None else isolation
    if mode not in MODES:
        raise InvalidConfig(f"isolation={mode!r} is invalid; allowed: {', '.join(MODES)}")
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidConfig(f"argv={argv!r} is invalid: must be a non-empty list of strings")
    real, pairs = _check_paths(repo, binds)
    if mode == "fallback":
        return _execute(_fallback_argv(real, pairs, argv), cwd=real, repo=real, stdin=stdin, limits=limits,
                        own_userns=False)
    ok, why = sandbox_available()
    if not ok:
        raise IsolationUnavailable(f"coding commands run only under bubblewrap, which cannot run here ({why}): "
                                   f"{INSTALL_HINT}")
    sandboxed, entry = _sandbox_argv(real, pairs, argv, limits)
    return _execute(sandboxed, cwd="/", repo=real, stdin=stdin, limits=limits, own_userns=True, entry=entry)


@functools.cache
def sandbox_available() -> tuple[bool, str]:
    """(True, '') when bubblewrap can run a command here in this module's exact sandbox,
    else (False, why); found once, by running the interpreter in it."""
    if shutil.which("bwrap") is None:
        return False, "bwrap is not installed (Debian package: bubblewrap)"
    with tempfile.TemporaryDirectory(prefix="trace-gym-sandbox-probe-") as repo:
        limits = CommandLimits(wall_seconds=60.0)
        try:
            sandboxed, entry = _sandbox_argv(os.path.realpath(repo), (), python_argv("-c", "pass"), limits)
            result = _execute(sandboxed, repo=repo, cwd="/", stdin=b"", limits=limits, own_userns=True, entry=entry)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"bwrap could not be started ({exc})"
    if not result.ok:
        detail = (result.stderr.strip().splitlines() or [f"exit status {result.returncode}"])[-1]
        return False, f"bwrap failed: {detail[:300]}"
    return True, ""


__all__ = ["SANDBOX_BIN", "SANDBOX_ENV", "SANDBOX_REPO", "SANDBOX_UID", "CommandLimits", "CommandResult", "process_cap",
           "python_argv", "run_in_repo", "sandbox_available"]
