"""Transcripts for people: plain text (render mode "ansi") and rich panels ("human")."""

from __future__ import annotations

from trace_gym.messages import Message

_LABEL = {"system": "SYSTEM", "user": "USER", "assistant": "AGENT", "tool": "TOOL"}
_STYLE = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "yellow"}


def printable(text: str, keep_newlines: bool = False) -> str:
    """`text` with every character a terminal would act on or hide written as an escape
    (`\\x1b`, `\\u202e`): control characters (ANSI sequences, carriage returns), format
    characters (bidirectional overrides, zero-width) and the like. For any text from outside
    that reaches a person, such as a module's error in an audit report: it cannot redraw what
    the report says. Newlines are kept when asked."""
    if text.isprintable():
        return text
    out = []
    for c in text:
        if c.isprintable() or (keep_newlines and c == "\n"):
            out.append(c)
        else:
            code = ord(c)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return "".join(out)


def message_text(m: Message, system_chars: int = 200) -> str:
    """A message's text and its tool calls (`-> name(arguments)`), one per line; a system
    prompt longer than `system_chars` is cut, with its length noted."""
    content = m.get("content") or ""
    if m["role"] == "system" and len(content) > system_chars:
        content = content[:system_chars] + f"... [{len(m['content'])} chars]"
    parts = [content] if content else []
    for tc in m.get("tool_calls") or ():
        parts.append(f"-> {tc['function']['name']}({tc['function']['arguments']})")
    return "\n".join(parts)


def render_ansi(messages: list[Message]) -> str:
    """The conversation as plain text, one labelled message after another; what a terminal
    would act on (ANSI sequences, bidirectional overrides) is written as an escape, as
    `printable` does, since an agent's or a tool's text reaches a person here."""
    return "\n".join(f"[{_LABEL[m['role']]}] {printable(message_text(m), keep_newlines=True)}"
                     for m in messages) + "\n"


def render_human(messages: list[Message]) -> None:
    """Print the messages as rich panels, one per message, labelled and coloured by role."""
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    console = Console()
    for m in messages:
        role = m["role"]
        console.print(Panel(Text(printable(message_text(m), keep_newlines=True)), title=_LABEL[role], title_align="left",
                            border_style=_STYLE[role]))
