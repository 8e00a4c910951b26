"""What an async trainer's rollout loop needs around one env step: the messages the env
added after a model turn, answering that turn's tool calls by the model's own ids.

The env numbers the tool calls it records its own way (the same calls, in the same order),
so its tool results name its ids; a trainer matches a tool result to the call of the turn it
sampled, by the id its client returned."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["answering"]


def answering(their_ids: Sequence[str], recorded: dict[str, Any], added: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`added` (the env's messages after the turn it recorded as `recorded`), its tool results
    renamed to `their_ids`, the ids the model gave the turn's calls; left as the env wrote
    them when the counts differ (a turn the env did not take as those calls)."""
    ours = [call["id"] for call in (recorded.get("tool_calls") or [])]
    if len(their_ids) != len(ours):
        return added
    rename = dict(zip(ours, their_ids))
    return [{**m, "tool_call_id": rename.get(m["tool_call_id"], m["tool_call_id"])} if m["role"] == "tool" else m
            for m in added]
