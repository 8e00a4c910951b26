"""A jailed command's processes, seen from the host: a pids cgroup of the command's own that
caps how many it may have (`Cgroup`, where a writable pids hierarchy exists:
`pids_cgroup_base`), and its process tree read from /proc, its tasks counted and its memory
measured while it runs (`tree_tasks`, `tree_memory`), its processes killed at its end.

Linux accounting only; what the numbers mean for a command (its limits, which one ended it)
is the jail's (`trace_gym.sandbox.jail`).
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


# --- the pids cgroup ---------------------------------------------------------------------------


@functools.cache
def pids_cgroup_base() -> str | None:
    """A cgroup directory under which a child cgroup with `pids.max` can be made and a
    process moved into it, or None."""
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as fh:
            own = [line.rstrip("\n").split(":", 2) for line in fh]
        with open("/proc/self/mountinfo", encoding="utf-8") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return None
    for fields in mounts:
        sep = fields.index("-") if "-" in fields else -1
        if sep < 0 or len(fields) < sep + 4:
            continue
        fstype, options, root, point = fields[sep + 1], fields[sep + 3].split(","), fields[3], fields[4]
        if fstype == "cgroup" and "pids" in options:
            path = next((p for _, ctl, p in own if "pids" in ctl.split(",")), None)
        elif fstype == "cgroup2":
            path = next((p for num, ctl, p in own if num == "0" and ctl == ""), None)
        else:
            continue
        if path is None or not _under(path, root):
            continue
        base = os.path.normpath(os.path.join(point, os.path.relpath(path, root)))
        if fstype == "cgroup2" and not _file_has(os.path.join(base, "cgroup.subtree_control"), "pids"):
            continue
        if _cgroup_works(base):
            _remove_stale_cgroups(base)
            return base
    return None


def _remove_stale_cgroups(base: str) -> None:
    """Remove the empty cgroups of commands whose process died before removing them (killed
    mid-command); a cgroup that still holds a process is not removable and stays."""
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        owner = name.split("-")[3] if name.startswith("trace-gym-sandbox-") and name.count("-") == 4 else ""
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


def _file_has(path: str, word: str) -> bool:
    try:
        with open(path, encoding="utf-8") as fh:
            return word in fh.read().split()
    except OSError:
        return False


def _cgroup_works(base: str) -> bool:
    group = Cgroup.make(base, 4)
    if group is None:
        return False
    try:
        proc = subprocess.run(["true"], preexec_fn=functools.partial(join_cgroup, group.procs, True),
                              capture_output=True, timeout=10, check=False)
        return proc.returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        group.remove(patience=1.0)


_counter = itertools.count()


class Cgroup:
    """A pids cgroup of one command's own."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.procs = os.path.join(path, "cgroup.procs")

    @classmethod
    def make(cls, base: str, max_tasks: int) -> Cgroup | None:
        """A new cgroup under `base` holding at most `max_tasks` tasks, or None when one
        cannot be made there."""
        path = os.path.join(base, f"trace-gym-sandbox-{os.getpid()}-{next(_counter)}")
        try:
            os.mkdir(path)
        except OSError:
            return None
        group = cls(path)
        try:
            with open(os.path.join(path, "pids.max"), "w", encoding="ascii") as fh:
                fh.write(str(max_tasks))
        except OSError:
            group.remove()
            return None
        return group

    def refused_forks(self) -> int:
        """How many forks the cap refused (pids.events 'max')."""
        try:
            with open(os.path.join(self.path, "pids.events"), encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "max":
                        return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def pids(self) -> list[int]:
        """The processes in it now."""
        try:
            with open(self.procs, encoding="ascii") as fh:
                return [int(p) for p in fh.read().split()]
        except (OSError, ValueError):
            return []

    def remove(self, patience: float = 0.0) -> None:
        """Kill what is left in it, and remove it (retrying for `patience` seconds while its
        last processes are being reaped)."""
        end = time.monotonic() + patience
        while True:
            for pid in self.pids():
                kill(pid)
            try:
                os.rmdir(self.path)
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= end:
                    return  # left behind, empty or nearly; named after this process
                time.sleep(0.005)


def join_cgroup(procs: str, strict: bool) -> None:
    """Move the calling process into the cgroup whose `cgroup.procs` is `procs` (run in a
    child between fork and exec); a failure raises only when `strict`."""
    try:
        fd = os.open(procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")  # "0": the writing process itself
        finally:
            os.close(fd)
    except OSError:
        if strict:
            raise


# --- the process tree --------------------------------------------------------------------------


def _walk_tree(root: int) -> Iterator[tuple[int, list[str]]]:
    """Each process of the process tree under `root` (`root` first) with its thread ids."""
    stack = [root]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        yield pid, tids
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children", encoding="ascii") as fh:
                    stack.extend(int(c) for c in fh.read().split())
            except (OSError, ValueError):
                pass


def tree_tasks(root: int, enough: int) -> int:
    """Tasks (processes and threads) in the process tree under `root`, counted up to `enough`."""
    total = 0
    for _, tids in _walk_tree(root):
        total += len(tids)
        if total > enough:
            break
    return total


def _tree_processes(root: int) -> list[int]:
    """The processes (thread-group leaders) in the process tree under `root`, `root` included."""
    return [pid for pid, _ in _walk_tree(root)]


def _resident(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE_BYTES
    except (OSError, ValueError, IndexError):
        return 0


def _proportional(pid: int) -> int:
    """The process's proportional set size: each page it maps, divided by how many map it."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) << 10
    except (OSError, ValueError, IndexError):
        pass
    return _resident(pid)


def tree_memory(root: int, cap: int) -> int:
    """The memory the processes under `root` hold: their resident sizes summed (cheap), and
    where that passes `cap`, their proportional shares (a page shared by n processes counted
    1/n in each: a library, a forked parent's pages), which is what they hold together."""
    pids = _tree_processes(root)
    total = sum(_resident(pid) for pid in pids)
    return total if total <= cap else sum(_proportional(pid) for pid in pids)


def children(pid: int) -> list[int]:
    """The child processes of `pid` (none when it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            return [int(c) for c in fh.read().split()]
    except (OSError, ValueError):
        return []


def kill(pid: int) -> None:
    """SIGKILL `pid`, if it is still there."""
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


__all__ = ["Cgroup", "children", "join_cgroup", "kill", "pids_cgroup_base", "tree_memory", "tree_tasks"]
