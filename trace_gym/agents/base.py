"""The policy interface, the two policies every env supports without a model, and the local
model's engines (`local_policy`). The policies by name: `trace_gym.agents.registry`.

A policy maps (messages, tools) to the agent's next turn, in any form the env accepts
(a tool-call dict, an assistant message, or text). `bind(env, seed, sample)` gives a policy the
episode it acts in; a model-backed policy uses at most its seed (to seed its sampling).
"""

from __future__ import annotations

from typing import Any, Protocol

import gymnasium as gym
import numpy as np

from trace_gym.driver import BatchedPolicy
from trace_gym.errors import InvalidConfig
from trace_gym.messages import Message
from trace_gym.rng import Rng
from trace_gym.schema import sample_value


class Policy(Protocol):
    """A turn-by-turn policy: `bind` it to an episode, then `act` once per agent turn."""

    name: str

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
        """Called after each reset: the episode's env, seed and sample index (a stochastic
        policy seeds itself from them, so an episode is reproducible on its own)."""

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        """The agent's next turn given the conversation so far and the tools (OpenAI
        function schemas): a tool-call dict, an assistant message or text."""
        ...


AnyPolicy = Policy | BatchedPolicy
"""What a registered policy's factory makes: a turn-by-turn `Policy`, or a
`trace_gym.driver.BatchedPolicy` (a local model's, which batches its episodes itself)."""


class OraclePolicy:
    """The env's own oracle: reaches reward 1.0, acting from the observation."""

    name = "oracle"

    def __init__(self) -> None:
        self._env: Any = None

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
        """Keep the episode's env, whose oracle gives the turns."""
        self._env = env.unwrapped

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        """The env oracle's next turn for this conversation."""
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
        """Reseed from (the policy's seed, the episode's seed, its sample), so an episode's
        turns do not depend on what was played before."""
        self.rng = Rng(np.random.default_rng([self.base_seed, seed, sample]))

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        """A canned reply (with probability `reply_rate`, or always when there are no
        tools), else a call to a random tool with schema-valid random arguments."""
        if not tools or self.rng.chance(self.reply_rate):
            return self.rng.choice(_REPLIES)
        fn = self.rng.choice(tools)["function"]
        return {"name": fn["name"], "arguments": sample_value(fn["parameters"], self.rng)}


ENGINES = ("openvino", "torch")
"""The engines a local model runs on: OpenVINO GenAI (`trace_gym.agents.openvino`, the
default: 2.2 times the torch engine's episodes a minute on the embedded agent's capability-env
episodes, benchmarks/engine.py) and the torch engine (`trace_gym.agents.local`: any transformers model, peft adapters
unfused, the trainer's in-process rollouts)."""
DEFAULT_ENGINE = "openvino"
def local_policy(engine: str = DEFAULT_ENGINE, constrain_calls: bool = False, lockstep: bool = False,
                 **kwargs: Any) -> AnyPolicy:
    """A local model on `engine` (the "local" policy): the torch policy's arguments
    (`trace_gym.agents.local.LocalModelPolicy`), `constrain_calls` on OpenVINO only and
    `lockstep` on torch only."""
    if engine not in ENGINES:
        raise InvalidConfig(f"local policy: engine={engine!r} is invalid; allowed: {', '.join(ENGINES)}")
    if engine == "torch":
        if constrain_calls:
            raise InvalidConfig("local policy: constrain_calls exists only on engine='openvino'")
        from trace_gym.agents.local import LocalModelPolicy

        return LocalModelPolicy(lockstep=lockstep, **kwargs)
    if lockstep:
        raise InvalidConfig("local policy: lockstep exists only on engine='torch'")
    from trace_gym.agents.openvino import OpenVINOPolicy

    return OpenVINOPolicy(constrain_calls=constrain_calls, **kwargs)
