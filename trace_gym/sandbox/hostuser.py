"""Both sandboxes run as an unprivileged user of the host, also when trace-gym runs as root.

Why: bubblewrap started by root makes a user namespace whose one uid (65534 inside) is host
uid 0. Its processes have no capabilities, yet the kernel still treats them as the owner of
every root-owned file: `/proc/sys` checks the writer's uid, not a capability, so
`kernel.core_pattern` (a program run as host root at the next crash) and `vm.*` are
writable, and root's 0400 and 0600 files (`/proc/timer_list`, `kernel.cad_pid`) readable.

So when the caller is root, the child that becomes bwrap first turns into host uid and gid
`HOST_UID` with no supplementary groups (`enter`, between fork and exec); bwrap then runs
unprivileged, in a user namespace of its own, and every process of the sandbox is host uid
65534. A caller that is not root already runs bwrap unprivileged: nothing changes for it.

What the change of user takes:

- A path that user cannot reach (a Python under /root, which is 0700; a private temporary
  folder) is bound, still as root, in a mount namespace of the child's own, onto a mount point
  in a folder anyone may enter (`Staging`); bwrap binds it from there. A file that user may
  not read is copied there instead (a snapshot taken when the sandbox starts).
- A folder the sandbox writes (a coding command's repository) is given to that user before
  each command (`give`): root still reads and writes it, the sandbox can too.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass

HOST_UID = 65534
"""The host uid and gid the sandboxes run as when trace-gym runs as root (nobody)."""

_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)  # loaded here: nothing is imported between fork and exec


def drops_privileges() -> bool:
    """True when the sandboxes run as host uid `HOST_UID` rather than as the caller (who is root)."""
    return os.geteuid() == 0


def _may(path: str, bits: int) -> bool:
    """True when the sandbox user may do `bits` (as others' bits: S_IROTH, S_IXOTH) on
    `path`, as its owner, its group or another user."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    if info.st_uid == HOST_UID:
        bits <<= 6
    elif info.st_gid == HOST_UID:
        bits <<= 3
    return info.st_mode & bits == bits


def reachable(path: str) -> bool:
    """True when the sandbox user can look `path` up: every folder above it lets it in."""
    parent = os.path.dirname(os.path.realpath(path))
    while True:
        if not _may(parent, stat.S_IXOTH):
            return False
        if parent == "/":
            return True
        parent = os.path.dirname(parent)


def readable(path: str) -> bool:
    """True when the sandbox user may read `path` (and, for a folder, enter it)."""
    return _may(path, stat.S_IROTH | (stat.S_IXOTH if os.path.isdir(path) else 0))


class Staging:
    """A folder anyone may enter, made once a process (removed at its exit), holding mount
    points for the host paths the sandbox user cannot reach. The binds live only in the
    private mount namespace of the child that makes them, so children running at once share
    the points: the n-th folder (or file) an entry binds goes on `d<n>` (or `f<n>`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._root: str | None = None

    def folder(self) -> str:
        """The staging folder (made on first use)."""
        with self._lock:
            if self._root is None:
                base = next((d for d in (tempfile.gettempdir(), "/tmp", "/dev/shm")
                             if os.path.isdir(d) and reachable(d) and _may(d, stat.S_IXOTH)), None)
                if base is None:
                    raise OSError("no folder that an unprivileged user may enter, for the sandbox's mount points")
                root = tempfile.mkdtemp(prefix="trace-gym-stage-", dir=base)
                os.chmod(root, 0o755)
                atexit.register(shutil.rmtree, root, True)
                self._root = root
            return self._root

    def point(self, kind: str, index: int) -> str:
        """The `index`-th mount point of `kind` ('d' a folder, 'f' a file), made if new."""
        place = os.path.join(self.folder(), f"{kind}{index}")
        if not os.path.lexists(place):
            try:
                if kind == "d":
                    os.mkdir(place, 0o755)
                else:
                    os.close(os.open(place, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:  # another thread made it meanwhile
                pass
        return place

    def snapshot(self, source: str) -> str:
        """A copy of the file `source` that others may read, named by its content."""
        with open(source, "rb") as fh:
            data = fh.read()
        place = os.path.join(self.folder(), "c-" + hashlib.sha256(data).hexdigest())
        if not os.path.exists(place):
            fd, tmp = tempfile.mkstemp(dir=self.folder())
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.chmod(tmp, 0o644)
            os.replace(tmp, place)
        return place


STAGING = Staging()
"""The process's staging folder."""


@dataclass(frozen=True)
class Entry:
    """What the child does before it execs bwrap as the sandbox user: the binds to make in
    a mount namespace of its own, as (source, mount point)."""

    mounts: tuple[tuple[str, str], ...] = ()


def stage(paths: Iterable[str]) -> tuple[dict[str, str], Entry]:
    """For each real path the sandbox binds: the path bwrap should bind it from, and the
    `Entry` that makes those paths. Raises OSError for a folder the sandbox user could
    not read even once reached. When the caller is not root, every path is its own."""
    paths = list(dict.fromkeys(paths))
    if not drops_privileges():
        return {p: p for p in paths}, Entry()
    where: dict[str, str] = {}
    mounts: list[tuple[str, str]] = []
    counts = {"d": 0, "f": 0}
    for path in paths:
        if path == "/proc" or path.startswith("/proc/") or not os.path.exists(path):
            where[path] = path  # the kernel's own files (bound read-only over the sandbox's), or a bind-try
        elif not readable(path):
            if os.path.isdir(path):
                raise OSError(f"{path} is a folder the sandbox's user (uid {HOST_UID}) may not read: give others "
                              "read and search permission on it")
            where[path] = STAGING.snapshot(path)
        elif reachable(path):
            where[path] = path
        else:
            kind = "d" if os.path.isdir(path) else "f"
            where[path] = STAGING.point(kind, counts[kind])
            counts[kind] += 1
            mounts.append((path, where[path]))
    return where, Entry(tuple(mounts))


_BIND_OPTIONS = ("--bind", "--ro-bind", "--dev-bind", "--bind-try", "--ro-bind-try")
PROC_READ_ONLY = ("--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/sysrq-trigger", "/proc/sysrq-trigger",
                  "--ro-bind-try", "/proc/irq", "/proc/irq", "--ro-bind-try", "/proc/bus", "/proc/bus")
"""bwrap options, after `--proc /proc`: the kernel's settings and triggers read-only inside
(bwrap covers them only where its own access check finds them writable, which it does not as
an unprivileged user, so they are covered here whoever runs it)."""


def rebind(options: list[str]) -> tuple[list[str], Entry]:
    """bwrap's `options` (not the command after them) with each bind's source replaced by
    where the sandbox user finds it (`stage`), and the `Entry` that makes it so."""
    sources = [options[i + 1] for i, word in enumerate(options[:-2]) if word in _BIND_OPTIONS]
    where, entry = stage(sources)
    out = list(options)
    for i, word in enumerate(options[:-2]):
        if word in _BIND_OPTIONS:
            out[i + 1] = where[options[i + 1]]
    return out, entry


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def enter(entry: Entry) -> None:
    """Runs in the child between fork and exec, as root: make `entry`'s binds in a private
    mount namespace, then become host uid and gid `HOST_UID` with no other groups. (The
    parent-death signal is cleared by a change of user: set it after this.)"""
    if entry.mounts:
        _check(_libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        # Private: nothing mounted here reaches the host's mount table.
        _check(_libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
        for source, point in entry.mounts:
            _check(_libc.mount(source.encode(), point.encode(), None, _MS_BIND | _MS_REC, None),
                   f"binding {source}")
    os.setgroups([])
    os.setresgid(HOST_UID, HOST_UID, HOST_UID)
    os.setresuid(HOST_UID, HOST_UID, HOST_UID)


def give(folder: str) -> None:
    """Make `folder` and everything in it the sandbox user's (root only; links are not
    followed), so that a sandbox running as that user can write it."""
    if not drops_privileges():
        return
    for top, dirs, files in os.walk(folder):
        for name in (top, *(os.path.join(top, n) for n in (*dirs, *files))):
            try:
                info = os.lstat(name)
                if info.st_uid != HOST_UID or info.st_gid != HOST_UID:
                    os.lchown(name, HOST_UID, HOST_UID)
            except OSError:
                pass
