"""Copy-on-write worlds: forks share records until edited; equality and hashes follow content."""

from __future__ import annotations

import pytest

from trace_gym.rng import Rng
from trace_gym.worlds import airline, retail

GENERATORS = {"airline": airline.generate_world, "retail": retail.generate_world}


@pytest.mark.parametrize("domain", GENERATORS)
def test_fork_edit_does_not_touch_parent(domain):
    world = GENERATORS[domain](Rng.from_seed(3))
    before = world.hash()
    fork = world.fork()
    table = "users"
    key = next(iter(world.tables[table]))
    fork.edit(table, key)["email"] = "changed@example.com"
    assert world.hash() == before
    assert fork != world and fork.diff(world) == [f"{table}/{key}"]
    again = world.fork()
    assert again == world and again.hash() == before


@pytest.mark.parametrize("domain", GENERATORS)
def test_same_seed_same_world(domain):
    a, b = GENERATORS[domain](Rng.from_seed(11)), GENERATORS[domain](Rng.from_seed(11))
    assert a == b and a.hash() == b.hash()
    assert GENERATORS[domain](Rng.from_seed(12)).hash() != a.hash()


@pytest.mark.parametrize("domain", GENERATORS)
def test_json_round_trip(domain):
    world = GENERATORS[domain](Rng.from_seed(5))
    assert type(world).from_json(world.to_json()) == world


def _containers(value, out=None):
    """ids of every dict and list inside `value` (itself included)."""
    out = set() if out is None else out
    if isinstance(value, (dict, list)):
        out.add(id(value))
        for v in value.values() if isinstance(value, dict) else value:
            _containers(v, out)
    return out


@pytest.mark.parametrize("domain", GENERATORS)
def test_shaped_copies_equal_a_full_copy_and_share_nothing(domain):
    from trace_gym.jsondata import copy_json

    world_class = type(GENERATORS[domain](Rng.from_seed(0)))
    records = []
    for seed in range(20):
        world = GENERATORS[domain](Rng.from_seed(seed))
        for table in world_class.COPIES:
            records += [(table, r) for r in world.tables[table].values()]
    orders = [r for table, r in records if table == "orders"]
    # Orders after returns, exchanges and cancellations carry optional fields.
    records += [("orders", {**o, "return_items": ["1"], "return_payment_method_id": "paypal_1",
                            "exchange_items": ["2"], "exchange_new_items": ["3"], "cancel_reason": "no longer needed"})
                for o in orders[:20]]
    # A record of another shape falls back to the full copy.
    records += [(table, {**r, "unexpected": {"nested": [1]}}) for table, r in records[:5]]
    assert {table for table, _ in records} == set(world_class.COPIES)
    for table, record in records:
        copied = world_class.COPIES[table](record)
        assert copied == copy_json(record)
        assert not _containers(copied) & _containers(record)
