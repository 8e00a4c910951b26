"""Running a command over a set of files in the command jail.

A workspace is files in memory (path -> text): `run` writes them into a fresh temporary
directory, runs the command in the jail (`trace_gym.sandbox.jail`) with that directory as
/repo and the test runner (`trace_gym.sandbox.runner`) read-only at `RUNNER_IN_SANDBOX`, and
reads back what it leaves there: regular text files up to `FILE_KEEP_BYTES` each; links,
binary and larger files are not kept (the output says which), and when the directory has
grown past `REPO_KEEP_BYTES` in all, the command's changes are discarded. The directory is
removed after every command, so nothing of the files outlives it on disk.

In an env worker (`trace_gym.sandbox.worker`) no jail can start (no programs, no ctypes,
no bwrap), so the worker sets a runner (`set_runner`) that hands each command to the
trusted client, which checks the request (`trace_gym.sandbox.protocol.read_run_request`)
and calls `run` itself.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trace_gym.sandbox.jail import CommandLimits, CommandResult, python_argv, run_in_repo

FILE_KEEP_BYTES = 256 << 10
"""Largest file a command may leave and have kept in the repository."""
REPO_KEEP_BYTES = 4 << 20
"""Largest repository (all files) a command may leave; past it its changes are discarded."""
MAX_FILES = 400
"""Most files a repository may hold after a command."""
RUNNER = str(Path(__file__).with_name("runner.py"))
"""The test runner's file (`trace_gym.sandbox.runner`), bound into every command."""
RUNNER_IN_SANDBOX = "/opt/trace-gym/runner.py"
"""Where the test runner is, inside the jail."""


def clean_path(path: Any) -> str | None:
    """A repository-relative path in canonical form, or None when `path` leaves the
    repository (absolute, '..'), is empty or holds a control character."""
    if not isinstance(path, str) or len(path) > 300 or any(ord(ch) < 32 for ch in path):
        return None
    norm = posixpath.normpath(path.strip() or ".")
    if norm.startswith("/") or norm == ".." or norm.startswith("../"):
        return None
    try:  # what a file system takes: 255 bytes a name
        if any(len(part.encode("utf-8")) > 255 for part in norm.split("/")):
            return None
    except UnicodeEncodeError:
        return None
    return norm


def materialize(files: dict[str, str], directory: Path) -> None:
    """Write the repository's files under `directory`."""
    for path, text in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


MAX_DEPTH = 16
"""Deepest folder a repository may hold after a command (deeper ones are not kept)."""
MAX_ENTRIES = 4 * MAX_FILES
"""Most files, folders and other entries a command may leave; past it its changes are
discarded (a folder bomb is as costly to read back as a file bomb)."""


def read_back(directory: Path) -> tuple[dict[str, str] | None, list[str]]:
    """The text files a command left under `directory` (never following a link), and what
    was not kept; None for the files when the directory holds more than a repository may.
    A name that is not a clean repository path (not UTF-8, a control character such as a
    newline) and anything deeper than MAX_DEPTH folders are not kept. Walks iteratively
    (`os.scandir`), so no nesting makes it recurse."""
    files: dict[str, str] = {}
    dropped: list[str] = []
    total = entries = 0
    stack = [("", 0)]
    while stack:
        rel_dir, depth = stack.pop()
        try:
            with os.scandir(os.path.join(directory, rel_dir) if rel_dir else directory) as found:
                items = sorted(found, key=lambda e: e.name)
        except OSError:
            dropped.append(rel_dir or ".")
            continue
        for entry in items:
            entries += 1
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                dropped.append(repr(rel))
                continue
            total += info.st_size
            if total > REPO_KEEP_BYTES or len(files) >= MAX_FILES or entries > MAX_ENTRIES:
                return None, [f"the repository grew past {REPO_KEEP_BYTES >> 20} MiB, {MAX_FILES} files or "
                              f"{MAX_ENTRIES} entries"]
            if clean_path(rel) != rel or _not_utf8(rel):
                dropped.append(repr(rel))
                continue
            if stat.S_ISDIR(info.st_mode):
                if depth + 1 < MAX_DEPTH:
                    stack.append((rel, depth + 1))
                else:
                    dropped.append(rel + "/")
                continue
            if not stat.S_ISREG(info.st_mode) or info.st_size > FILE_KEEP_BYTES:
                dropped.append(rel)
                continue
            try:
                with open(entry.path, "rb") as fh:
                    files[rel] = fh.read().decode("utf-8")
            except (UnicodeDecodeError, OSError):
                dropped.append(rel)
    return files, sorted(dropped)


def _not_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.scandir gives undecodable bytes as surrogates
        return True
    return False


def _remove(directory: Path) -> None:
    """Remove a command's directory, whatever it left: files it chmod'ed away, or folders
    nested deeper than shutil.rmtree's recursion (then `rm -rf`, which does not recurse)."""
    def unlock(func: Any, path: str, _exc: Any) -> None:
        # never through a link: a command's link may name a file of this machine
        for target in (os.path.dirname(path), path):
            if not os.path.islink(target):
                os.chmod(target, 0o700)
        func(path)

    try:
        shutil.rmtree(directory, onerror=unlock)
    except (OSError, RecursionError):
        subprocess.run(["chmod", "-R", "u+rwx", str(directory)], capture_output=True, check=False)
        subprocess.run(["rm", "-rf", "--one-file-system", str(directory)], capture_output=True, check=False)


Runner = Callable[[dict[str, str], list[str], bytes, CommandLimits, bool],
                  tuple[CommandResult, dict[str, str] | None, list[str]]]
_runner: Runner | None = None
"""Who runs commands in place of this process: None (the sandbox, here) except in an env
worker, where it asks the trusted client (see `set_runner`)."""


def set_runner(fn: Runner) -> None:
    """Have `run` hand every command to `fn` (same arguments, same result); set once, by the
    env worker before it loads any env module. Not a boundary, and it needs none: whatever a
    module sets instead runs in the same worker, which can reach a sandbox only by asking the
    client, and the client checks every request (trace_gym.sandbox.pool)."""
    global _runner
    if _runner is not None:
        raise RuntimeError("the command runner is set already")
    _runner = fn


def run(files: dict[str, str], argv: list[str], stdin: bytes = b"", limits: CommandLimits = CommandLimits(),
        keep: bool = True) -> tuple[CommandResult, dict[str, str] | None, list[str]]:
    """Run `argv` in the sandbox over a copy of `files`. Returns the result, the files it
    left (None when they were discarded, or when `keep` is false) and notes for the agent."""
    if _runner is not None:  # an env worker: the client runs it
        return _runner(files, argv, stdin, limits, keep)
    directory = Path(tempfile.mkdtemp(prefix="trace-gym-repo-"))
    try:
        materialize(files, directory)
        result = run_in_repo(directory, argv, stdin=stdin, limits=limits,
                             binds={RUNNER: RUNNER_IN_SANDBOX})
        if not keep:
            return result, None, []
        after, dropped = read_back(directory)
        notes = [f"not kept (a link, binary, over {FILE_KEEP_BYTES >> 10} KiB, oddly named or nested too deep): {', '.join(dropped[:10])}"] \
            if dropped and after is not None else []
        if after is None:
            notes = [f"{dropped[0]}: the command's changes to the repository are discarded"]
        return result, after, notes
    finally:
        _remove(directory)


def runner_argv(mode: str) -> list[str]:
    """The argv of the in-sandbox test runner (`trace_gym.sandbox.runner`) in `mode`."""
    return python_argv(RUNNER_IN_SANDBOX, mode)
