"""trace-gym envs in other RL trainers.

**TRL.** `GRPOTrainer` groups the `num_generations` completions of one dataset row, so a
dataset with one row per seed makes every group share its seed, as group-by-seed GRPO
needs. `trl_dataset` builds it (the row's prompt is the episode's opening conversation, as
JSON); `TRLRollouts` is a `rollout_func` that plays each row's episodes with the trainer's
own model, several turns each, and returns them as TRL takes multi-turn completions: one
token sequence per episode whose `env_mask` is 1 on the model's sampled tokens and 0 on
the tool results and customer turns between them (no gradient), with the sampler's
log-probabilities; `trace_reward` is the reward function that reads the env's verdict.

    from trl import GRPOConfig, GRPOTrainer
    from trace_gym.interop import TRLRollouts, trl_dataset, trace_reward

    rollouts = TRLRollouts("trace/precondition_verification-v0", tokenizer)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=trace_reward,
                          train_dataset=trl_dataset("trace/precondition_verification-v0", range(64)),
                          rollout_func=rollouts, args=GRPOConfig(num_generations=8, ...))

**Any other trainer.** `play(env_id, seed, generate)` plays one episode with any
`generate(messages, tools) -> text` function (through the episode driver) and returns its
trajectory record (messages, reward, verdict); `score(env_id, seed, turns)` replays the
agent's turns (texts) and returns the verifier's reward, so a trainer that keeps only the
agent's texts can still be paid by the env. Episodes are pure functions of (env id, knobs,
seed, actions), so a replay scores what the episode scored:

    >>> from trace_gym.interop import play, score
    >>> def generate(messages, tools):
    ...     return "Sorry, I cannot help with that."
    >>> record = play("trace/retail-v0", 0, generate)
    >>> record["reward"], record["passed"], record["termination_reason"]
    (0.0, False, 'user_stop')
    >>> score("trace/retail-v0", 0, [m["content"] for m in record["messages"] if m["role"] == "assistant"])
    0.0
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from trace_gym.driver import make_env
from trace_gym.errors import TraceGymError
from trace_gym.interop.aio import AsyncEnv
from trace_gym.messages import Message

Generate = Callable[[list[Message], list[dict[str, Any]]], Any]


# -- any trainer ---------------------------------------------------------------------------

class _Generate:
    """A turn-by-turn policy over a `generate(messages, tools)` function."""

    def __init__(self, generate: Generate) -> None:
        self.generate = generate
        self.name = getattr(generate, "__name__", "generate")

    def bind(self, env: Any, seed: int = 0, sample: int = 0) -> None:
        pass

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> Any:
        return self.generate(messages, tools)


def play(env_id: str, seed: int, generate: Generate, *, hint: bool = False, **env_kwargs: Any) -> dict[str, Any]:
    """One episode played by `generate`; its trajectory record (an env that fails gives a
    record with `error` and reward 0; an error of `generate` is raised)."""
    from trace_gym.driver import EpisodeRequest
    from trace_gym.driver import play as drive

    (played,) = drive([EpisodeRequest(seed, hint=hint)], _Generate(generate), env_id=env_id, env_kwargs=env_kwargs)
    return played.record()


def score(env_id: str, seed: int, turns: Sequence[Any], **env_kwargs: Any) -> float:
    """The reward of the episode in which the agent took `turns` (texts, tool-call dicts or
    assistant messages), replayed from the seed; 0 when the turns run out before it ends."""
    env = make_env(env_id, **env_kwargs)
    try:
        env.reset(seed=seed)
        for turn in turns:
            _, reward, terminated, truncated, _ = env.step(turn)
            if terminated or truncated:
                return float(reward)
        return 0.0
    finally:
        env.close()


# -- TRL -----------------------------------------------------------------------------------

def trl_dataset(env_id: str, seeds: Iterable[int], **env_kwargs: Any) -> Any:
    """A `datasets.Dataset` with one row per seed: `prompt` (the opening conversation as
    JSON), `env_id` and `seed`."""
    from datasets import Dataset

    rows: dict[str, list[str | int]] = {"prompt": [], "env_id": [], "seed": []}
    env = make_env(env_id, **env_kwargs)
    try:
        for seed in seeds:
            obs, _ = env.reset(seed=int(seed))
            rows["prompt"].append(json.dumps({"env_id": env_id, "seed": int(seed), "messages": obs}))
            rows["env_id"].append(env_id)
            rows["seed"].append(int(seed))
    finally:
        env.close()
    return Dataset.from_dict(rows)


def trace_reward(completions: Any, trace_reward: list[float], **kwargs: Any) -> list[float]:
    """TRL reward function: the env's reward of each episode (set by `TRLRollouts`)."""
    return list(trace_reward)


