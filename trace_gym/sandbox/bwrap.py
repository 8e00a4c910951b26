"""bubblewrap's command line, built here for both sandboxes: the env worker
(`trace_gym.sandbox.isolation`) and the command jail (`trace_gym.sandbox.jail`).

What both get, whoever asks (`command_line`): new user, PID, network, IPC, UTS and cgroup
namespaces; uid and gid `UID` inside; no capabilities; death with the parent and a session
of their own (no terminal to inject input into); a fresh /proc whose kernel settings and
triggers are read-only (`hostuser.PROC_READ_ONLY`) and a minimal /dev. When trace-gym runs
as root, every bind's source is taken from where the sandbox's unprivileged host user finds
it (`hostuser.rebind`), and the returned `Entry` is what the child does before it execs bwrap.

What differs is each sandbox's own policy, and the caller says it as data: the mounts, in
the order bwrap makes them (`ro_bind`, `bind`, `symlink`, `tmpfs`, `remount_ro`), the whole
environment, the working directory, and whether the sandbox may make user namespaces of its
own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from trace_gym.sandbox import hostuser

UID = 65534
"""The uid and gid of every sandboxed process, inside its user namespace (nobody)."""

Mount = tuple[str, ...]
"""One mount as bwrap's options (what `ro_bind`, `bind`, `symlink`, `tmpfs` and `remount_ro` give)."""


def ro_bind(source: str, dest: str | None = None) -> Mount:
    """Bind the host's `source` read-only at `dest` (by default at its own path)."""
    return ("--ro-bind", source, source if dest is None else dest)


def bind(source: str, dest: str) -> Mount:
    """Bind the host's `source` writable at `dest`."""
    return ("--bind", source, dest)


def symlink(target: str, path: str) -> Mount:
    """Make `path` a symbolic link to `target`."""
    return ("--symlink", target, path)


def tmpfs(path: str, size: int | None = None) -> Mount:
    """Mount an empty tmpfs at `path`, holding at most `size` bytes when given."""
    return ("--tmpfs", path) if size is None else ("--size", str(size), "--tmpfs", path)


def remount_ro(path: str) -> Mount:
    """Make the mount at `path` read-only (once whatever is mounted inside it is made)."""
    return ("--remount-ro", path)


def command_line(exe: str, mounts: Iterable[Mount], *, env: Mapping[str, str], chdir: str,
                 nested_userns: bool = True) -> tuple[list[str], hostuser.Entry | None]:
    """bwrap's argv, up to the command it runs (which the caller appends), and what the child
    does before it when the caller is root (None when it is not). `exe` is bwrap's path;
    `mounts` are made in their order after /proc and /dev; `env` is the sandbox's whole
    environment; `chdir` its working directory; `nested_userns` False refuses it further
    user namespaces."""
    argv = [exe, "--unshare-all", "--unshare-user"]
    if not nested_userns:
        argv.append("--disable-userns")
    argv += ["--uid", str(UID), "--gid", str(UID), "--cap-drop", "ALL", "--die-with-parent", "--new-session",
             "--proc", "/proc", *hostuser.PROC_READ_ONLY, "--dev", "/dev"]
    for mount in mounts:
        argv += mount
    entry = None
    if hostuser.drops_privileges():
        argv, entry = hostuser.rebind(argv)
    argv.append("--clearenv")
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return [*argv, "--chdir", chdir], entry


__all__ = ["UID", "Mount", "bind", "command_line", "remount_ro", "ro_bind", "symlink", "tmpfs"]
