"""Chat messages in the strict OpenAI wire format, as observations carry them.

Tool-call `arguments` are JSON strings; tool-call ids are derived from the turn and the
call's position (`call_<turn>_<i>`), so a seed and a sequence of actions always give the
same bytes. Metadata never goes into a message; it lives in `info`.
"""

from __future__ import annotations

from typing import Any

from trace_gym.jsondata import loads

Message = dict[str, Any]

INVALID_TOOL_CALL = "invalid_tool_call"


def system(content: str) -> Message:
    """A system message."""
    return {"role": "system", "content": content}


def user(content: str) -> Message:
    """A user message."""
    return {"role": "user", "content": content}


def tool_call_id(turn: int, index: int) -> str:
    """The id of the `index`-th call of turn `turn`: `call_<turn>_<index>`."""
    return f"call_{turn}_{index}"


def assistant(content: str | None, calls: list[tuple[str, str]], turn: int) -> Message:
    """An assistant message; `calls` holds (name, arguments as a JSON string)."""
    msg: Message = {"role": "assistant", "content": content}
    if calls:
        msg["tool_calls"] = [
            {
                "id": tool_call_id(turn, i),
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            }
            for i, (name, arguments) in enumerate(calls)
        ]
    return msg


def tool_result(call_id: str, content: str) -> Message:
    """A tool message answering the call `call_id`."""
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def copy_messages(messages: list[Message]) -> list[Message]:
    """A copy that shares no mutable object with the input (observations are handed to
    users, who may edit them; the env's own history must not change, and neither must
    the observations it hands out later). Every step copies the whole conversation, so
    the messages are copied in one C-level pass, then the tool calls of those that have
    some (a plain loop: a comprehension per message would cost more than its copies)."""
    out = list(map(dict.copy, messages))
    for c in out:
        if "tool_calls" in c:
            calls = c["tool_calls"]
            if calls:
                copies = []
                for tc in calls:
                    copies.append({"id": tc["id"], "type": tc["type"], "function": tc["function"].copy()})
                c["tool_calls"] = copies
    return out


def call_arguments(tool_call: dict[str, Any]) -> Any:
    """The parsed arguments of one entry of `tool_calls`; unparsable arguments -> None."""
    try:
        return loads(tool_call.get("function", {}).get("arguments") or "{}")
    except (TypeError, ValueError):
        return None


def tool_calls_of(message: Message) -> list[tuple[str, Any]]:
    """(name, parsed arguments) of an assistant message's calls; unparsable arguments -> None."""
    return [(tc.get("function", {}).get("name"), call_arguments(tc)) for tc in message.get("tool_calls") or ()]


def assistant_texts(messages: list[Message]) -> list[str]:
    """The text of every assistant turn that was delivered to the user (no tool call)."""
    return [
        m["content"]
        for m in messages
        if m["role"] == "assistant" and not m.get("tool_calls") and m.get("content")
    ]
