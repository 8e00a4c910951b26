"""The worker's side of the protocol (see trace_gym.sandbox.worker): load env modules, host
env instances, answer requests. Runs inside the sandbox, next to the untrusted module."""

from __future__ import annotations

import base64
import hashlib
import importlib
import inspect
import json
import os
import sys
import types
from dataclasses import asdict, dataclass, field
from typing import Any

from trace_gym.actions import ParsedAction, ParsedCall
from trace_gym.env import TraceEnv
from trace_gym.jsondata import loads
from trace_gym.sandbox.isolation import IsolationUnavailable
from trace_gym.spaces import ActionSpace, ConversationSpace
from trace_gym.tools import ToolKind

RECENT_OPENINGS = 8
"""Openings (with their info) of recent episodes both sides keep: a reset sends what differs
from the closest one (episodes of the same domain share the system prompt and the tools)."""
MAX_TOOLSETS = 256
"""Toolsets remembered per instance before the memory is cleared (a module that builds a
new toolset each episode must not grow the worker)."""


class ProtocolError(Exception):
    """A request the worker cannot read (a client bug, not the env's)."""


# no check for cycles (a cycle in what an env returns is a RecursionError, caught where it is sent)
_dumps = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def load_module(path: str, sha256: str) -> types.ModuleType:
    """Execute a module file whose bytes must have the given sha256 (what the client
    hashed is what runs, even if the file changes in between)."""
    with open(path, "rb") as f:
        code = f.read()
    actual = hashlib.sha256(code).hexdigest()
    if actual != sha256:
        raise ProtocolError(f"{path} changed since it was hashed ({actual[:12]}, expected {sha256[:12]})")
    name = f"trace_gym_env_{sha256[:16]}"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    try:
        # Compiled from the UTF-8 text the static rules read, never from the bytes: a coding
        # declaration (`# -*- coding: unicode_escape -*-`) cannot make it other code.
        text = code.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    exec(compile(text, path, "exec", dont_inherit=True), module.__dict__)  # the module under audit, sandboxed
    return module


def env_class(module: types.ModuleType, attr: str | None) -> type[TraceEnv]:
    """The module's env class: `attr` when given (TypeError unless it is a TraceEnv
    subclass), else the one TraceEnv subclass the module defines (TypeError when it defines
    none or several)."""
    if attr is not None:
        cls = getattr(module, attr, None)
        if not (inspect.isclass(cls) and issubclass(cls, TraceEnv)):
            raise TypeError(f"{attr!r} is not a TraceEnv subclass")
        return cls
    found = [c for c in vars(module).values()
             if inspect.isclass(c) and issubclass(c, TraceEnv) and c.__module__ == module.__name__]
    if len(found) != 1:
        raise TypeError(f"expected exactly one TraceEnv subclass, found {[c.__name__ for c in found] or 'none'}")
    return found[0]


def _toolset_json(toolset: Any) -> list[dict[str, Any]]:
    out = []
    for tool in toolset.values():
        if not isinstance(tool.kind, ToolKind):
            raise TypeError(f"tool {tool.name!r} has kind {tool.kind!r}, not a ToolKind")
        out.append({"schema": tool.schema, "kind": tool.kind.value})
    return out


@dataclass
class Instance:
    """One hosted env, with what the client holds of it, so that answers send only what
    changed."""

    env: TraceEnv
    recent: list = field(default_factory=list)
    """(observation, info) of the last RECENT_OPENINGS resets, as the client holds them."""
    last_obs: list = field(default_factory=list)
    last_info: dict = field(default_factory=dict)
    """The info the client holds (what the last answer brought it to)."""
    toolsets: dict[int, tuple[Any, int]] = field(default_factory=dict)
    """id(toolset) -> (toolset, number); the toolset is held so that its id stays its own."""
    next_toolset: int = 0


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _flag(x: Any, what: str) -> bool:
    if type(x) is bool:
        return x
    if type(x).__name__ == "bool_":  # numpy.bool_
        return bool(x)
    raise TypeError(f"{what} must be a bool, got {type(x).__name__}")


