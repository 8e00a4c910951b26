"""Episodes played by a local model with the token ids and log-probabilities a policy-gradient
loss needs (the trainer's rollouts, and TRL's through `trace_gym.interop`).

`Request` is one episode to play (seed, sample index within its group, hint or not, the seed
of its sampling); `Rollout` is what came back: the reward, the verdict's checks, and one
`Turn` per agent turn (the prompt the model saw, the same prompt without the hint, the
sampled tokens and their log-probabilities under the sampler).

`LocalBackend` generates with `trace_gym.agents.engine` in this process: the episodes of a
chunk advance in lockstep, one batched decode per turn; an episode's cache is kept between
its turns, and the rollouts of a group that open on the same prompt prefill it once and fork
the cache. The trainer's vLLM backend returns the same records from servers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trace_gym.messages import Message


@dataclass(frozen=True)
class Request:
    seed: int
    """The env seed: the group's key."""
    sample: int
    """Index of the rollout within its group."""
    hint: bool
    sampling_seed: int
    """Seeds this episode's token sampling."""


@dataclass
class Turn:
    prompt_ids: list[int]
    """The prompt the model completed (with the hint, when the episode had one)."""
    loss_prompt_ids: list[int]
    """The same conversation with the hint-free system prompt: what the loss conditions on."""
    completion_ids: list[int]
    """The sampled tokens, the stop token included when one ended the turn."""
    logprobs: list[float]
    """Per sampled token, its log-probability under the sampler (at the rollout temperature)."""


@dataclass
class Rollout:
    request: Request
    reward: float
    checks: dict[str, float]
    """Credit of each of the verdict's checks (1.0 / 0.0 for a check without partial credit)."""
    termination_reason: str | None
    turns: list[Turn] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)

    @property
    def seed(self) -> int:
        return self.request.seed

    @property
    def passed(self) -> bool:
        return self.reward >= 1.0 - 1e-9


class Backend(Protocol):
    def play(self, requests: Sequence[Request]) -> list[Rollout]: ...

    def sync(self, model: Any, iteration: int) -> None:
        """Make the next rollouts use the model's current adapter weights."""


def make_env(env_id: str, **kwargs: Any) -> Any:
    """A trace-gym env (a generated one in its sandboxed worker), or an env the user registered
    with gymnasium themselves that follows the same contract."""
    import gymnasium as gym

    from trace_gym.registry import known, make

    if not known(env_id) and env_id in gym.registry:
        return gym.make(env_id, **kwargs)
    return make(env_id, **kwargs)


def render_prompt(tokenizer: Any, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
    """The token ids of the model's prompt for its next turn (its chat template, the tools,
    the generation prompt), as the local policy renders it."""
    text = tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def unhinted(messages: list[Message], system_prompt: str) -> list[Message]:
    """The conversation with its system prompt replaced by the hint-free one."""
    if not messages or messages[0].get("role") != "system":
        raise ValueError("an episode's observation must open with its system prompt")
    return [{**messages[0], "content": system_prompt}, *messages[1:]]


def checks_of(verdict: dict[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for check in (verdict or {}).get("checks", []):
        credit = check.get("credit")
        out[check["name"]] = float(credit if credit is not None else check.get("passed", False))
    return out


@dataclass
class _Live:
    index: int
    request: Request
    env: Any
    obs: list[Message]
    tools: list[dict[str, Any]]
    system_prompt: str
    generator: Any
    seq: Any = None
    turns: list[Turn] = field(default_factory=list)


class LocalBackend:
    """Generation with the trained model itself (peft applies the adapter in place, so the
    rollouts always use the current weights)."""

    def __init__(self, model: Any, tokenizer: Any, env_id: str, env_kwargs: dict[str, Any], *,
                 temperature: float, top_p: float, max_new_tokens: int, batch_episodes: int) -> None:
        from trace_gym.agents.engine import Engine

        self.model, self.tokenizer = model, tokenizer
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs)
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.batch_episodes = batch_episodes
        stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.engine = Engine(model, tokenizer, stop_ids=[stop])

    def sync(self, model: Any, iteration: int) -> None:
        pass

    def play(self, requests: Sequence[Request]) -> list[Rollout]:
        out: list[Rollout] = []
        for start in range(0, len(requests), self.batch_episodes):
            out += self._play(requests[start: start + self.batch_episodes])
        return out

    def _open(self, opened: list[Any], prompt: list[int]) -> Any:
        """A fresh sequence holding `prompt`, forked from the opening that shares most of it
        (prefilling only the rest, once per distinct opening)."""
        from trace_gym.agents.engine import common_prefix

        shared, best = max(((common_prefix(o.ids, prompt), o) for o in opened), key=lambda x: x[0],
                           default=(0, None))
        if best is None or shared < len(prompt) or len(best.ids) != len(prompt):
            best = best.fork(1, shared)[0] if shared else self.engine.new_sequence()
            self.engine.extend(best, prompt)
            opened.append(best)
        return best.fork(1)[0]

    def _play(self, requests: Sequence[Request]) -> list[Rollout]:
        import torch

        was_training = self.model.training
        self.model.eval()
        live, done = [], [None] * len(requests)
        for index, r in enumerate(requests):
            env = make_env(self.env_id, **self.env_kwargs)
            obs, info = env.reset(seed=r.seed, options={"hint": True} if r.hint else None)
            live.append(_Live(index, r, env, obs, info["tools"], info["system_prompt_unhinted"],
                              torch.Generator().manual_seed(r.sampling_seed % 2**63)))
        opened: list[Any] = []  # openings prefilled this chunk: groups share theirs, and the system prompt
        try:
            while live:
                prompts = [render_prompt(self.tokenizer, s.obs, s.tools) for s in live]
                for s, prompt in zip(live, prompts):
                    if s.seq is None:
                        s.seq = self._open(opened, prompt)
                opened.clear()
                generations = self.engine.generate([s.seq for s in live], prompts,
                                                   max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                                   top_p=self.top_p, generators=[s.generator for s in live],
                                                   logprobs=True)
                still = []
                for s, prompt, g in zip(live, prompts, generations):
                    loss_prompt = prompt if not s.request.hint else \
                        render_prompt(self.tokenizer, unhinted(s.obs, s.system_prompt), s.tools)
                    s.turns.append(Turn(prompt, loss_prompt, list(g.token_ids), list(g.logprobs or [])))
                    s.obs, reward, terminated, truncated, info = s.env.step(g.text)
                    if terminated or truncated:
                        done[s.index] = Rollout(s.request, float(reward), checks_of(info.get("verdict")),
                                              info.get("termination_reason"), s.turns, s.obs)
                        s.env.close()
                    else:
                        still.append(s)
                live = still
        finally:
            for s in live:
                s.env.close()
            self.model.train(was_training)
        return done
