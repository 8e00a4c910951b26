"""The one action parser: every form an agent's turn can take, and never an exception."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from trace_gym.actions import parse_action
from trace_gym.messages import INVALID_TOOL_CALL


def test_tool_call_dict_with_object_or_string_arguments():
    for args in ({"reservation_id": "ABC123"}, '{"reservation_id": "ABC123"}'):
        parsed = parse_action({"name": "get_reservation_details", "arguments": args})
        assert parsed.content is None
        assert [(c.name, c.arguments) for c in parsed.calls] == [
            ("get_reservation_details", {"reservation_id": "ABC123"})]


def test_openai_assistant_message():
    msg = {"role": "assistant", "content": "checking",
           "tool_calls": [{"id": "x", "type": "function",
                           "function": {"name": "calculate", "arguments": '{"expression": "1+1"}'}}]}
    parsed = parse_action(msg)
    assert parsed.content == "checking"
    assert parsed.calls[0].name == "calculate" and parsed.calls[0].arguments == {"expression": "1+1"}


def test_assistant_message_without_calls_is_a_reply():
    parsed = parse_action({"role": "assistant", "content": "Hello there"})
    assert parsed.is_reply and parsed.content == "Hello there"


def test_hermes_blocks_and_surrounding_text():
    text = ('<think>plan</think>Let me look.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n'
            '</tool_call>\n<tool_call>{"name": "b", "arguments": {}}</tool_call>')
    parsed = parse_action(text)
    assert [c.name for c in parsed.calls] == ["a", "b"]
    assert parsed.content == "Let me look."


def test_text_after_an_unclosed_think_is_thinking_not_an_action():
    call = '<tool_call>{"name": "cancel_reservation", "arguments": {"reservation_id": "ZFA04Y"}}</tool_call>'
    for text in (f"<think>maybe {call}", f"Let me see.<think>first {call} then reply",
                 f"<think>a</think>Sure.<think>and {call}"):
        parsed = parse_action(text)
        assert parsed.calls == (), text
    assert parse_action(f"<think>maybe {call}").content == ""  # an empty reply, not a call
    assert parse_action(f"Let me see.<think>first {call}").content == "Let me see."
    parsed = parse_action({"role": "assistant", "content": f"<think>x {call}"})
    assert parsed.is_reply
    parsed = parse_action(f"<think>plan</think>{call}")  # a closed thought still lets the call run
    assert [c.name for c in parsed.calls] == ["cancel_reservation"]


def test_unclosed_hermes_block_is_still_read():
    parsed = parse_action('<tool_call>{"name": "a", "arguments": {}}')
    assert parsed.calls[0].name == "a" and parsed.calls[0].valid


def test_bare_json_tool_call():
    parsed = parse_action('{"name": "get_user_details", "arguments": {"user_id": "u1"}}')
    assert parsed.calls[0].name == "get_user_details" and parsed.calls[0].valid


def test_plain_text_is_a_reply():
    parsed = parse_action("  I can help with that.  ")
    assert parsed.is_reply and parsed.content == "I can help with that."


def test_broken_tool_call_text_becomes_invalid_call():
    for text in ('<tool_call>{"name": "a", "arguments": </tool_call>', '{"foo": 1}',
                 '<tool_call>[1, 2]</tool_call>', '{"name": "a", "arguments": "not json"}'):
        parsed = parse_action(text)
        assert len(parsed.calls) == 1, text
        call = parsed.calls[0]
        assert call.name == INVALID_TOOL_CALL and not call.valid and call.error
        assert json.loads(call.arguments_json())["raw"]


def test_non_text_actions_become_invalid_calls():
    for action in (None, 3, [1, 2], {"role": "user", "content": "hi"}, {"name": 5}):
        parsed = parse_action(action)
        assert parsed.calls and not parsed.calls[0].valid


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(st.text(max_size=300))
def test_any_text_parses(text):
    parsed = parse_action(text)
    for call in parsed.calls:
        json.loads(call.arguments_json())


@given(json_values)
def test_any_json_value_parses(value):
    parse_action(value)
    parse_action(json.dumps(value))
    parse_action(f"<tool_call>{json.dumps(value)}</tool_call>")


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def _cyclic() -> dict:
    d: dict = {}
    d["self"] = d
    return d


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


DEEP = "[" * 100_000  # degenerate model output: nested deeper than the JSON codec goes


def test_arguments_json_cannot_hold_become_invalid_calls():
    """Dict actions can carry what JSON cannot say; the call is refused, naming why."""
    cases = {
        "cycle": {"name": "a", "arguments": _cyclic()},
        "object": {"name": "a", "arguments": {"x": object()}},
        "unprintable": {"name": "a", "arguments": {"x": _Unprintable()}},
        "deep": {"name": "a", "arguments": {"x": _deep(100_000)}},
        "openai": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "a", "arguments": {"x": object()}}}]},
    }
    for case, action in cases.items():
        (call,) = parse_action(action).calls
        assert not call.valid and "cannot be written as JSON" in call.error, case
        assert isinstance(json.loads(call.arguments_json())["raw"], str), case


def test_nesting_deeper_than_json_reads_becomes_invalid_calls():
    for text in (f'<tool_call>{{"name": "a", "arguments": {DEEP}</tool_call>', f'{{"a": {DEEP}}}',
                 {"name": "a", "arguments": DEEP}):
        (call,) = parse_action(text).calls
        assert not call.valid and "not valid JSON" in call.error
    parsed = parse_action({"role": "assistant", "content": _deep(100_000)})
    assert parsed.calls[0].error == "content must be a string"


class _HostileDict(dict):
    def items(self):
        raise KeyError("boom")

    keys = __iter__ = __repr__ = items


def test_objects_whose_methods_raise_become_invalid_calls():
    for action in (_HostileDict(name="a"), {"name": "a", "arguments": _HostileDict(x=1)}):
        (call,) = parse_action(action).calls
        assert not call.valid and "could not be read (KeyError" in call.error
        assert json.loads(call.arguments_json())["raw"]


def test_a_str_subclass_name_is_read_as_a_plain_str():
    import numpy as np

    call = parse_action({"name": np.str_("a"), "arguments": {}}).calls[0]
    assert call.valid and type(call.name) is str and call.name == "a"
