"""The env worker: `python -m trace_gym.sandbox.worker`, started by a `WorkerPool` inside the
sandbox. It loads env modules and hosts any number of env instances, answering one JSON
request per line on stdin with one JSON response per line on the protocol stream (the
original stdout; the module's own prints go to stderr).

Requests (`op`, plus the instance `id` the client chose), and the answer's value:

- make: source ({path, attr, sha256} or {entry_point}), kwargs, render_mode -> metadata and
  the action space's tools (schema and kind of each);
- reset: seed, options -> [the recent opening it builds on (or -1), messages kept from it,
  new messages, info changes and keys gone against that opening's info, task head (kind,
  capabilities, instructions), toolset number, the toolset when it is new];
- step: action (raw JSON) or parsed (an action the client read) -> [new messages or null,
  all messages or null, reward, terminated, truncated, info changes, info keys gone];
- oracle: obs (null: the last observation) -> the oracle's action;
- task -> {json: task.to_json(), hidden: task.hidden or null};
- world_hash -> the episode's initial world hash; render -> render() in ansi mode;
  close -> null.

While serving a request, the env may run a command in the command jail
(`trace_gym.sandbox.workspace.run`), which cannot start here: the worker sends `{"run": ...}`
instead of an answer and reads the client's reply as the next line of its input, then goes
on (see `Host.run_command`; the client checks and bounds each such request).

Any request may carry `drop`: instances whose proxies are gone, closed first. A reset or
step with `oracle: true` also carries the oracle's answer to the new observation (`["ok",
action]` or `["error", [type, message]]`), so an oracle episode costs one round trip per
turn, not two.

Answers are `{"ok": value}`, `{"error": [type name, message]}` (the env raised), or
`{"fatal": why}` just before the worker exits (it ran out of memory). Only what changed
crosses the pipe, against what the client already holds (the system prompt, the tool
schemas, the conversation so far): they are several kilobytes an episode.

Nothing here is trusted by the client: it checks every answer's shape, and what the env
answers is the env's behaviour, judged by the kit outside this process.
"""

from __future__ import annotations

import os
import sys


def _protocol_streams():
    """The request and answer streams, moved off fds 0 and 1 so that a module printing or
    reading does not touch the protocol."""
    requests = os.fdopen(os.dup(0), "rb", buffering=1 << 16)
    answers = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return requests, answers


_REFUSED_EVENTS = ("socket.", "subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn",
                   "os.fork", "os.forkpty", "os.kill", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
                   "shutil.", "ctypes.", "urllib.", "http.", "ftplib.", "smtplib.", "webbrowser.", "pty.",
                   "os.chmod", "os.chown", "os.truncate", "os.symlink", "os.link", "os.utime", "os.unlink",
                   "sys.addaudithook", "os.putenv", "os.unsetenv")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _guard(event: str, args: tuple, _refused: tuple = _REFUSED_EVENTS, _write_flags: int = _WRITE_FLAGS) -> None:
    """PEP 578 audit hook: refuse the outside world through Python's own functions (not a
    boundary: see trace_gym.sandbox.isolation). Its tables are bound at definition, so that
    rebinding the module's names changes nothing."""
    if event.startswith(_refused):
        raise PermissionError(f"sandbox: {event} is refused in an env worker")
    if event == "open":
        mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
        writes = isinstance(mode, str) and any(c in mode for c in "wax+")
        if writes or (isinstance(flags, int) and flags & _write_flags):
            raise PermissionError(f"sandbox: writing {args[0]!r} is refused in an env worker")


def _checked_dataclasses() -> None:
    """`dataclasses.dataclass` that refuses a field name other than an identifier. It pastes
    field names into the code it generates, so a name such as "x=print()" (set through a
    class made by `type()`, or a kept `Field` renamed before a subclass) is code run in
    this worker. trace_gym's own modules keep the function they imported earlier."""
    import dataclasses
    import keyword

    make = dataclasses.dataclass

    def check(cls: type) -> type:
        own = list(cls.__dict__.get("__annotations__", {}))
        inherited = [f.name for base in cls.__mro__[1:] if dataclasses.is_dataclass(base)
                     for f in dataclasses.fields(base)]
        for name in own + inherited:
            if not (type(name) is str and name.isidentifier() and not keyword.iskeyword(name)):
                raise TypeError(f"dataclass field name {name!r:.80} is not an identifier")
        return cls

    def dataclass(cls=None, /, **options):  # noqa: ANN001, ANN202  (dataclasses' own signature)
        if cls is None:
            return lambda c: make(check(c), **options)
        return make(check(cls), **options)

    dataclasses.dataclass = dataclass


def main() -> None:
    """Serve requests until the input ends: import what the worker needs, have jailed
    commands sent to the client, then guard `dataclasses`, install the audit hook, and only
    then load any module."""
    sys.dont_write_bytecode = True
    requests, answers = _protocol_streams()
    # Everything the worker itself needs is imported before the hook and before any module:
    # the command jail too, which loads the C library as it is imported (refused after).
    from trace_gym.sandbox import workspace
    from trace_gym.sandbox.host import Host

    host = Host()
    workspace.set_runner(host.run_command)
    _checked_dataclasses()
    sys.addaudithook(_guard)
    host.serve(requests, answers)


if __name__ == "__main__":
    main()
