"""The async face: steps run off the event loop, many envs at once, one call at a time each."""

from __future__ import annotations

import asyncio
import threading
import time

import gymnasium as gym
import pytest

from trace_gym.interop import AsyncEnv
from trace_gym.testing import policies


def test_async_episodes_equal_the_sync_ones():
    async def episode(env_id: str, seed: int) -> list:
        async with AsyncEnv(env_id) as env:
            obs, _ = await env.areset(seed=seed)
            steps, done = [], False
            while not done:
                step = await env.astep(policies.oracle(env.env.unwrapped, obs))
                steps.append(step[:4])
                obs, done = step[0], step[2] or step[3]
            return steps

    async def both():
        return await asyncio.gather(episode("trace/retail-v0", 3), episode("trace/coding-v0", 3))

    got = asyncio.run(both())
    for env_id, steps in zip(("trace/retail-v0", "trace/coding-v0"), got):
        env = gym.make(env_id)
        obs, _ = env.reset(seed=3)
        for step in steps:
            expected = env.step(policies.oracle(env.unwrapped, obs))
            assert step == expected[:4]
            obs = expected[0]
        assert steps[-1][1] == 1.0


class _Slow(gym.Wrapper):
    """An env whose step blocks its thread for a while, as a worker's pipe or a command does."""

    calls: list[tuple[str, float, float]]

    def step(self, action):
        start = time.monotonic()
        time.sleep(0.2)
        self.calls.append((threading.current_thread().name, start, time.monotonic()))
        return self.env.step(action)


def test_a_blocking_step_leaves_the_loop_free_and_one_env_takes_one_call_at_a_time():
    slow = _Slow(gym.make("trace/retail-v0"))
    slow.calls = []
    env = AsyncEnv(slow)

    async def run():
        await env.areset(seed=0)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.gather(env.astep("Hello?"), env.astep("Hello again?"))
        task.cancel()
        return ticks

    ticks = asyncio.run(run())
    assert ticks >= 20  # the loop ran while the steps blocked (0.4 s of them)
    (_, a0, a1), (_, b0, b1) = slow.calls
    assert a1 <= b0 or b1 <= a0  # never two calls into one env at once


def test_a_call_cancelled_by_a_timeout_still_holds_the_env_until_its_thread_is_done():
    """A trainer's timeout cancels the awaiting task, not the thread: the close that follows
    waits for the step still running there (a close in mid-step would pull a sandboxed env's
    worker from under it)."""
    events: list[str] = []

    class Recording(_Slow):
        def step(self, action):
            out = super().step(action)
            events.append("step end")
            return out

        def close(self):
            events.append("close")
            return self.env.close()

    slow = Recording(gym.make("trace/retail-v0"))
    slow.calls = []
    env = AsyncEnv(slow)

    async def run():
        await env.areset(seed=0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(env.astep("Hello?"), timeout=0.05)
        await env.aclose()
        events.append("closed")

    asyncio.run(run())
    assert events == ["step end", "close", "closed"]  # the step finished, then the close ran


def test_an_id_is_made_with_its_knobs():
    env = AsyncEnv("trace/retail-v0", opening="given")
    assert env.env.spec.kwargs["opening"] == "given"
    with pytest.raises(gym.error.Error):
        AsyncEnv("trace/nope-v0")
