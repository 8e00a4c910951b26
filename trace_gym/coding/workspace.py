"""A coding episode's repository: `Repo`, its files as path -> text.

It lives in memory, so an episode forks, compares and records it like any world, and nothing
of it outlives the episode on disk: a command runs over a copy of its files in the command
jail (`trace_gym.sandbox.workspace.run`).

The names that ran commands over a repository (`run`, `runner_argv`, `clean_path`,
`set_runner`, the bounds on what a command may leave) moved to `trace_gym.sandbox.workspace`;
they are still importable from here for one release, each with a DeprecationWarning
(`trace_gym.deprecation.moved`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trace_gym.deprecation import moved
from trace_gym.jsondata import sha256_json


@dataclass(eq=False)
class Repo:
    """A repository as path -> text; the world of a coding episode."""

    files: dict[str, str] = field(default_factory=dict)

    def fork(self) -> Repo:
        """A copy (texts are immutable, so copying the dict is enough)."""
        return Repo(dict(self.files))

    def freeze(self) -> None:
        """Nothing to do: every change makes a new dict entry (the World interface)."""

    def hash(self) -> str:
        """Content hash: equal repositories, equal hashes."""
        return sha256_json(self.files)

    def to_json(self) -> dict[str, Any]:
        """The repository as JSON."""
        return {"files": dict(self.files)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Repo) and self.files == other.files

    __hash__ = None  # type: ignore[assignment]  # mutable, like dict


__getattr__ = moved(__name__, "trace_gym.sandbox.workspace", (
    "FILE_KEEP_BYTES", "MAX_DEPTH", "MAX_ENTRIES", "MAX_FILES", "REPO_KEEP_BYTES", "RUNNER", "RUNNER_IN_SANDBOX",
    "Runner", "clean_path", "materialize", "read_back", "run", "runner_argv", "set_runner",
))
