"""How a local model sees a conversation: its prompt's token ids, and the conversation with
the hint-free system prompt (what the trainer's loss conditions on)."""

from __future__ import annotations

from typing import Any

from trace_gym.errors import EpisodeError
from trace_gym.messages import Message


def render_prompt(tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
    """The token ids of the model's prompt for its next turn (its chat template, the tools,
    the generation prompt), as the local policy renders it."""
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def unhinted(messages: list[Message], system_prompt: str) -> list[Message]:
    """The conversation with its system prompt replaced by the hint-free one."""
    if not messages or messages[0].get("role") != "system":
        raise EpisodeError("an episode's observation must open with its system prompt")
    return [{**messages[0], "content": system_prompt}, *messages[1:]]
