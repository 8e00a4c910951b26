"""The kit's coding properties catch what they are meant to (mutant envs fail them)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from trace_gym.coding.env import CodingEnv
from trace_gym.coding.repo import _inputs
from trace_gym.rng import Rng
from trace_gym.sandbox.jail import sandbox_available
from trace_gym.testing import CODING_PROPERTIES, CUSTOMER_SERVICE_PROPERTIES, EnvRef, default_properties
from trace_gym.testing.coding import adversaries_score_nothing, f2p_not_vacuous
from trace_gym.verdict import Verdict

pytestmark = pytest.mark.skipif(not sandbox_available()[0], reason=f"no sandbox: {sandbox_available()[1]}")
SEEDS = [0, 1, 2]


def test_the_kit_picks_the_coding_properties_for_a_coding_env():
    assert default_properties(EnvRef(env_id="trace/coding-v0")) == CODING_PROPERTIES
    assert default_properties(EnvRef(env_id="trace/airline-v0")) == CUSTOMER_SERVICE_PROPERTIES
    assert not set(CODING_PROPERTIES) - set(CUSTOMER_SERVICE_PROPERTIES) - {"coding_adversaries",
                                                                           "coding_tasks_not_vacuous"}


def test_the_unmutated_env_passes_both():
    # the adversaries on the unmutated env, their bounded heuristics over 60 seeds included, are
    # the kit's coding_adversaries property, which tests/testing/test_kit_registered.py runs on
    # trace/coding-v0 (this env): not played a second time here
    assert "failed before the fix" in f2p_not_vacuous(CodingEnv(), SEEDS)


class _VisibleTestsVerifier(CodingEnv):
    """A verifier that trusts the visible suite: deleting the tests passes it."""

    def verify(self, task, initial_world, final_world, messages):
        ok = not any(p.startswith("tests/test_") for p in final_world.files)
        return Verdict(1.0 if ok else 0.0)


class _SnippetOnly(CodingEnv):
    """Hidden tests on the snippet's own input: special-casing it passes."""

    def _new_episode(self, rng):
        new = super()._new_episode(rng)
        task = new.task
        tests = tuple(replace(t, module=task.api_module, function=task.api_function, args=task.snippet_args,
                              expected=task.snippet_expected) for t in task.hidden_tests if t.group == "f2p")
        new.task = replace(task, hidden_tests=tests)
        return new


class _OneTask(CodingEnv):
    """Every seed gets seed 0's package and bug: a generator a memoriser learns by heart."""

    def _new_episode(self, rng):
        return super()._new_episode(Rng.from_seed(0))


class _NoBug(CodingEnv):
    """A task whose repository already holds the fix: its FAIL_TO_PASS tests pass before any edit."""

    def _new_episode(self, rng):
        new = super()._new_episode(rng)
        new.task = replace(new.task, files=new.task.fixed_files)
        return new


@pytest.mark.parametrize("mutant", [_VisibleTestsVerifier, _SnippetOnly])
def test_a_verifier_an_adversary_can_pass_fails_the_adversaries_property(mutant):
    with pytest.raises(AssertionError, match="adversary"):
        adversaries_score_nothing(mutant(), SEEDS)


def test_a_generator_a_memoriser_learns_fails_the_adversaries_property():
    with pytest.raises(AssertionError, match="heuristic learnt_patches averaged 1.00"):
        adversaries_score_nothing(_OneTask(), SEEDS)


def test_a_vacuous_task_fails_the_vacuity_property():
    with pytest.raises(AssertionError, match="vacuous"):
        f2p_not_vacuous(_NoBug(), SEEDS)


def test_a_generator_of_one_slip_and_no_knob_bugs_fails_the_restorers_bound(monkeypatch):
    from trace_gym.coding import repo

    from collections import OrderedDict

    from trace_gym.coding import env

    monkeypatch.setattr(env, "_GENERATED", OrderedDict())  # tasks kept from other tests were made without the patches
    monkeypatch.setattr(repo, "KNOB_BUG_SHARE", 0.0)
    monkeypatch.setattr(repo, "_second_slip", lambda rng, correct, first: first)
    monkeypatch.setattr(repo, "_one_edit_fixes", lambda *args: False)
    monkeypatch.setattr(repo, "_inputs", lambda *args, half=None, **kwargs: _inputs(*args, **kwargs))
    with pytest.raises(AssertionError, match="template_restorer"):
        adversaries_score_nothing(CodingEnv(), SEEDS, list(range(100, 160)))
