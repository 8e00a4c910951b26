"""How the kit names the env it checks: a registered id, or a module file (generated code
that is not installed yet).

The kit never imports generated code. A trusted env (a target, or a manifest entry with
origin `shipped`) is made in this process; anything else is a `RemoteEnv` whose module is
loaded in a sandboxed env worker (`trace_gym.sandbox`), and the kit drives it through the
env's public surface only.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trace_gym.errors import TraceGymError


@dataclass(frozen=True)
class EnvRef:
    """An env to check: `env_id` (registered) or `path` to a module (and optionally the
    class name `attr`; default: the one TraceEnv subclass the module defines). `pool` hosts
    untrusted code (default: the process's shared pool)."""

    env_id: str | None = None
    path: str | None = None
    attr: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    pool: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if (self.env_id is None) == (self.path is None):
            raise TraceGymError("an EnvRef needs exactly one of env_id and path")

    def _registered_id(self) -> str:
        """`env_id`, for a ref that names a registered env (one without a `path`)."""
        if self.env_id is None:
            raise TraceGymError(f"{self.describe()} is a module file, not a registered env id")
        return self.env_id

    @property
    def trusted(self) -> bool:
        """True for an env the registry runs in this process (targets and shipped envs)."""
        if self.path is not None:
            return False
        from trace_gym.registry import entry

        return entry(self._registered_id()).trusted

    def source(self) -> Any:
        """Where a worker finds the env's class (an EnvSource)."""
        from trace_gym.registry import entry, source_of
        from trace_gym.sandbox.proxy import EnvSource

        if self.path is not None:
            return EnvSource.from_file(self.path, self.attr)
        return source_of(entry(self._registered_id()))

    def make(self, **extra: Any) -> Any:
        """A new, unwrapped env: in this process when trusted, else a RemoteEnv that raises
        (rather than truncates) when its worker overruns a limit, so the kit reports it."""
        kwargs = {**self.kwargs, **extra}
        if self.trusted:
            import gymnasium as gym

            import trace_gym  # noqa: F401  (registers the ids)

            return gym.make(self._registered_id(), **kwargs).unwrapped
        from trace_gym.sandbox.proxy import RemoteEnv

        render_mode = kwargs.pop("render_mode", None)
        return RemoteEnv(self.source(), kwargs, render_mode, pool=self.pool, on_timeout="raise")

    @contextlib.contextmanager
    def fresh_process(self, env: dict[str, str]) -> Iterator[Any]:
        """The env in a new worker process with extra environment variables (trusted envs
        too: their entry point is loaded by name), closed afterwards."""
        from trace_gym.sandbox.pool import WorkerPool, default_pool
        from trace_gym.sandbox.proxy import EnvSource, RemoteEnv

        base = self.pool or default_pool()
        pool: WorkerPool = base.spawn(env)
        try:
            if self.trusted:
                from trace_gym.registry import entry

                source = EnvSource(entry_point=entry(self._registered_id()).entry_point)
            else:
                source = self.source()
            yield RemoteEnv(source, dict(self.kwargs), pool=pool, on_timeout="raise")
        finally:
            pool.close()

    def describe(self) -> str:
        """The env id, or the module path and class, for reports."""
        return self.env_id or f"{self.path}{':' + self.attr if self.attr else ''}"

    def to_json(self) -> str:
        """The ref as JSON; its pool travels as a token, found again by `from_json` in this
        process while the pool lives."""
        data = {"env_id": self.env_id, "path": self.path, "attr": self.attr, "kwargs": self.kwargs}
        if self.pool is not None:
            data["pool"] = self.pool.token
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> EnvRef:
        """The ref `to_json` gave, its pool found again by token."""
        from trace_gym.sandbox.pool import WorkerPool

        data = json.loads(text)
        return cls(**{**data, "pool": WorkerPool.find(data.get("pool"))})
