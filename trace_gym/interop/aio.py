"""An async face for any trace-gym env, for async-first trainers (verifiers, ART, SkyRL's
generators): `await env.areset(...)`, `await env.astep(action)`.

A step may wait: on a sandboxed env's worker (a pipe), on the coding env's commands (a
subprocess). Each call runs in a thread of its own (`asyncio.to_thread`), so the event loop
goes on serving other episodes meanwhile; one env takes one call at a time, as a Gymnasium
env must, while many envs step at once. The lock that holds one call at a time is taken in
the call's thread: a call whose awaiting task is cancelled (a trainer's timeout) runs on in
its thread, and the env's next call (the `aclose` after the timeout) waits for it.

    >>> import asyncio
    >>> from trace_gym.interop import AsyncEnv
    >>> async def episode():
    ...     async with AsyncEnv("trace/retail-v0") as env:
    ...         messages, info = await env.areset(seed=0)
    ...         messages, reward, terminated, truncated, _ = await env.astep("Hello! How can I help?")
    ...         return messages[-1]["role"], reward, terminated or truncated
    >>> asyncio.run(episode())
    ('user', 0.0, False)
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import gymnasium as gym

__all__ = ["AsyncEnv"]


class AsyncEnv:
    """An env (an id, made with `gym.make`, or a made one) with awaitable `areset`, `astep`,
    `aclose`; `env` is the Gymnasium env itself."""

    def __init__(self, env: str | gym.Env, **kwargs: Any) -> None:
        import trace_gym  # noqa: F401  (registers the envs)

        self.env = gym.make(env, **kwargs) if isinstance(env, str) else env
        self._lock = threading.Lock()

    def _locked(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return fn(*args, **kwargs)

    async def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(self._locked, fn, *args, **kwargs)

    async def areset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[list, dict]:
        """`env.reset`, off the event loop."""
        return await self._call(self.env.reset, seed=seed, options=options)

    async def astep(self, action: Any) -> tuple[list, float, bool, bool, dict[str, Any]]:
        """`env.step`, off the event loop."""
        return await self._call(self.env.step, action)

    async def aclose(self) -> None:
        """`env.close`, off the event loop."""
        await self._call(self.env.close)

    async def __aenter__(self) -> AsyncEnv:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
