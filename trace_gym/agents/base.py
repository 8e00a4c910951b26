"""The policy interface and the two policies every env supports without a model.

A policy maps (messages, tools) to the agent's next turn, in any form the env accepts
(a tool-call dict, an assistant message, or text). `bind(env)` gives a policy the episode
it acts in; model-backed policies ignore it.
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from trace_gym.errors import InvalidConfig
from trace_gym.messages import Message
from trace_gym.rng import Rng
from trace_gym.schema import sample_value


class Policy(Protocol):
    name: str

    def bind(self, env: gym.Env) -> None: ...

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any: ...


class OraclePolicy:
    """The env's own oracle: reaches reward 1.0, acting from the observation."""

    name = "oracle"

    def __init__(self) -> None:
        self._env: Any = None

    def bind(self, env: gym.Env) -> None:
        self._env = env.unwrapped

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        if self._env is None:
            raise InvalidConfig("the oracle policy needs its env: call bind(env) first")
        return self._env.oracle_action(messages)


_REPLIES = ("Hello! How can I help you today?", "Could you tell me more?", "Thank you.",
            "Let me check that for you.", "Is there anything else?")


class RandomPolicy:
    """Schema-valid tool calls with random arguments, and now and then a canned reply."""

    name = "random"

    def __init__(self, seed: int = 0, reply_rate: float = 0.3) -> None:
        self.rng = Rng(np.random.default_rng(seed))
        self.reply_rate = reply_rate

    def bind(self, env: gym.Env) -> None:
        pass

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        if not tools or self.rng.chance(self.reply_rate):
            return self.rng.choice(_REPLIES)
        fn = self.rng.choice(tools)["function"]
        return {"name": fn["name"], "arguments": sample_value(fn["parameters"], self.rng)}


POLICIES = {"oracle": OraclePolicy, "random": RandomPolicy}


def make_policy(name: str, **kwargs: Any) -> Policy:
    if name not in POLICIES:
        raise InvalidConfig(f"unknown policy {name!r}; allowed: {', '.join(POLICIES)}")
    return POLICIES[name](**kwargs)
