"""Observation and action spaces: `contains` validates, `sample` draws valid values."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import TARGETS
from trace_gym.actions import parse_action
from trace_gym.spaces import ConversationSpace


@pytest.mark.parametrize("env_id", TARGETS)
@given(seed=st.integers(0, 2**31))
def test_sampled_actions_satisfy_the_schemas(env_id, seed):
    space = gym.make(env_id).action_space
    space.seed(seed)
    for _ in range(5):
        action = space.sample()
        assert space.contains(action)
        for call in parse_action(action).calls:
            assert space.toolset[call.name].validate(call.arguments) is None


def test_action_space_rejects_invalid_calls():
    space = gym.make("trace/airline-v0").action_space
    assert space.contains("any reply at all")
    assert space.contains({"name": "get_user_details", "arguments": {"user_id": "x"}})
    assert not space.contains({"name": "get_user_details", "arguments": {"user_id": 3}})
    assert not space.contains({"name": "cancel_pending_order", "arguments": {}})  # a retail tool
    assert not space.contains('<tool_call>{"name": "get_user_details"</tool_call>')
    assert not space.contains(42)


@given(seed=st.integers(0, 2**31))
def test_sampled_conversations_are_valid(seed):
    space = ConversationSpace(seed=seed)
    assert space.contains(space.sample())


def test_conversation_space_rejects_malformed_messages():
    space = ConversationSpace()
    assert not space.contains([{"role": "robot", "content": "hi"}])
    assert not space.contains([{"role": "assistant", "content": None}])
    assert not space.contains([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]}])
    assert not space.contains([{"role": "tool", "content": "x"}])
    assert not space.contains("hello")
