"""The kit passes on every registered env: the targets here, the shipped capability envs in
their audit (`tests/audit/test_audit.py` runs the whole audit, the kit within it, on each)."""

from __future__ import annotations

import pytest

import trace_gym
from trace_gym.testing import EnvRef, run_kit

TARGETS = [e.id for e in trace_gym.list_envs() if e.kind == "target"]


@pytest.mark.parametrize("env_id", TARGETS)
def test_kit_passes(env_id):
    report = run_kit(EnvRef(env_id=env_id))
    assert report.passed, report.failures()


def test_every_capability_env_is_audited_by_the_suite():
    """A shipped env left out of the audit test would escape the kit altogether."""
    from tests.audit.test_audit import SHIPPED

    capability = {e.id for e in trace_gym.list_envs() if e.kind != "target"}
    assert TARGETS and capability
    assert capability <= set(SHIPPED), capability - set(SHIPPED)
