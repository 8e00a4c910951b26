"""The JSON helpers give json's own output and errors, byte for byte."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.jsondata import dumps, dumps_tree, json_equal, loads

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.text(max_size=8) | st.integers() | st.floats() | st.booleans() | st.none(), inner, max_size=4),
    max_leaves=20,
)


def outcome(fn, value):
    try:
        return "ok", fn(value)
    except Exception as exc:  # noqa: BLE001 (the point is to compare errors)
        return type(exc).__name__, str(exc)


@given(json_values)
def test_dumps_is_json_dumps(value):
    assert dumps(value) == dumps_tree(value) == json.dumps(value)


def test_dumps_errors_are_json_dumps_errors():
    cycle: list = []
    cycle.append(cycle)
    for value in (cycle, {"a": {1, 2}}, {(1, 2): 3}, [object()]):
        assert outcome(dumps, value) == outcome(json.dumps, value)
    assert outcome(dumps, [1]) == ("ok", "[1]")  # a failed call leaves nothing behind


@given(json_values.map(json.dumps) | st.text(max_size=30) | st.sampled_from(
    [" {}", "{} ", "\ufeff{}", "{}x", "", "[1, 2", "nul", "NaN", "1e400", '{"a" : 1, "a": 2}', "{x"]))
def test_loads_is_json_loads(text):
    assert repr(outcome(loads, text)) == repr(outcome(json.loads, text))


@pytest.mark.parametrize("value", [b'{"a": 1}', None, 5])
def test_loads_of_other_types_is_json_loads(value):
    assert outcome(loads, value) == outcome(json.loads, value)


def test_nesting_deeper_than_json_goes_is_a_value_error():
    """json raises RecursionError there; one except clause should cover all bad input."""
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    for read in ("[" * 100_000, b"[" * 100_000):
        with pytest.raises(ValueError, match="deeper than the JSON decoder goes"):
            loads(read)
    with pytest.raises(ValueError, match="deeper than the JSON encoder goes"):
        dumps(deep)


def test_json_equal_keeps_booleans_apart_from_numbers():
    assert True == 1 and [True] == [1]  # what Python's == says, and a verifier must not
    for a, b in ((True, 1), (False, 0), ([True], [1]), ({"n": True}, {"n": 1}), (1, "1"), (None, 0),
                 ({"a": 1}, {"a": 1, "b": 2}), ([1, 2], [1])):
        assert not json_equal(a, b) and not json_equal(b, a), (a, b)
    for a, b in ((1, 1.0), ({"a": [1, {"b": "x"}]}, {"a": [1.0, {"b": "x"}]}), (None, None), (False, False)):
        assert json_equal(a, b) and json_equal(b, a), (a, b)


@given(st.recursive(  # what JSON holds: string keys, finite numbers
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20))
def test_json_equal_holds_for_a_value_and_its_round_trip(value):
    assert json_equal(value, json.loads(json.dumps(value)))


def test_an_atomic_write_leaves_a_file_others_may_read(tmp_path):
    # The env worker's sandbox runs as another user when trace-gym runs as root: it reads the manifest.
    from trace_gym.jsondata import write_json_atomic

    write_json_atomic(tmp_path / "manifest.json", {"a": 1})
    assert (tmp_path / "manifest.json").stat().st_mode & 0o777 == 0o644
