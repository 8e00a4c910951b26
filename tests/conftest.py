"""Shared test helpers."""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import pytest
from hypothesis import HealthCheck, settings

import trace_gym  # noqa: F401  (registers the envs)

REPO = Path(__file__).resolve().parent.parent
REFERENCE = Path(os.environ.get("TRACE_GYM_REFERENCE", REPO.parent / "shared" / "reference"))
TARGETS = ("trace/airline-v0", "trace/retail-v0")

settings.register_profile("ci", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("full", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def reference_file(name: str) -> Path:
    path = REFERENCE / name
    if not path.is_file():
        pytest.skip(f"reference data {path} not found (set TRACE_GYM_REFERENCE to the "
                    f"shared/reference directory to run this test)")
    return path


def play(env: gym.Env, seed: int, act, options=None):
    """Run one episode with `act(env, obs)`; return (final obs, reward, info)."""
    obs, info = env.reset(seed=seed, options=options)
    reward, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(act(env, obs))
        done = terminated or truncated
    return obs, reward, info


def oracle(env: gym.Env, obs):
    return env.unwrapped.oracle_action(obs)


def _bubblewrap_check():
    from trace_gym.sandbox import bubblewrap_status

    ok, why = bubblewrap_status()
    if not ok and os.environ.get("CI"):
        pytest.fail(f"bubblewrap must run in CI (.ci/run installs it): {why}")
    return ok, why


requires_bubblewrap = pytest.mark.skipif(not _bubblewrap_check()[0],
                                         reason=f"bubblewrap cannot run here: {_bubblewrap_check()[1]}")
"""For tests of what the bubblewrap sandbox stops; in CI (CI set) its absence is a failure."""
