"""The wire protocol between the client and its env workers, read as hostile: the bounds
of an answer and of a command a worker asks to run, the readers that enforce them, and the
errors a worker's failure becomes.

Every answer is hostile until read: at most `MAX_ANSWER_BYTES` a line, JSON nested at most
`MAX_DEPTH` deep, and no number that is not finite (NaN, Infinity, 1e999); a worker that
breaks any of these is killed, and what it sent is never used.

So is a command of the command jail that a worker asks the client to run in the middle of
a request (`{"run": ...}` in place of an answer; see trace_gym.sandbox.host.Host.run_command):
it is run here, in the sandbox, only when `read_run_request` finds it within bounds, at most
`MAX_RUNS` times a request and within the request's wall-clock bound; otherwise the worker
is killed.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from trace_gym.errors import EpisodeError, InvalidConfig, TraceGymError

encode = json.JSONEncoder(separators=(",", ":")).encode
"""A request as one compact JSON line's text."""
MAX_ANSWER_BYTES = 4 * 2**20
"""The longest answer line a worker may send (an episode's answers are a few kilobytes)."""
MAX_DEPTH = 64
"""The deepest nesting of lists and objects an answer may have (a tool schema nests about 8)."""
STDERR_TAIL = 8192
"""How much of a lost worker's stderr its error keeps (the end, where the reason is)."""
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


# scan_once: the scanner JSONDecoder.__init__ sets, which typeshed's stub of the class leaves out
_scan_answer: Callable[[str, int], tuple[Any, int]] = \
    json.JSONDecoder(parse_float=_finite, parse_constant=_not_a_number).scan_once  # type: ignore[attr-defined]


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
    `trace_gym.sandbox.workspace.run`; ValueError says why it is refused. The files are a
    repository as `run` keeps one (canonical relative paths, at most `REPO_KEEP_BYTES` of
    text and `MAX_FILES` files); argv is 1 to MAX_ARGV words; stdin (base64) at most
    MAX_STDIN_BYTES; every limit at most `CommandLimits()`'s: the worker may ask for less,
    never more."""
    from trace_gym.sandbox import workspace  # only once a worker asks: envs that run nothing pay nothing
    from trace_gym.sandbox.jail import CommandLimits

    body = message.get("run") if type(message) is dict and len(message) == 1 else None
    if type(body) is not dict or body.keys() != {"files", "argv", "stdin", "limits", "keep"}:
        raise ValueError("a command request that is not {files, argv, stdin, limits, keep}")
    files, argv, stdin, limits, keep = body["files"], body["argv"], body["stdin"], body["limits"], body["keep"]

    if type(files) is not dict or len(files) > workspace.MAX_FILES:
        raise ValueError(f"a command request whose files are not a map of at most {workspace.MAX_FILES} paths")
    total = 0
    folders: set[str] = set()
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


KNOWN_ERRORS = {"InvalidConfig": InvalidConfig, "EpisodeError": EpisodeError}
"""trace_gym's own errors keep their class across the boundary (a caller catches
InvalidConfig from a bad reset option whichever side raised it)."""
