"""The exceptions trace-gym raises.

Anything a model can emit becomes an observation, never an exception; these are for
programmer and configuration errors, each with a message that names the bad value and what
is allowed.
"""

from __future__ import annotations

import difflib


class TraceGymError(Exception):
    """Base class of every trace-gym error."""


class UnknownEnv(TraceGymError, KeyError):
    """An environment id that is not registered."""

    def __init__(self, env_id: str, known: list[str]) -> None:
        self.env_id = env_id
        close = difflib.get_close_matches(env_id, known, n=3, cutoff=0.5)
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        super().__init__(
            f"unknown environment {env_id!r}.{hint} Registered: {', '.join(sorted(known))}."
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class InvalidConfig(TraceGymError, ValueError):
    """A configuration value outside its allowed range."""


class ToolError(TraceGymError):
    """A tool refused the call given the world state; shown to the agent as "Error: ..."."""


class EpisodeError(TraceGymError, RuntimeError):
    """The env was driven out of order (step before reset, step after the end)."""


class PolicyError(TraceGymError, RuntimeError):
    """A policy broke its contract with the episode driver (it returned no turn for an
    episode waiting on one, or its model's generation ended abnormally); the message names
    the policy and the episode."""


class MalformedFile(TraceGymError, ValueError):
    """A file trace-gym reads (a lock, a manifest, a record) that is not what it must be; the
    message says which file and why."""


class InternalError(TraceGymError, AssertionError):
    """A broken invariant of trace-gym itself, checked at run time (a bug, never the user's
    input): the message says which."""
