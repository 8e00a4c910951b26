"""Gymnasium spaces for conversations (observations) and agent turns (actions).

`contains` validates; `sample` draws valid values from the space's own seeded generator.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.spaces import Space

from trace_gym.actions import parse_action
from trace_gym.jsondata import loads
from trace_gym.messages import Message
from trace_gym.rng import Rng
from trace_gym.schema import sample_value
from trace_gym.tools import Toolset

_ROLES = frozenset({"system", "user", "assistant", "tool"})


def _valid_wire_call(tc: Any) -> bool:
    if not isinstance(tc, dict) or not isinstance(tc.get("id"), str):
        return False
    fn = tc.get("function")
    if tc.get("type") != "function" or not isinstance(fn, dict):
        return False
    if not isinstance(fn.get("name"), str) or not isinstance(fn.get("arguments"), str):
        return False
    try:
        return isinstance(loads(fn["arguments"]), dict)
    except ValueError:
        return False


def is_valid_message(m: Any) -> bool:
    """True for one chat message in the strict OpenAI wire format."""
    if not isinstance(m, dict) or m.get("role") not in _ROLES:
        return False
    role, content = m["role"], m.get("content")
    if role == "assistant":
        calls = m.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(map(_valid_wire_call, calls))):
            return False
        return isinstance(content, str) or (content is None and bool(calls))
    if role == "tool":
        return isinstance(content, str) and isinstance(m.get("tool_call_id"), str)
    return isinstance(content, str)


class ConversationSpace(Space[list]):
    """Observations: the conversation so far, a list of OpenAI chat messages."""

    def __init__(self, seed: int | np.random.Generator | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """False: a conversation has no fixed-size array form."""
        return False

    def contains(self, x: Any) -> bool:
        """True for a list of valid OpenAI chat messages."""
        return isinstance(x, list) and all(map(is_valid_message, x))

    def sample(self, mask: Any = None, probability: Any = None) -> list[Message]:
        """A short random conversation: a system prompt, a user message and up to three tool
        calls with their results."""
        rng = Rng(self.np_random)
        convo: list[Message] = [
            {"role": "system", "content": "You are a helpful agent."},
            {"role": "user", "content": rng.letters(rng.integer(1, 20), "abcdef ghij")},
        ]
        for turn in range(rng.integer(0, 3)):
            cid = f"call_{turn}_0"
            convo.append({
                "role": "assistant", "content": None,
                "tool_calls": [{"id": cid, "type": "function",
                                "function": {"name": "lookup", "arguments": "{}"}}],
            })
            convo.append({"role": "tool", "tool_call_id": cid, "content": "{}"})
        return convo

    def __repr__(self) -> str:
        return "ConversationSpace()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ConversationSpace)


def _schema_space(toolset: Toolset, reply_rate: float, generator: np.random.Generator | None) -> ActionSpace:
    space = ActionSpace(toolset, reply_rate=reply_rate)
    if generator is not None:
        space._np_random = generator
    return space


class ActionSpace(Space[Any]):
    """Agent turns for one toolset: a tool-call dict, an assistant message, or text.

    `contains` is true when every call the action makes names one of the tools and its
    arguments satisfy that tool's schema (plain text, a reply, is always valid). `sample`
    draws schema-valid tool calls, and now and then a short reply.
    """

    def __init__(self, toolset: Toolset, seed: int | np.random.Generator | None = None,
                 reply_rate: float = 0.1) -> None:
        self.toolset = toolset
        self.reply_rate = reply_rate
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        """False: an agent turn has no fixed-size array form."""
        return False

    def contains(self, x: Any) -> bool:
        """True for text or a dict whose every call parses, names one of the tools and has
        arguments that satisfy its schema (a plain reply is always valid)."""
        if not isinstance(x, (str, dict)):
            return False
        parsed = parse_action(x)
        for call in parsed.calls:
            tool = self.toolset.get(call.name)
            if not call.valid or tool is None or tool.validate(call.arguments) is not None:
                return False
        return True

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        """A tool call with schema-valid arguments, or a short reply (with probability
        `reply_rate`, or always when there are no tools)."""
        rng = Rng(self.np_random)
        if rng.chance(self.reply_rate) or not len(self.toolset):
            return "Thank you, is there anything else?"
        tool = self.toolset[rng.choice(list(self.toolset))]
        return {"name": tool.name, "arguments": sample_value(tool.parameters, rng)}

    def __repr__(self) -> str:
        return f"ActionSpace(tools={list(self.toolset)})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled with its tools' schemas only, all that `contains` and `sample` read: a
        # space crosses to a vector env's parent process, and a tool's function is its env's.
        return _schema_space, (self.toolset.schema_copy(), self.reply_rate, self._np_random)

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ActionSpace) and list(other.toolset) == list(self.toolset)
