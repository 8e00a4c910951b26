"""`RemoteEnv`: a Gymnasium env whose episodes run in an env worker (trace_gym.sandbox.worker).

It offers exactly the surface the rest of trace-gym uses, and nothing of the module:
`reset(seed=, options=)`, `step(action)`, `oracle_action(obs)`, `task` (`to_json()`,
`hidden`, `kind`, `capabilities_needed`, `instructions`), `episode` (`toolset`, `turn`,
`initial_world.hash()`, `messages`, `termination_reason`), the observation and action
spaces (the action space's `toolset`: names, kinds, schemas), `metadata`, `render()` and
`close()`. Values cross the pipe as JSON and are checked on arrival.

A step that overruns the per-request bound, or a worker that dies mid-episode, ends the
episode as truncated with reward 0, `info["termination_reason"]` saying why
(`env_timeout: ...`, `env_worker_lost: ...`) and `info["verdict"]` None: a rollout or a
training batch goes on. With `on_timeout="raise"` (the property kit) it raises instead.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from trace_gym.actions import parse_action
from trace_gym.errors import EpisodeError, InvalidConfig
from trace_gym.jsondata import copy_json
from trace_gym.messages import copy_messages
from trace_gym.replay import ReplayPickling
from trace_gym.sandbox.host import RECENT_OPENINGS
from trace_gym.sandbox.pool import (
    EnvWorkerError,
    RemoteEnvError,
    Worker,
    WorkerLost,
    WorkerPool,
    WorkerTimeout,
    default_pool,
)
from trace_gym.spaces import ActionSpace, ConversationSpace, is_valid_message
from trace_gym.tools import Tool, ToolKind, Toolset


@dataclass(frozen=True)
class EnvSource:
    """Where a worker finds an env class: a module file (untrusted, loaded only if its bytes
    still have `sha256`) or, for trusted code, an entry point `module:Class`."""

    path: str | None = None
    attr: str | None = None
    sha256: str | None = None
    entry_point: str | None = None

    @classmethod
    def from_file(cls, path: str | Path, attr: str | None = None) -> EnvSource:
        """The source of an env module file, hashed now (InvalidConfig when it cannot be
        read)."""
        path = Path(path).resolve()
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InvalidConfig(f"{path}: cannot read the env module ({exc.strerror})") from None
        return cls(str(path), attr, hashlib.sha256(data).hexdigest())

    def to_json(self) -> dict[str, Any]:
        """The source as the worker's `make` request carries it."""
        if self.entry_point is not None:
            return {"entry_point": self.entry_point}
        return {"path": self.path, "attr": self.attr, "sha256": self.sha256}

    def describe(self) -> str:
        """The entry point, or the file path with `:attr` when given."""
        return self.entry_point or f"{self.path}{':' + self.attr if self.attr else ''}"


def _remote_only(*args: Any, **kwargs: Any) -> Any:
    raise EnvWorkerError("this tool runs in the env worker; call env.step() instead")


def _toolset(data: Any) -> Toolset:
    if type(data) is not list:
        raise WorkerLost("sent a toolset that is not a list")
    tools = []
    for item in data:
        schema = item.get("schema") if type(item) is dict else None
        fn = schema.get("function") if type(schema) is dict else None
        if (type(schema) is not dict or type(fn) is not dict or type(fn.get("name")) is not str
                or type(fn.get("parameters")) is not dict):
            raise WorkerLost(f"sent a tool that is not an OpenAI function schema: {str(item)[:200]}")
        try:
            kind = ToolKind(item.get("kind"))
        except ValueError:
            raise WorkerLost(f"sent a tool kind outside READ/WRITE/GENERIC: {item.get('kind')!r}") from None
        tools.append(Tool(schema, kind, _remote_only))
    return Toolset(tools)


class RemoteTask:
    """The task of the episode in progress: `to_json()` and `hidden` are fetched from the
    worker once per episode, on first use."""

    def __init__(self, env: RemoteEnv, head: dict[str, Any]) -> None:
        self._env = env
        self._data: dict[str, Any] | None = None
        self.kind: str = head["kind"]
        self.capabilities_needed: list[str] = head["capabilities_needed"]
        self.instructions: str = head["instructions"]

    def _fetch(self) -> dict[str, Any]:
        if self._data is None:
            data = self._env._call("task")
            if type(data) is not dict or type(data.get("json")) is not dict:
                raise EnvWorkerError("the env's task.to_json() is not a JSON object")
            if data.get("hidden") is not None and not isinstance(data["hidden"], list):
                raise EnvWorkerError("the env's task.hidden is not a list")
            self._data = data
        return self._data

    def to_json(self) -> dict[str, Any]:
        """A copy of the task's JSON."""
        return copy_json(self._fetch()["json"])

    @property
    def hidden(self) -> list[Any]:
        """The task's `hidden` field; AttributeError when the task has none."""
        hidden = self._fetch()["hidden"]
        if hidden is None:
            raise AttributeError("the task has no 'hidden' field")
        return list(hidden)


