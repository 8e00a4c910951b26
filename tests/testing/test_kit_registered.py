"""The kit passes on every registered env, the target envs included."""

from __future__ import annotations

import pytest

import trace_gym
from trace_gym.testing import EnvRef, run_kit


@pytest.mark.parametrize("env_id", [e.id for e in trace_gym.list_envs()])
def test_kit_passes(env_id):
    report = run_kit(EnvRef(env_id=env_id))
    assert report.passed, report.failures()
