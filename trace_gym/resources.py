"""Files that ship with the package: the markdown prompts."""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from trace_gym.errors import TraceGymError


def prompts_dir() -> Traversable:
    """The prompts directory: `prompts/` of a checkout, or the installed `trace_gym.prompts`."""
    checkout = Path(__file__).resolve().parent.parent / "prompts"
    if (checkout / "README.md").is_file():
        return checkout
    return resources.files("trace_gym.prompts")


def read_prompt(name: str) -> str:
    """The text of prompts/<name> (e.g. 'capability_discovery.md')."""
    path = prompts_dir().joinpath(name)
    if not path.is_file():
        available = sorted(p.name for p in prompts_dir().iterdir() if p.name.endswith(".md"))
        raise TraceGymError(f"no prompt {name!r}; available: {', '.join(available)}")
    return path.read_text(encoding="utf-8")