class RemoteWorld:
    """The episode's initial world as the client sees it: only its hash, fetched on first
    use."""

    def __init__(self, env: RemoteEnv) -> None:
        self._env = env
        self._hash: str | None = None

    def hash(self) -> str:
        """The hash of the episode's initial world, fetched from the worker once."""
        if self._hash is None:
            value = self._env._call("world_hash")
            if type(value) is not str:
                raise EnvWorkerError("the env's world hash is not a string")
            self._hash = value
        return self._hash


class RemoteEpisode:
    """What the kit and rollouts read of the episode in progress."""

    def __init__(self, env: RemoteEnv, toolset: Toolset, seed: int | None) -> None:
        self.toolset = toolset
        self.initial_world = RemoteWorld(env)
        self.seed = seed
        self.turn = 0
        self.messages: list[dict[str, Any]] = []
        self.termination_reason: str | None = None

    @property
    def over(self) -> bool:
        """True once the episode has a termination reason."""
        return self.termination_reason is not None


def _json_exact(value: Any, depth: int = 0) -> bool:
    """True when JSON carries `value` unchanged (so the worker reads the very action the
    caller sent): str/int/float/bool/None, lists, and dicts with str keys."""
    t = type(value)
    if t is str or t is int or t is float or t is bool or value is None:
        return t is not int or abs(value) < 10**4000
    if depth > 400:
        return False
    if t is list:
        return all(_json_exact(v, depth + 1) for v in value)
    if t is dict:
        return all(type(k) is str and _json_exact(v, depth + 1) for k, v in value.items())
    return False


MAX_EPISODE_BYTES = 16 * 2**20
"""The most an env's worker may send over one episode, its reset and every step together
(an episode is a few kilobytes; each answer is bounded by MAX_ANSWER_BYTES)."""