def episode_sequence(turns: Sequence[Any]) -> tuple[list[int], list[int], list[float], list[int]]:
    """(prompt ids, completion ids, logprobs, env_mask) of one multi-turn episode as one
    sequence: the first prompt, then each turn's sampled tokens (mask 1) and the tokens the
    next prompt adds (mask 0). Where the next prompt does not extend what came before (a
    template that renders an earlier turn differently), the sequence follows the prompt
    the model saw and the earlier tokens it re-rendered lose their mask."""
    prompt = list(turns[0].prompt_ids)
    seq, mask, logp = list(prompt), [0] * len(prompt), [0.0] * len(prompt)
    for turn in turns:
        p = list(turn.loss_prompt_ids)
        shared = 0
        for a, b in zip(seq, p):
            if a != b:
                break
            shared += 1
        if shared < len(seq):  # re-rendered history: keep the shared part, take the prompt's tokens
            seq, mask, logp = seq[:shared], mask[:shared], logp[:shared]
        seq += p[len(seq):]
        mask += [0] * (len(p) - len(mask))
        logp += [0.0] * (len(p) - len(logp))
        seq += turn.completion_ids
        mask += [1] * len(turn.completion_ids)
        logp += list(turn.logprobs)
    n = len(turns[0].loss_prompt_ids)
    n = min(n, len(seq))
    return seq[:n], seq[n:], logp[n:], mask[n:]


class TRLRollouts:
    """A TRL `rollout_func`: each prompt (a row of `trl_dataset`, repeated `num_generations`
    times by TRL's sampler, in order) becomes one episode played with the trainer's model."""

    def __init__(self, env_id: str, tokenizer: Any, *, temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 128, batch_episodes: int = 64, seed: int = 0, **env_kwargs: Any) -> None:
        self.env_id, self.tokenizer, self.env_kwargs = env_id, tokenizer, env_kwargs
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.batch_episodes, self.seed = batch_episodes, seed
        self.calls = 0

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, list[Any]]:
        """Play one episode per prompt with the trainer's current model and return, per
        episode, its prompt ids, completion ids, logprobs, env_mask and reward
        (`trace_reward`), as TRL's `rollout_func` returns them."""
        from trace_gym.agents.episodes import EpisodeRequest, LocalBackend, sampling_seed

        requests: list[EpisodeRequest] = []
        seen: dict[int, int] = {}
        for prompt in prompts:
            try:
                row: Any = json.loads(prompt) if isinstance(prompt, str) else None  # JSON, checked below
                seed = int(row["seed"])
            except (ValueError, TypeError, KeyError):
                raise TraceGymError("TRLRollouts takes the prompts of trace_gym.interop.trl_dataset "
                                    f"(JSON with a seed); got {str(prompt)[:80]!r}") from None
            if row.get("env_id") != self.env_id:
                raise TraceGymError(f"a row of {row.get('env_id')} given to the rollouts of {self.env_id}")
            k = seen[seed] = seen.get(seed, -1) + 1
            requests.append(EpisodeRequest(seed, k, False, sampling_seed(self.seed, self.calls, seed, k)))
        self.calls += 1
        model = trainer.accelerator.unwrap_model(trainer.model) if hasattr(trainer, "accelerator") else trainer.model
        backend = LocalBackend(model, self.tokenizer, self.env_id, self.env_kwargs, temperature=self.temperature,
                               top_p=self.top_p, max_new_tokens=self.max_new_tokens,
                               batch_episodes=self.batch_episodes)
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
                                     "trace_reward": []}
        for rollout in backend.play(requests):
            prompt_ids, completion_ids, logprobs, mask = episode_sequence(rollout.turns)
            out["prompt_ids"].append(prompt_ids)
            out["completion_ids"].append(completion_ids)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
            out["trace_reward"].append(rollout.reward)
        return out
