"""Files that ship with the package: the markdown prompts and the run configurations."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

if sys.version_info >= (3, 11):  # a version check, not an ImportError, so that a type checker follows it
    from importlib.resources.abc import Traversable
else:  # Python 3.10 (importlib.abc's is deprecated from 3.12)
    from importlib.abc import Traversable

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


SHIPPED_CONFIGS = ("coding", "embedded", "gpu-qwen3-30b-a3b")
"""The run configurations in `configs/` (installed as `trace_gym.configs`), by name."""


def configs_dir() -> Traversable:
    """The configs directory: `configs/` of a checkout, or the installed `trace_gym.configs`."""
    checkout = Path(__file__).resolve().parent.parent / "configs"
    if (checkout / "embedded.toml").is_file():
        return checkout
    return resources.files("trace_gym.configs")


def config_path(config: str | Path) -> Path:
    """A run configuration by shipped name ("embedded") or by path; a name that is neither is
    refused, naming the shipped ones."""
    name = str(config)
    if name in SHIPPED_CONFIGS:
        return Path(str(configs_dir().joinpath(f"{name}.toml")))
    path = Path(config)
    if not path.is_file():
        raise TraceGymError(f"no run configuration {name!r}: not a file, and not one of the shipped ones "
                            f"({', '.join(SHIPPED_CONFIGS)})")
    return path


def embedded_config() -> Path:
    """The embedded default's configuration (`configs/embedded.toml`)."""
    return config_path("embedded")
