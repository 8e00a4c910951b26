"""What an async trainer's rollout loop needs around one env step: the messages the env
added after a model turn, each tool result answering a call of that turn as the trainer's
history holds it.

The env numbers the tool calls it records its own way, so its tool results name its ids; a
trainer matches a tool result to a call of the turn it sampled, by the id its client
returned. A turn whose calls came as text (hermes `<tool_call>` blocks, a bare JSON call:
a server with no tool parser) has no calls in the trainer's history, and a tool message
answering none is refused by OpenAI-compatible servers: there, each result goes back as a
user message in hermes' `<tool_response>` form, as a hermes chat template renders tool
results anyway.

    >>> recorded = {"role": "assistant", "tool_calls": [{"id": "call_0_0"}]}
    >>> added = [{"role": "tool", "tool_call_id": "call_0_0", "content": "{}"}]
    >>> answering(["served-7"], recorded, added)
    [{'role': 'tool', 'tool_call_id': 'served-7', 'content': '{}'}]
    >>> answering([], recorded, added)
    [{'role': 'user', 'content': '<tool_response>\\n{}\\n</tool_response>'}]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["answering"]


def answering(their_ids: Sequence[str], recorded: dict[str, Any], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`added` (the env's messages after the turn it recorded as `recorded`), its tool results
    renamed to `their_ids`, the ids the model gave the turn's calls (in the order the env
    records them, one for one); where the model's turn had no such calls (they came as text),
    its tool results as user messages."""
    ours = [call["id"] for call in (recorded.get("tool_calls") or [])]
    if len(their_ids) == len(ours):
        rename = dict(zip(ours, their_ids))
        return [{**m, "tool_call_id": rename.get(m["tool_call_id"], m["tool_call_id"])} if m["role"] == "tool"
                else m for m in added]
    return [{"role": "user", "content": f"<tool_response>\n{m['content']}\n</tool_response>"} if m["role"] == "tool"
            else m for m in added]