class Host:
    """The env instances of one worker, by the id the client gave each."""

    def __init__(self) -> None:
        self.instances: dict[int, Instance] = {}
        self.modules: dict[str, types.ModuleType] = {}
        self.handlers = {"make": self.make, "reset": self.reset, "step": self.step, "oracle": self.oracle,
                         "task": self.task, "world_hash": self.world_hash, "render": self.render,
                         "close": self.close}
        self.streams: tuple[Any, int] | None = None
        """The request and answer streams while serving (what `run_command` talks over)."""

    # -- the loop ----------------------------------------------------------------------------

    def serve(self, requests: Any, answers: int) -> None:
        """Answer requests, one JSON line each, until the input ends: each answer is the
        handler's result, or the error the env raised; running out of memory is reported and
        ends the worker."""
        self.streams = (requests, answers)
        while True:
            line = requests.readline()
            if not line:
                return
            try:
                request = loads(line.decode())
                handler = self.handlers[request["op"]]
                for gone in request.get("drop", ()):  # proxies the client no longer holds
                    self.close({"id": gone})
            except (ValueError, KeyError, TypeError) as exc:
                answer = {"error": ["ProtocolError", f"unreadable request: {exc}"]}
            else:
                try:
                    answer = {"ok": handler(request)}
                except MemoryError:
                    limit = _memory_limit()
                    _write(answers, _dumps({"fatal": f"ran out of memory{limit}"}))
                    os._exit(3)
                except BaseException as exc:  # noqa: BLE001  (whatever the env raised is its answer)
                    answer = {"error": [type(exc).__name__, _message(exc)]}
            try:
                text = _dumps(answer)
            except (TypeError, ValueError, RecursionError) as exc:
                text = _dumps({"error": ["NotJSON", f"the env returned a value JSON cannot hold ({exc})"]})
            _write(answers, text)

    def run_command(self, files: dict[str, str], argv: list[str], stdin: bytes, limits: Any,
                    keep: bool) -> tuple[Any, dict[str, str] | None, list[str]]:
        """`trace_gym.sandbox.workspace.run` in this worker (its runner): no sandbox starts
        here, so the command goes to the client in the middle of the request being served,
        as `{"run": {files, argv, stdin (base64), limits, keep}}` on the answer stream, and
        the next line of the request stream is the reply: `{"ran": {result, files, notes}}`,
        or `{"failed": [type name, message]}` when the client cannot run it. The client
        checks the request and may run it with less wall-clock time (what is left of the
        request's); a request out of its bounds ends this worker."""
        from trace_gym.sandbox.jail import CommandResult  # imported before any module loads (worker.main)

        if self.streams is None:
            raise RuntimeError("commands run only while the worker serves a request")
        requests, answers = self.streams
        body = {"files": files, "argv": argv, "stdin": base64.b64encode(stdin).decode(),
                "limits": asdict(limits), "keep": keep}
        _write(answers, _dumps({"run": body}))
        line = requests.readline()
        if not line:
            raise ProtocolError("the client went away while running a command")
        reply = loads(line.decode())
        if "failed" in reply:
            name, message = reply["failed"]
            raise (IsolationUnavailable if name == "IsolationUnavailable" else RuntimeError)(message)
        ran = reply["ran"]
        return CommandResult(**ran["result"]), ran["files"], ran["notes"]

    # -- requests --------------------------------------------------------------------------

    def make(self, r: dict) -> dict[str, Any]:
        """Make an env instance from a module file (whose bytes must match the sha256) or a
        trusted entry point, and answer its metadata, render mode and tools."""
        source = r["source"]
        if "entry_point" in source:  # trusted code, by module name (a fresh-process check)
            module_name, _, attr = source["entry_point"].partition(":")
            cls = getattr(importlib.import_module(module_name), attr)
        else:
            key = source["sha256"]
            if key not in self.modules:
                self.modules[key] = load_module(source["path"], source["sha256"])
            cls = env_class(self.modules[key], source.get("attr"))
        kwargs = dict(r.get("kwargs") or {})
        if r.get("render_mode") is not None:
            kwargs["render_mode"] = r["render_mode"]
        env = cls(**kwargs)
        if not isinstance(env.action_space, ActionSpace) or not isinstance(env.observation_space, ConversationSpace):
            raise TypeError("the env's spaces must be trace_gym's ActionSpace and ConversationSpace")
        self.instances[r["id"]] = Instance(env)
        return {"metadata": dict(env.metadata), "render_mode": env.render_mode,
                "tools": _toolset_json(env.action_space.toolset)}

    def _instance(self, r: dict) -> Instance:
        try:
            return self.instances[r["id"]]
        except KeyError:
            raise ProtocolError(f"no env instance {r.get('id')!r} in this worker") from None

    def reset(self, r: dict) -> list[Any]:
        """Reset the instance and answer the opening as changes to the closest recent
        opening the client holds, the task's kind, capabilities and instructions, and its
        toolset (described only when new); with `oracle`, also the oracle's first turn."""
        inst = self._instance(r)
        obs, info = inst.env.reset(seed=r.get("seed"), options=r.get("options"))
        episode, task = inst.env.episode, inst.env.task
        toolset = episode.toolset
        known = inst.toolsets.get(id(toolset))
        described = None
        if known is None or known[0] is not toolset:
            if len(inst.toolsets) >= MAX_TOOLSETS:
                inst.toolsets.clear()
            known = (toolset, inst.next_toolset)
            inst.next_toolset += 1
            inst.toolsets[id(toolset)] = known
            described = _toolset_json(toolset)
        head = {"kind": task.kind, "capabilities_needed": list(task.capabilities_needed),
                "instructions": task.instructions}
        if type(obs) is not list:
            raise TypeError(f"reset() must return a list of messages, got {type(obs).__name__}")
        base, kept = -1, 0
        for i, (opening, _) in enumerate(inst.recent):
            common = _common_prefix(opening, obs)
            if common > kept:
                base, kept = i, common
        changed, gone = _changes(inst.recent[base][1] if base >= 0 else {}, info)
        inst.recent.append((obs, info))
        if len(inst.recent) > RECENT_OPENINGS:
            inst.recent.pop(0)
        inst.last_obs, inst.last_info = obs, info
        answer = [base, kept, obs[kept:], changed, gone, head, known[1], described]
        if r.get("oracle"):
            answer.append(self._oracle_answer(inst))
        return answer

    def step(self, r: dict) -> list[Any]:
        """Step the instance and answer the new messages (or the whole observation when it
        does not extend the last), the reward, the flags and what changed in info; with
        `oracle`, also the oracle's next turn while the episode goes on."""
        inst = self._instance(r)
        action = r["action"] if "action" in r else _parsed(r["parsed"])
        obs, reward, terminated, truncated, info = inst.env.step(action)
        if not _is_number(reward):
            if type(reward).__module__ == "numpy" and hasattr(reward, "item"):
                reward = reward.item()
            if not _is_number(reward):
                raise TypeError(f"the reward must be a number, got {type(reward).__name__}")
        terminated, truncated = _flag(terminated, "terminated"), _flag(truncated, "truncated")
        last = inst.last_obs
        n = len(last)
        if type(obs) is list and len(obs) >= n and obs[:n] == last:
            new, full = obs[n:], None
        else:
            new, full = None, obs
        changed, gone = _changes(inst.last_info, info)
        inst.last_obs, inst.last_info = obs, info
        answer = [new, full, reward, terminated, truncated, changed, gone]
        if r.get("oracle") and not (terminated or truncated):
            answer.append(self._oracle_answer(inst))
        return answer

    def _oracle_answer(self, inst: Instance) -> list[Any]:
        """The oracle's action for the last observation, computed ahead (or its error)."""
        try:
            return ["ok", inst.env.oracle_action(inst.last_obs)]
        except MemoryError:
            raise
        except Exception as exc:  # noqa: BLE001  (reported when the oracle is asked for)
            return ["error", [type(exc).__name__, _message(exc)]]

    def oracle(self, r: dict) -> Any:
        """The env oracle's next turn for the given observation (default: the last one
        sent)."""
        inst = self._instance(r)
        obs = r.get("obs")
        return inst.env.oracle_action(inst.last_obs if obs is None else obs)

    def task(self, r: dict) -> dict[str, Any]:
        """The task as JSON, and its `hidden` field when it has one."""
        task = self._instance(r).env.task
        hidden = getattr(task, "hidden", None)
        return {"json": task.to_json(), "hidden": None if hidden is None else list(hidden)}

    def world_hash(self, r: dict) -> str:
        """The hash of the episode's initial world."""
        return self._instance(r).env.episode.initial_world.hash()

    def render(self, r: dict) -> Any:
        """What the env's `render()` returns."""
        return self._instance(r).env.render()

    def close(self, r: dict) -> None:
        """Close the instance and forget it (nothing when it is gone already)."""
        inst = self.instances.pop(r["id"], None)
        if inst is not None:
            inst.env.close()


