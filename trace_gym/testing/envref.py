"""How the kit names the env it checks: a registered id, or a module file (generated code
that is not installed yet), so the same check can run in this process or in a sandbox."""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.env import TraceEnv
from trace_gym.errors import TraceGymError


@dataclass(frozen=True)
class EnvRef:
    """An env to check: `env_id` (registered) or `path` to a module (and optionally the
    class name `attr`; default: the one TraceEnv subclass the module defines)."""

    env_id: str | None = None
    path: str | None = None
    attr: str | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.env_id is None) == (self.path is None):
            raise TraceGymError("an EnvRef needs exactly one of env_id and path")

    def env_class(self) -> type[TraceEnv]:
        if self.env_id is not None:
            import gymnasium as gym

            import trace_gym  # noqa: F401  (registers the ids)

            return type(gym.spec(self.env_id).make(**self.kwargs).unwrapped)
        return load_env_class(Path(self.path), self.attr)

    def make(self, **extra: Any) -> TraceEnv:
        """A new, unwrapped env."""
        if self.env_id is not None:
            import gymnasium as gym

            import trace_gym  # noqa: F401

            return gym.make(self.env_id, **{**self.kwargs, **extra}).unwrapped
        return self.env_class()(**{**self.kwargs, **extra})

    def describe(self) -> str:
        return self.env_id or f"{self.path}{':' + self.attr if self.attr else ''}"

    def to_json(self) -> str:
        return json.dumps({"env_id": self.env_id, "path": self.path, "attr": self.attr, "kwargs": self.kwargs})

    @classmethod
    def from_json(cls, text: str) -> EnvRef:
        return cls(**json.loads(text))


_LOADED: dict[str, type[TraceEnv]] = {}


def load_env_class(path: Path, attr: str | None = None) -> type[TraceEnv]:
    """Import a module from its file and return its env class."""
    path = path.resolve()
    key = f"{path}:{attr}"
    if key in _LOADED:
        return _LOADED[key]
    name = f"trace_gym_loaded_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TraceGymError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    if attr is not None:
        cls = getattr(module, attr, None)
        if not (inspect.isclass(cls) and issubclass(cls, TraceEnv)):
            raise TraceGymError(f"{path}: {attr!r} is not a TraceEnv subclass")
    else:
        found = [c for c in vars(module).values()
                 if inspect.isclass(c) and issubclass(c, TraceEnv) and c.__module__ == name]
        if len(found) != 1:
            raise TraceGymError(f"{path}: expected exactly one TraceEnv subclass, found "
                                f"{[c.__name__ for c in found] or 'none'}")
        cls = found[0]
    _LOADED[key] = cls
    return cls
