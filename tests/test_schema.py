"""`trace_gym.schema.tool_call_schema`: the one schema constrained decoding writes tool calls
against accepts exactly the calls the env's own validator accepts (for every shipped env's
tools), holds no `$ref`, and survives a self-referring definition."""

from __future__ import annotations

import json

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.driver import make_env
from trace_gym.rng import Rng
from trace_gym.schema import UnsafeSchema, compile_arguments_validator, sample_value, tool_call_schema

ENVS = ("trace/airline-v0", "trace/retail-v0", "trace/precondition_verification-v0",
        "trace/structured_data_reasoning-v0", "trace/multi_step_task_completion-v0",
        "trace/tool_calling_precision-v0")


def _tools(env_id: str) -> list[dict]:
    env = make_env(env_id, prompt_style="compact")
    _, info = env.reset(seed=0)
    env.close()
    return info["tools"]


TOOLS = {env_id: _tools(env_id) for env_id in ENVS}
CHECKS = {env_id: fastjsonschema.compile(tool_call_schema(tools)) for env_id, tools in TOOLS.items()}


@pytest.mark.parametrize("env_id", ENVS)
def test_the_call_schema_has_no_refs(env_id):
    assert "$ref" not in json.dumps(tool_call_schema(TOOLS[env_id]))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ENVS), st.integers(0, 2**32 - 1), st.data())
def test_the_call_schema_accepts_what_the_envs_validator_accepts(env_id, seed, data):
    """A sampled call (arguments from the tool's schema, perhaps one argument dropped or one
    added) passes the call schema exactly when its tool's validator passes it."""
    tool = data.draw(st.sampled_from(TOOLS[env_id]))["function"]
    arguments = sample_value(tool["parameters"], Rng.from_seed(seed))
    change = data.draw(st.sampled_from(["none", "drop", "extra", "wrong_type"]))
    if change == "drop" and arguments:
        arguments.pop(sorted(arguments)[0])
    elif change == "extra":
        arguments["not_an_argument"] = 1
    elif change == "wrong_type" and arguments:
        arguments[sorted(arguments)[0]] = [[]]
    validator = compile_arguments_validator(tool["parameters"])

    def passes(check, value) -> bool:
        try:
            check(value)
        except fastjsonschema.JsonSchemaValueException:
            return False
        return True

    call = {"name": tool["name"], "arguments": arguments}
    assert passes(CHECKS[env_id], call) == passes(validator, arguments)
    assert not passes(CHECKS[env_id], {"name": tool["name"] + "_x", "arguments": arguments})
    assert not passes(CHECKS[env_id], {**call, "extra": 1})


def test_a_self_referring_definition_becomes_any_value_and_foreign_refs_are_refused():
    node = {"$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}}}},
            "type": "object", "properties": {"root": {"$ref": "#/$defs/Node"}}}
    schema = tool_call_schema([{"type": "function", "function": {"name": "walk", "parameters": node}}])
    assert "$ref" not in json.dumps(schema)
    root = schema["anyOf"][0]["properties"]["arguments"]["properties"]["root"]
    assert root["type"] == "object" and root["properties"]["child"] == {}
    with pytest.raises(UnsafeSchema, match="not a local ref"):
        tool_call_schema([{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"x": {"$ref": "https://example.com/x.json"}}}}}])