def _common_prefix(before: list, now: list) -> int:
    n = 0
    for a, b in zip(before, now):
        if a is not b and a != b:
            break
        n += 1
    return n


def _changes(before: dict, now: dict) -> tuple[dict, list]:
    """The keys of `now` whose values differ from `before`, and the keys it lost."""
    if type(now) is not dict:
        raise TypeError(f"info must be a dict, got {type(now).__name__}")
    changed = {k: v for k, v in now.items() if k not in before or (before[k] is not v and before[k] != v)}
    return changed, [k for k in before if k not in now]


def _parsed(data: list) -> ParsedAction:
    """A pre-read action: the client read an action JSON cannot carry and sends what it read."""
    content, calls = data
    return ParsedAction(content, tuple(ParsedCall(*c) for c in calls))


def _message(exc: BaseException) -> str:
    try:
        return str(exc)[:4000]
    except Exception:  # noqa: BLE001  (an exception whose str fails)
        return f"<{type(exc).__name__} that cannot be shown>"


def _memory_limit() -> str:
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        return f" (limit {soft // 2**20} MiB)" if soft != resource.RLIM_INFINITY else ""
    except (ImportError, OSError, ValueError):
        return ""


def _write(fd: int, text: str) -> None:
    data = memoryview((text + "\n").encode())
    while data:
        data = data[os.write(fd, data):]
