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

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
        """Called after each reset: the episode's env, seed and sample index (a stochastic
        policy seeds itself from them, so an episode is reproducible on its own)."""

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any: ...


class OraclePolicy:
    """The env's own oracle: reaches reward 1.0, acting from the observation."""

    name = "oracle"

    def __init__(self) -> None:
        self._env: Any = None

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
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
        self.base_seed = seed
        self.rng = Rng(np.random.default_rng(seed))
        self.reply_rate = reply_rate

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
        self.rng = Rng(np.random.default_rng([self.base_seed, seed, sample]))

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        if not tools or self.rng.chance(self.reply_rate):
            return self.rng.choice(_REPLIES)
        fn = self.rng.choice(tools)["function"]
        return {"name": fn["name"], "arguments": sample_value(fn["parameters"], self.rng)}


def check_sampling(owner: str, temperature: Any, top_p: Any, max_tokens: Any) -> None:
    """Refuse sampling settings that no server or `generate()` honours, naming the value
    (a server would refuse them only at the first request, or not at all)."""
    for name, value, ok, rule in (
        ("temperature", temperature, _number(temperature) and temperature >= 0, "must be a number >= 0"),
        ("top_p", top_p, _number(top_p) and 0 < top_p <= 1, "must be a number in (0, 1]"),
        ("max_tokens", max_tokens, type(max_tokens) is int and max_tokens >= 1, "must be an integer >= 1"),
    ):
        if not ok:
            raise InvalidConfig(f"{owner}: {name}={value!r} is invalid: {rule}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value  # not NaN


def _endpoint(**kwargs: Any) -> Policy:
    from trace_gym.agents.endpoint import EndpointPolicy

    return EndpointPolicy(**kwargs)


ENGINES = ("openvino", "torch")
"""The engines a local model runs on: OpenVINO GenAI (`trace_gym.agents.openvino`, the
default: 2.2 times the torch engine's episodes a minute on the embedded agent's capability-env
episodes, benchmarks/engine.py) and the torch engine (`trace_gym.agents.local`: any transformers model, peft adapters
unfused, the trainer's in-process rollouts)."""
DEFAULT_ENGINE = "openvino"
_TORCH_ONLY = ("lockstep",)
_OPENVINO_ONLY = ("constrain_calls",)


def _local(engine: str = DEFAULT_ENGINE, **kwargs: Any) -> Policy:
    if engine not in ENGINES:
        raise InvalidConfig(f"local policy: engine={engine!r} is invalid; allowed: {', '.join(ENGINES)}")
    if engine == "torch":
        openvino_only = [k for k in _OPENVINO_ONLY if kwargs.get(k)]
        if openvino_only:
            raise InvalidConfig(f"local policy: {', '.join(openvino_only)} exists only on engine='openvino'")
        from trace_gym.agents.local import LocalModelPolicy

        return LocalModelPolicy(**{k: v for k, v in kwargs.items() if k not in _OPENVINO_ONLY})
    torch_only = [k for k in _TORCH_ONLY if kwargs.get(k)]
    if torch_only:
        raise InvalidConfig(f"local policy: {', '.join(torch_only)} exists only on engine='torch'")
    from trace_gym.agents.openvino import OpenVINOPolicy

    return OpenVINOPolicy(**{k: v for k, v in kwargs.items() if k not in _TORCH_ONLY})


POLICIES = {"oracle": OraclePolicy, "random": RandomPolicy, "endpoint": _endpoint, "local": _local}


def make_policy(name: str, **kwargs: Any) -> Policy:
    """A policy by name: oracle, random, endpoint (an OpenAI-compatible server) or local (a
    transformers model directory, optionally with a LoRA adapter)."""
    if name not in POLICIES:
        raise InvalidConfig(f"unknown policy {name!r}; allowed: {', '.join(POLICIES)}")
    return POLICIES[name](**kwargs)
