"""The worlds' tools have exactly the target's interface: names, parameter names, types,
nesting and required lists of tau2-bench's 30 tools, and the same READ/WRITE/GENERIC kind."""

from __future__ import annotations

import json

import pytest

from tests.conftest import reference_file
from trace_gym.worlds import airline, retail

DOMAINS = {"airline": airline.TOOLS, "retail": retail.TOOLS}


def shape(schema):
    """The schema without prose (descriptions and titles are each side's own words)."""
    if isinstance(schema, dict):
        return {k: shape(v) for k, v in schema.items() if k not in ("description", "title")}
    if isinstance(schema, list):
        return [shape(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def reference():
    return json.loads(reference_file("tau2/tool_schemas.json").read_text())


@pytest.mark.parametrize("domain", DOMAINS)
def test_same_tool_names(reference, domain):
    assert set(DOMAINS[domain]) == {t["name"] for t in reference[domain]}
    assert len(DOMAINS[domain]) == {"airline": 14, "retail": 16}[domain]


@pytest.mark.parametrize("domain", DOMAINS)
def test_same_parameters_types_nesting_required(reference, domain):
    for ref in reference[domain]:
        ours = DOMAINS[domain][ref["name"]].schema
        assert ours["type"] == "function"
        assert ours["function"]["name"] == ref["name"]
        assert shape(ours["function"]["parameters"]) == shape(ref["openai_schema"]["function"]["parameters"]), ref["name"]


@pytest.mark.parametrize("domain", DOMAINS)
def test_same_tool_kinds(reference, domain):
    for ref in reference[domain]:
        assert DOMAINS[domain][ref["name"]].kind.value == ref["tool_type"], ref["name"]


@pytest.mark.parametrize("domain", DOMAINS)
def test_descriptions_are_our_own(reference, domain):
    for ref in reference[domain]:
        ours = DOMAINS[domain][ref["name"]].schema["function"]["description"]
        assert ours and ours != ref["openai_schema"]["function"]["description"], ref["name"]
