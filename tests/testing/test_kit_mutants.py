"""Every property of the kit rejects a mutant made to break it, and accepts the template."""

from __future__ import annotations

import pytest

from tests.audit.mutants import KIT_MUTANTS, TEMPLATE, mutant
from trace_gym.testing import PROPERTIES, EnvRef, KitSettings, run_kit, run_property

FAST = KitSettings(examples=10, oracle_seeds=10, episodes=20, soundness_seeds=4, distinct_seeds=60,
                  adversary_seeds=24, wording_seeds=300, gold_seeds=40)


def test_every_property_has_a_mutant():
    # the coding properties' mutants are coding envs: tests/testing/test_coding_kit.py
    assert set(KIT_MUTANTS) == set(PROPERTIES) - {"coding_adversaries", "coding_tasks_not_vacuous"}


def test_template_passes_every_property():
    report = run_kit(EnvRef(path=str(TEMPLATE)), FAST)
    assert report.passed, report.failures()


@pytest.mark.parametrize("name", sorted(KIT_MUTANTS))
def test_property_rejects_its_mutant(tmp_path, name):
    path = mutant(tmp_path, f"mutant_{name}", **KIT_MUTANTS[name])
    result = run_property(name, EnvRef(path=str(path)), FAST)
    assert not result.passed, f"{name} accepted its mutant: {result.detail}"
    assert result.detail


def test_cross_process_mutant_passes_in_process_determinism(tmp_path):
    path = mutant(tmp_path, "mutant_hash_order", **KIT_MUTANTS["determinism_across_processes"])
    assert run_property("determinism", EnvRef(path=str(path)), FAST).passed


def test_no_leak_fails_a_task_without_a_hidden_field(tmp_path):
    """A task that does not say what is hidden cannot be checked: it fails, it does not pass
    with nothing checked (an empty list passes: nothing to hide)."""
    bare_task = ("t = Task('retail', order['order_id'], reason, pre.messages)\n"
                 "class Bare:\n"
                 "    kind, capabilities_needed, max_steps, domain, prefill = t.kind, t.capabilities_needed, "
                 "t.max_steps, t.domain, t.prefill\n"
                 "    order_id, reason, instructions = t.order_id, t.reason, t.instructions\n"
                 "    def to_json(self):\n"
                 "        return {'order_id': self.order_id, 'reason': self.reason}\n"
                 "return Bare(), world")
    path = mutant(tmp_path, "no_hidden_field", task=bare_task)
    assert run_property("oracle_solves", EnvRef(path=str(path)), FAST).passed  # a working env otherwise
    result = run_property("no_leak", EnvRef(path=str(path)), FAST)
    assert not result.passed and "has no 'hidden' field" in result.detail
    assert run_property("no_leak", EnvRef(path=str(TEMPLATE)), FAST).passed


def test_refusing_by_kind_passes_where_the_refusal_must_state_the_record(tmp_path):
    from tests.audit.mutants import REFUSABLE_STATING

    path = mutant(tmp_path, "refusable_stating", **REFUSABLE_STATING)
    result = run_property("refuse_by_kind", EnvRef(path=str(path)), FAST)
    assert result.passed, result.detail
    assert "refuse_by_kind 0.000" in result.detail


def test_refusing_by_kind_learns_from_the_oracle_where_tasks_list_no_rule(tmp_path):
    from tests.audit.mutants import REFUSABLE

    no_rule = {**REFUSABLE, "to_json": "return asdict(self)"}
    path = mutant(tmp_path, "refusable_no_rule", **no_rule)
    result = run_property("refuse_by_kind", EnvRef(path=str(path)), FAST)
    assert not result.passed and "refuse_by_kind adversary scored" in result.detail, result.detail