class RemoteEnv(ReplayPickling, gym.Env[list, Any]):
    """A Gymnasium env backed by an env worker (see the module docstring). It pickles by
    replay (`trace_gym.replay`): the copy makes its instance in a worker of its own
    process's pool; an episode reset without a seed, whose draws the worker made, does not
    pickle."""

    metadata: dict[str, Any] = {"render_modes": ["ansi", "human"], "render_fps": 4}

    def __init__(self, source: EnvSource, kwargs: dict[str, Any] | None = None, render_mode: str | None = None,
                 *, pool: WorkerPool | None = None, on_timeout: str = "truncate", **knobs: Any) -> None:
        if on_timeout not in ("truncate", "raise"):
            raise InvalidConfig(f"on_timeout={on_timeout!r} is invalid; allowed: truncate, raise")
        self.source = source
        self.kwargs = {**(kwargs or {}), **knobs}
        self.render_mode = render_mode
        self.on_timeout = on_timeout
        self.pool = pool or default_pool()
        self._worker: Worker | None = None
        self._id = 0
        self._episode: RemoteEpisode | None = None
        self._task: RemoteTask | None = None
        self._info: dict[str, Any] = {}
        self._recent: list[tuple[list[dict[str, Any]], dict[str, Any]]] = []
        """(observation, info) of recent resets, as the worker keeps them."""
        self._oracle_used = False
        self._prefetched: Any = None
        self._toolsets: dict[int, Toolset] = {}
        self._rendered = 0
        self._generator: np.random.Generator | None = None
        self._pending_seed: int | None = None
        self._episode_bytes = 0
        self._connect()

    # -- the worker --------------------------------------------------------------------------

    _next_id = 0

    def _connect(self) -> None:
        """Make this env's instance in a worker (again, after a worker was lost)."""
        RemoteEnv._next_id += 1
        self._id = RemoteEnv._next_id
        worker = self.pool.worker_for(self.source.path)
        worker.instances += 1
        self._worker = worker
        self._toolsets, self._recent, self._info, self._prefetched = {}, [], {}, None
        try:
            made = worker.call({"op": "make", "id": self._id, "source": self.source.to_json(),
                                "kwargs": self.kwargs, "render_mode": self.render_mode})
        except BaseException:
            worker.instances -= 1
            self._worker = None
            raise
        if type(made) is not dict or type(made.get("metadata")) is not dict:
            raise WorkerLost("answered 'make' outside the protocol")
        self.metadata = made["metadata"]
        self.action_space = ActionSpace(_toolset(made.get("tools")))
        self.observation_space = ConversationSpace()

    def _call(self, op: str, **fields: Any) -> Any:
        worker = self._worker
        if worker is None:
            raise EpisodeError("this env is closed")
        answer = worker.call({"op": op, "id": self._id, **fields})
        # What the client holds of an episode grows with every answer: bounded, like each answer.
        self._episode_bytes += worker.answer_bytes
        if self._episode_bytes > MAX_EPISODE_BYTES:
            worker.kill(f"sent more than {MAX_EPISODE_BYTES // 2**20} MiB in one episode")
            raise WorkerLost(worker.lost or "")
        return answer

    # -- seeding: gymnasium's np_random, as TraceEnv keeps it (made on first read) ---------

    @property
    def _np_random(self) -> np.random.Generator | None:
        if self._pending_seed is not None:
            self._generator = np.random.default_rng(self._pending_seed)
            self._generator.bit_generator.random_raw()
            self._pending_seed = None
        return self._generator

    @_np_random.setter
    def _np_random(self, generator: np.random.Generator | None) -> None:
        self._generator, self._pending_seed = generator, None

    # -- the env API -------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, dict[str, Any]]:
        """Reset the env in its worker (reconnecting first when the worker was lost) and
        check what comes back: the opening messages and the info."""
        if type(seed) is int and seed >= 0:
            self._pending_seed = self._np_random_seed = seed
        else:
            super().reset(seed=seed)
        if self._worker is None or self._worker.lost is not None:
            self._close_instance()
            self._connect()
        request: dict[str, Any] = {"seed": seed, "options": options}
        if self._oracle_used:
            request["oracle"] = True
        self._episode_bytes = 0
        answer = self._call("reset", **request)
        if type(answer) is not list or len(answer) != 8 + bool(self._oracle_used):
            raise WorkerLost("answered 'reset' outside the protocol")
        base, kept, new, changed, gone, head, number, described = answer[:8]
        if type(base) is not int or not -1 <= base < len(self._recent):
            raise WorkerLost("answered 'reset' building on an opening it never sent")
        opening, base_info = self._recent[base] if base >= 0 else ([], {})
        if type(kept) is not int or not 0 <= kept <= len(opening) or type(new) is not list:
            raise WorkerLost("answered 'reset' with messages outside the protocol")
        obs = opening[:kept] + new
        self._info = base_info
        info = self._merge_info(changed, gone)
        if not all(map(is_valid_message, new)):  # the kept ones were checked when they came
            raise EnvWorkerError("the env's reset returned an observation that is not a list of chat messages")
        if type(head) is not dict or not {"kind", "capabilities_needed", "instructions"} <= head.keys():
            raise WorkerLost("answered 'reset' without the task's kind, capabilities and instructions")
        if described is not None:
            self._toolsets[number] = _toolset(described)
        if number not in self._toolsets:
            raise WorkerLost("named a toolset it never described")
        self._recent.append((obs, info))
        if len(self._recent) > RECENT_OPENINGS:
            self._recent.pop(0)
        self._episode = RemoteEpisode(self, self._toolsets[number], seed)
        self._episode.messages = obs
        self._episode.turn = info["turn"] if type(info.get("turn")) is int else 0
        self._task = RemoteTask(self, head)
        self._prefetched = answer[8] if self._oracle_used else None
        self._rendered = 0
        if type(seed) is int and seed >= 0:
            self._record_reset(seed, options)
        else:
            self._replay, self._unreplayable = None, "its episode was reset without a seed (the worker drew it)"
        return copy_messages(obs), dict(info)

    def _merge_info(self, changed: Any, gone: Any) -> dict[str, Any]:
        """The info after an answer: what the client held, with the changes applied."""
        if type(changed) is not dict or type(gone) is not list:
            raise EnvWorkerError("the env's info is not a dict")
        info = {k: v for k, v in self._info.items() if k not in gone} if gone else dict(self._info)
        info.update(changed)
        self._info = info
        return info

    def step(self, action: Any) -> tuple[list, float, bool, bool, dict[str, Any]]:
        """Step the env in its worker and check what comes back; a worker that times out or
        is lost ends the episode as truncated with reward 0 (or raises, with
        `on_timeout="raise"`)."""
        ep = self._episode
        if ep is None:
            raise EpisodeError("step() called before reset()")
        if ep.over:
            raise EpisodeError(f"step() called after the episode ended ({ep.termination_reason}); call reset()")
        if _json_exact(action):
            request = {"action": action}
        else:  # an object no model writes: send what the parser reads of it
            parsed = parse_action(action)
            request = {"parsed": [parsed.content, [list(c) for c in parsed.calls]]}
        if self._oracle_used:
            request["oracle"] = True
        self._prefetched = None
        self._record_action(action)
        try:
            answer = self._call("step", **request)
        except WorkerLost as exc:
            if self.on_timeout == "raise":
                raise
            kind = "env_timeout" if isinstance(exc, WorkerTimeout) else "env_worker_lost"
            return self._lost(f"{kind}: the env worker {exc.reason}")
        if type(answer) is not list or len(answer) not in (7, 8):
            raise WorkerLost("answered 'step' outside the protocol")
        new, full, reward, terminated, truncated, changed, gone = answer[:7]
        if full is not None:
            messages = new = full
        elif type(new) is list:
            messages = ep.messages + new
        else:
            raise WorkerLost("answered 'step' without messages")
        if (type(new) is not list or not all(map(is_valid_message, new)) or type(reward) not in (int, float)
                or type(terminated) is not bool or type(truncated) is not bool):
            raise EnvWorkerError("the env's step returned values outside the env contract (messages, reward or flags)")
        ep.messages = messages
        info = self._merge_info(changed, gone)
        ep.turn = info["turn"] if type(info.get("turn")) is int else ep.turn + 1
        if terminated or truncated:
            reason = info.get("termination_reason")
            ep.termination_reason = reason if type(reason) is str else "ended"
        elif len(answer) == 8:
            self._prefetched = answer[7]
        if self.render_mode == "human":
            self.render()
        return copy_messages(messages), reward, terminated, truncated, dict(info)

    def _lost(self, reason: str) -> tuple[list, float, bool, bool, dict[str, Any]]:
        """End the episode as truncated: its worker is gone."""
        ep = self._episode
        assert ep is not None
        ep.termination_reason = reason
        self._unreplayable = f"its episode ended when its worker was lost ({reason})"
        info = {**self._info, "termination_reason": reason, "verdict": None}
        self._info = info
        return copy_messages(ep.messages), 0.0, False, True, dict(info)

    def _pickle_arguments(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        args, kwargs = self._made_with  # the pool is this process's: a copy takes its own
        return args, {k: v for k, v in kwargs.items() if k != "pool"}

    def _pickle_extra(self) -> dict[str, Any]:
        return {"_oracle_used": self._oracle_used}

    def oracle_action(self, messages: list[dict[str, Any]]) -> Any:
        """The env's oracle, from the conversation given. The worker keeps the last
        observation, so the usual case sends nothing; once the oracle has been asked for,
        each reset and step brings its next answer along."""
        ep = self.episode
        current = messages == ep.messages
        prefetched, self._prefetched = self._prefetched, None
        if current and prefetched is not None:
            status, value = prefetched if type(prefetched) is list and len(prefetched) == 2 else (None, None)
            if status == "ok":
                return value
            if status == "error" and type(value) is list and len(value) == 2:
                raise RemoteEnvError(str(value[0]), str(value[1]))
            raise WorkerLost("sent an oracle answer outside the protocol")
        self._oracle_used = True
        return self._call("oracle", obs=None if current else messages)

    @property
    def episode(self) -> RemoteEpisode:
        """The episode in progress (raises EpisodeError before the first reset)."""
        if self._episode is None:
            raise EpisodeError("no episode yet: call reset()")
        return self._episode

    @property
    def task(self) -> RemoteTask:
        """The task of the episode in progress (raises EpisodeError before the first reset)."""
        self.episode  # noqa: B018  (raises before the first reset)
        assert self._task is not None
        return self._task

    def render(self) -> str | None:
        """In "human" mode, print the messages not yet shown here; in "ansi" mode, the
        worker's text with every terminal control character escaped."""
        if self.render_mode is None or self._episode is None:
            return None
        if self.render_mode == "human":  # printed here, where the user is
            from trace_gym.render import render_human

            render_human(self._episode.messages[self._rendered:])
            self._rendered = len(self._episode.messages)
            return None
        out = self._call("render")
        if out is not None and type(out) is not str:
            raise EnvWorkerError("the env's render() in ansi mode returned something other than text")
        from trace_gym.render import printable

        return None if out is None else printable(out, keep_newlines=True)  # the module's text, never a terminal's orders

    def code_sha256(self) -> str:
        """The sha256 recorded in trajectories: the module's and the trace_gym modules it
        builds on (see trace_gym.provenance)."""
        from trace_gym.provenance import source_sha256

        return source_sha256(self.source)

    def _close_instance(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.instances -= 1
            if worker.lost is None:
                try:
                    worker.call({"op": "close", "id": self._id})
                except EnvWorkerError:
                    pass

    def close(self) -> None:
        """Close this env's instance in its worker."""
        self._close_instance()

    def __del__(self) -> None:
        # No request from here (the collector may run inside one): the worker closes the
        # instance with the next request it gets.
        try:
            worker = self._worker
            if worker is not None:
                worker.instances -= 1
                worker.dropped.append(self._id)
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass

    def __repr__(self) -> str:
        return f"RemoteEnv({self.source.describe()})"
