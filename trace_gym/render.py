"""Transcripts for people: plain text (render mode "ansi") and rich panels ("human")."""

from __future__ import annotations

from trace_gym.messages import Message

_LABEL = {"system": "SYSTEM", "user": "USER", "assistant": "AGENT", "tool": "TOOL"}
_STYLE = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "yellow"}


def message_text(m: Message, system_chars: int = 200) -> str:
    content = m.get("content") or ""
    if m["role"] == "system" and len(content) > system_chars:
        content = content[:system_chars] + f"... [{len(m['content'])} chars]"
    parts = [content] if content else []
    for tc in m.get("tool_calls") or ():
        parts.append(f"-> {tc['function']['name']}({tc['function']['arguments']})")
    return "\n".join(parts)


def render_ansi(messages: list[Message]) -> str:
    return "\n".join(f"[{_LABEL[m['role']]}] {message_text(m)}" for m in messages) + "\n"


def render_human(messages: list[Message]) -> None:
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    console = Console()
    for m in messages:
        role = m["role"]
        console.print(Panel(Text(message_text(m)), title=_LABEL[role], title_align="left",
                            border_style=_STYLE[role]))
