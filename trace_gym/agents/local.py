"""A policy run by a local transformers model (the base agent, or any causal LM directory),
optionally with a LoRA adapter through peft.

The prompt is the model's chat template over the conversation and the tools; the completion
is raw text (hermes `<tool_call>` blocks or a reply), which the env parses. Generation runs
on `trace_gym.agents.engine` with continuous batching: the policy is a batched policy of
the episode driver (`trace_gym.driver`), every episode in flight is one conversation of the
engine, kept (with its keys and values) from one turn to the next, and its tokens are drawn
from its own stream, seeded by the policy's seed and the episode's sampling seed, so an
episode plays the same whatever else is in flight.

By default the model uses every core the process may use, and bf16 where the CPU computes it
natively (fp32 elsewhere): `trace_gym.agents.hardware`.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from trace_gym.agents.hardware import DTYPES, Placement, placement
from trace_gym.driver import EpisodeRequest, Live, Reply, Turn
from trace_gym.errors import InvalidConfig
from trace_gym.messages import Message

logger = logging.getLogger(__name__)

__all__ = ["DTYPES", "LocalModelPolicy"]


class LocalModelPolicy:
    """A batched policy over a local causal LM (`submit` / `collect` / `release`), usable one
    conversation at a time too (`act`)."""

    def __init__(self, model_path: str | os.PathLike, adapter: str | os.PathLike | None = None,
                 temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 192,
                 threads: int | None = None, seed: int = 0, kv_reuse: bool = True, dtype: str = "auto",
                 lockstep: bool = False, announce: bool = False) -> None:
        import torch
        from transformers import AutoTokenizer

        from trace_gym.agents.causal_lm import load_causal_lm
        from trace_gym.agents.sampling import check_sampling

        check_sampling("local policy", temperature, top_p, max_new_tokens)
        where = placement(dtype, threads)
        path = Path(model_path)
        if not (path / "config.json").is_file():
            raise InvalidConfig(f"model_path={str(path)!r} is not a model directory (no config.json); "
                                "build one with `trace-gym base-agent build`")
        torch.set_num_threads(where.threads)
        if announce:
            logger.info(f"local model {path.name}: {where.describe()}")
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = load_causal_lm(path, getattr(torch, where.dtype))
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        self._setup(model.eval(), tokenizer, f"local:{path.name}" + (f"+{Path(adapter).name}" if adapter else ""),
                    temperature, top_p, max_new_tokens, seed, kv_reuse, where)
        self.lockstep = lockstep

    def _setup(self, model: Any, tokenizer: Any, name: str, temperature: float, top_p: float, max_new_tokens: int,
               seed: int, kv_reuse: bool, where: Placement | None = None) -> None:
        from trace_gym.agents.engine import Engine, TurnEngine

        self.tokenizer = tokenizer
        self.model = model  # a trainer's model stays in the mode it is in: `collect` switches it to eval and back
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.engine: TurnEngine = Engine(self.model, self.tokenizer, stop_ids=[self.end], reuse=kv_reuse)
        self.name = name
        self.seed = seed
        self.placement = where
        self.logprobs = True
        self.lockstep = False
        """Return turns only when every submitted one has ended (the schedule before continuous
        batching: with the driver's `static` batches, today's default; kept for comparison)."""
        self._waiting: dict[int, tuple[Live, list[int], list[int]]] = {}
        self._episode = EpisodeRequest(0)
        self._bound = 0

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, name: str, temperature: float = 1.0, top_p: float = 1.0,
                   max_new_tokens: int = 192, seed: int = 0, kv_reuse: bool = True) -> LocalModelPolicy:
        """A policy over a model already in memory (its own caches; the weights are shared)."""
        from trace_gym.agents.sampling import check_sampling

        check_sampling("local policy", temperature, top_p, max_new_tokens)
        policy = cls.__new__(cls)
        policy._setup(model, tokenizer, name, temperature, top_p, max_new_tokens, seed, kv_reuse)
        return policy

    def metadata(self) -> dict[str, Any]:
        """How the model runs here (recorded with each episode)."""
        return self.placement.as_dict() if self.placement is not None else {}

    # -- the driver's batched interface ------------------------------------------------------

    def prompt_ids(self, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
        """The token ids of the chat template over the conversation and the tools."""
        from trace_gym.agents.chat import render_prompt

        return render_prompt(self.tokenizer, messages, tools)

    def stream(self, episode: EpisodeRequest) -> int:
        """The seed of an episode's token stream."""
        from trace_gym.agents.engine import stream_seed

        return stream_seed(self.seed, episode.stream())

    def submit(self, live: Live) -> None:
        """Start the episode's next turn in the engine; a hinted episode also keeps the
        prompt without the hint, which the loss conditions on."""
        from trace_gym.agents.chat import unhinted

        prompt = self.prompt_ids(live.messages, live.tools)
        loss_prompt = prompt
        if live.episode.hint and live.system_prompt_unhinted is not None:
            loss_prompt = self.prompt_ids(unhinted(live.messages, live.system_prompt_unhinted), live.tools)
        self._waiting[live.key] = (live, prompt, loss_prompt)
        self.engine.submit(live.key, prompt, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                           top_p=self.top_p, seed=self.stream(live.episode), logprobs=self.logprobs)

    def collect(self) -> list[tuple[Live, Reply]]:
        """Run the engine (in eval mode, then back to the model's own) until a turn ends, or
        every submitted one with `lockstep`, and return the ended turns with their tokens
        and log-probabilities."""
        was_training = self.model.training
        self.model.eval()
        try:
            ended: list[Any] = []
            while len(ended) < len(self._waiting):
                ended += self.engine.step()
                if ended and not self.lockstep:
                    break
        finally:
            self.model.train(was_training)
        out = []
        for key, g in ended:
            live, prompt, loss_prompt = self._waiting.pop(key)
            out.append((live, Reply(g.text, Turn(prompt, loss_prompt, list(g.token_ids), list(g.logprobs or [])))))
        return out

    def release(self, live: Live) -> None:
        """Drop the episode's pending turn and its conversation in the engine."""
        self._waiting.pop(live.key, None)
        self.engine.close(live.key)

    # -- one conversation at a time ---------------------------------------------------------

    def bind(self, env: Any, seed: int = 0, sample: int = 0) -> None:
        """Start a new episode (for `act`): its stream is the one the driver would give it."""
        self.engine.close(("act", self._bound))
        self._bound += 1
        self._episode = EpisodeRequest(seed, sample)

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> str:
        """The next turn of the bound episode."""
        key = ("act", self._bound)
        self.engine.submit(key, self.prompt_ids(messages, tools), max_new_tokens=self.max_new_tokens,
                           temperature=self.temperature, top_p=self.top_p, seed=self.stream(self._episode))
        while True:
            for done_key, g in self.engine.step():
                if done_key == key:
                    return g.text
