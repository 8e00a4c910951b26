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
