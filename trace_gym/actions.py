"""The one action parser: every form an agent's turn can take becomes a `ParsedAction`.

Accepted forms (docs/envs.md, "The env contract"):
- a tool-call dict: `{"name": ..., "arguments": {...} or "<json>"}`;
- an OpenAI assistant message: `{"role": "assistant", "content": ..., "tool_calls": [...]}`;
- raw model text: hermes `<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks
  (several allowed), a bare JSON object that is a tool call, or plain text (a reply).

Nothing here raises on model output. Text that tries to be a tool call and fails to parse
(a `<tool_call>` block, or a JSON object that is not a valid call) becomes one call named
`invalid_tool_call` carrying the raw text and the reason, which the env answers with an
"Error: ..." tool message. `<think>...</think>` reasoning is dropped, and so is everything
after a `<think>` that is never closed: half a thought is thinking, not an action (a tool
call written inside it is not run).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

from trace_gym.jsondata import dumps, dumps_tree, loads
from trace_gym.messages import INVALID_TOOL_CALL

_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL)
_TOOL_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|\Z)", re.DOTALL)


# ParsedCall and ParsedAction are named tuples rather than frozen dataclasses: as
# immutable, and several times cheaper to build (every step builds them).


class ParsedCall(NamedTuple):
    """A call as the agent wrote it. `error` is set when it could not be read as a call."""

    name: str
    arguments: Any
    text: str
    """The arguments as the conversation records them: a valid call's as JSON, an invalid
    one's as `{"raw": <what the agent wrote>}`."""
    error: str | None = None

    @property
    def valid(self) -> bool:
        """True when the call was read as a call (`error` is None)."""
        return self.error is None

    def arguments_json(self) -> str:
        """The arguments as the conversation records them (`text`)."""
        return self.text


# What reading or writing an agent's JSON can raise (`jsondata`): ValueError for text that
# is not JSON, nesting deeper than the codec goes, a cycle or an integer too long to print;
# TypeError for values that JSON cannot hold (a dict action can carry any Python object).
_JSON_ERRORS = (TypeError, ValueError)


class ParsedAction(NamedTuple):
    """One agent turn: its text for the user (None when it has none) and its tool calls."""

    content: str | None
    calls: tuple[ParsedCall, ...]

    @property
    def is_reply(self) -> bool:
        """True when the turn makes no tool call (a reply to the user)."""
        return not self.calls


def _invalid(raw: str, error: str) -> ParsedCall:
    return ParsedCall(INVALID_TOOL_CALL, None, dumps_tree({"raw": raw}), error=error)


_CALL_KEYS = frozenset({"name", "arguments", "id", "type"})


def _call_from_mapping(obj: Any, raw: Callable[[], str]) -> ParsedCall:
    """A call from `{"name", "arguments"}` (arguments a dict or a JSON string). `raw()`
    gives the text an invalid call carries; it is only asked for then (serialising every
    valid call would cost a second json.dumps per step)."""
    if not isinstance(obj, dict):
        return _invalid(raw(), f"a tool call must be a JSON object, got {type(obj).__name__}")
    if "function" in obj and isinstance(obj["function"], dict):  # OpenAI tool_calls entry
        obj = obj["function"]
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return _invalid(raw(), "a tool call needs a non-empty string 'name'")
    if type(name) is not str:  # a subclass (numpy.str_, ...): its plain str
        name = str.__str__(name)
    if not obj.keys() <= _CALL_KEYS:
        extra = set(obj) - _CALL_KEYS
        return _invalid(raw(), f"unexpected key(s) in tool call: {', '.join(sorted(map(str, extra)))}")
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = loads(args) if args.strip() else {}
        except _JSON_ERRORS as exc:
            return _invalid(raw(), f"arguments of {name} are not valid JSON ({exc})")
    if not isinstance(args, dict):
        return _invalid(raw(), f"arguments of {name} must be a JSON object")
    try:
        text = dumps(args)
    except _JSON_ERRORS as exc:  # a dict action holding a cycle or a non-JSON value
        return _invalid(raw(), f"arguments of {name} cannot be written as JSON ({exc})")
    return ParsedCall(name, args, text)


def _parse_json_call(text: str) -> ParsedCall:
    try:
        obj = loads(text)
    except _JSON_ERRORS as exc:
        return _invalid(text, f"tool call is not valid JSON ({exc})")
    return _call_from_mapping(obj, lambda: text)


def parse_text(text: str) -> ParsedAction:
    """Read raw model text: drop `<think>` reasoning, then take its `<tool_call>` blocks, a
    bare JSON object as one call, or else the text as a reply."""
    if "<think>" in text:
        text = _THINK.sub("", text)
    if "<tool_call>" in text:
        calls = tuple(_parse_json_call(m.strip()) for m in _TOOL_BLOCK.findall(text))
        content = _TOOL_BLOCK.sub("", text).strip() or None
        return ParsedAction(content, calls)
    stripped = text.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        return ParsedAction(None, (_parse_json_call(stripped),))
    return ParsedAction(stripped, ())


def _parse_message(msg: dict) -> ParsedAction:
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        return ParsedAction(None, (_invalid(_dump(content), "content must be a string"),))
    raw_calls = msg.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        return ParsedAction(content, (_invalid(_dump(raw_calls), "tool_calls must be a list"),))
    if not raw_calls:
        return parse_text(content or "")
    calls = tuple(_call_from_mapping(tc, partial(_dump, tc)) for tc in raw_calls)
    return ParsedAction(_THINK.sub("", content).strip() or None if content else None, calls)


def _dump(obj: Any) -> str:
    """The agent's action as text, for an invalid call to carry (repr if not JSON)."""
    try:
        return dumps(obj)
    except Exception:  # not JSON, or an object whose methods fail
        pass
    try:
        return repr(obj)[:500]
    except Exception:  # nested deeper than repr goes, or an object whose repr fails
        return f"<{type(obj).__name__} that cannot be shown>"


def parse_action(action: Any) -> ParsedAction:
    """Read any agent action (see the module docstring); never raises."""
    try:
        return _parse_action(action)
    except Exception as exc:  # objects no model writes: a dict subclass whose methods raise, ...
        return ParsedAction(None, (_invalid(_dump(action), f"the action could not be read "
                                            f"({type(exc).__name__}: {exc})"),))


def _parse_action(action: Any) -> ParsedAction:
    if type(action) is ParsedAction:  # already read (an env worker gets what its client read)
        return action
    if isinstance(action, str):
        return parse_text(action)
    if isinstance(action, dict):
        if "role" in action or "tool_calls" in action or "content" in action:
            if action.get("role", "assistant") != "assistant":
                return ParsedAction(None, (_invalid(_dump(action), "the action must be an assistant message"),))
            return _parse_message(action)
        return ParsedAction(None, (_call_from_mapping(action, lambda: _dump(action)),))
    return ParsedAction(
        None,
        (_invalid(_dump(action), f"unsupported action type {type(action).__name__}: "
                  "send text, a tool call or an assistant message"),),
    )
