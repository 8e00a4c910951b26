"""Episodes played by a local model with the token ids and log-probabilities a policy-gradient
loss needs (the trainer's rollouts, and TRL's through `trace_gym.interop`).

The records are the driver's: `EpisodeRequest` is one episode to play (seed, sample index
within its group, hint or not, the seed of its sampling); `PlayedEpisode` is what came back
(the reward, the verdict's checks, and one `Turn` per agent turn: the prompt the model saw,
the same prompt without the hint, the sampled tokens and their log-probabilities under the
sampler). Their old names here, `Request` and `Rollout`, are deprecated.

`LocalBackend` plays requests through the episode driver with the model being trained as a
batched policy (`LocalModelPolicy.from_model`): every episode in flight shares one decode
loop, each keeps its cache between its turns, and the rollouts of a group that open on the
same prompt prefill it once. The trainer's vLLM backend returns the same records from servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from trace_gym.deprecation import renamed
from trace_gym.driver import EpisodeRequest, PlayedEpisode, Turn

__all__ = ["Backend", "EpisodeRequest", "LocalBackend", "PlayedEpisode", "Turn", "sampling_seed"]


def sampling_seed(*key: int) -> int:
    """An episode's sampling seed, a function of its key alone (the run's seed, then what
    tells the episode apart: iteration, env seed, sample): GRPO's rollouts, validation and
    TRL's rollouts each derive theirs with a key of their own shape."""
    import numpy as np

    return int(np.random.SeedSequence(list(key)).generate_state(1)[0])


class Backend(Protocol):
    """Where the trainer's rollouts come from: the trained model itself (`LocalBackend`) or
    servers (the trainer's vLLM backend)."""

    def play(self, requests: Sequence[EpisodeRequest]) -> list[PlayedEpisode]:
        """Every request played, as one rollout each."""
        ...

    def sync(self, model: Any, iteration: int) -> None:
        """Make the next rollouts use the model's current adapter weights."""


class LocalBackend:
    """Generation with the trained model itself (peft applies the adapter in place, so the
    rollouts always use the current weights)."""

    def __init__(self, model: Any, tokenizer: Any, env_id: str, env_kwargs: dict[str, Any], *,
                 temperature: float, top_p: float, max_new_tokens: int, batch_episodes: int) -> None:
        from trace_gym.agents.local import LocalModelPolicy

        self.model, self.tokenizer = model, tokenizer
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs)
        self.batch_episodes = batch_episodes
        self.policy = LocalModelPolicy.from_model(model, tokenizer, name="trained", temperature=temperature,
                                                  top_p=top_p, max_new_tokens=max_new_tokens)

    @property
    def engine(self) -> Any:
        """The policy's generation engine."""
        return self.policy.engine

    def sync(self, model: Any, iteration: int) -> None:
        """Nothing to do: the model is the trained one, its adapter applied in place."""

    def play(self, requests: Sequence[EpisodeRequest]) -> list[PlayedEpisode]:
        """Every request played, in request order."""
        from trace_gym.driver import play_in_order

        self.policy.engine.forget()  # the weights may have changed since the last call
        return play_in_order(requests, self.policy, env_id=self.env_id, env_kwargs=self.env_kwargs,
                             in_flight=self.batch_episodes)


# `Request` was also the target's name for a customer's request: the old names still work, warning.
__getattr__ = renamed(__name__, {"Request": "EpisodeRequest", "Rollout": "PlayedEpisode"}, home="trace_gym.driver")
