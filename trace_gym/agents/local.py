"""A policy run by a local transformers model (the base agent, or any causal LM directory),
optionally with a LoRA adapter through peft.

The prompt is the model's chat template over the conversation and the tools; the completion
is raw text (hermes `<tool_call>` blocks or a reply), which the env parses. Generation runs
on `trace_gym.agents.engine`: each conversation keeps its KV cache between turns and only
the tokens added since its last turn are prefilled (`kv_reuse`), and the episodes of a batch
(`act_batch`) decode together. Sampling uses temperature and top-p with one seeded generator
per episode turn, so a rollout with the same schedule gives the same text.

Which cache belongs to which conversation is found by comparing token prefixes: a prompt
takes the cached sequence it shares the longest prefix with (its own earlier turns, or, for
a new episode, a finished one with the same system prompt and tools), so callers need not
name their episodes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from trace_gym.errors import InvalidConfig
from trace_gym.messages import Message

DTYPES = ("float32", "bfloat16")


class LocalModelPolicy:
    def __init__(self, model_path: str | os.PathLike, adapter: str | os.PathLike | None = None,
                 temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 192,
                 threads: int = 1, seed: int = 0, kv_reuse: bool = True, dtype: str = "float32") -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from trace_gym.agents.base import check_sampling

        check_sampling("local policy", temperature, top_p, max_new_tokens)
        if not (type(threads) is int and threads >= 1):
            raise InvalidConfig(f"local policy: threads={threads!r} is invalid: must be an integer >= 1")
        if dtype not in DTYPES:
            raise InvalidConfig(f"local policy: dtype={dtype!r} is invalid; allowed: {', '.join(DTYPES)}")
        path = Path(model_path)
        if not (path / "config.json").is_file():
            raise InvalidConfig(f"model_path={str(path)!r} is not a model directory (no config.json); "
                                "build one with `trace-gym base-agent build`")
        torch.set_num_threads(threads)
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        self._setup(model, tokenizer, f"local:{path.name}" + (f"+{Path(adapter).name}" if adapter else ""),
                    temperature, top_p, max_new_tokens, seed, kv_reuse)

    def _setup(self, model: Any, tokenizer: Any, name: str, temperature: float, top_p: float, max_new_tokens: int,
               seed: int, kv_reuse: bool) -> None:
        from trace_gym.agents.engine import Engine

        self.tokenizer = tokenizer
        self.model = model.eval()
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.engine = Engine(self.model, self.tokenizer, stop_ids=[self.end], reuse=kv_reuse)
        self.name = name
        self.seed = seed
        self._episode_seed = seed
        self._pool: list[Any] = []  # cached sequences, most recently used first

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, *, name: str, temperature: float = 1.0, top_p: float = 1.0,
                   max_new_tokens: int = 192, seed: int = 0, kv_reuse: bool = True) -> LocalModelPolicy:
        """A policy over a model already in memory (its own caches; the weights are shared)."""
        from trace_gym.agents.base import check_sampling

        check_sampling("local policy", temperature, top_p, max_new_tokens)
        policy = cls.__new__(cls)
        policy._setup(model, tokenizer, name, temperature, top_p, max_new_tokens, seed, kv_reuse)
        return policy

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
        self._episode_seed = (self.seed * 1_000_003 + seed * 7919 + sample) % 2**31

    def prompt(self, messages: list[Message], tools: list[dict[str, Any]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)

    def prompt_ids(self, messages: list[Message], tools: list[dict[str, Any]]) -> list[int]:
        return self.tokenizer(self.prompt(messages, tools), add_special_tokens=False)["input_ids"]

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> str:
        return self.act_batch([(messages, tools, self._episode_seed + len(messages))])[0]

    def act_batch(self, items: list[tuple[list[Message], list[dict[str, Any]], int]]) -> list[str]:
        """Completions for several conversations at once; each item carries a seed."""
        import torch

        prompts = [self.prompt_ids(m, t) for m, t, _ in items]
        seqs = self._claim(prompts)
        generators = None
        if self.temperature > 0:
            generators = [torch.Generator().manual_seed(seed % 2**63) for _, _, seed in items]
        out = self.engine.generate(seqs, prompts, max_new_tokens=self.max_new_tokens, temperature=self.temperature,
                                   top_p=self.top_p, generators=generators)
        return [g.text for g in out]

    def _claim(self, prompts: list[list[int]]) -> list[Any]:
        """A cached sequence per prompt: pairs with the longest shared prefix first; a prompt
        left without one gets a copy of the shared part of the best match, or a new one."""
        from trace_gym.agents.engine import common_prefix

        if not self.engine.reuse:
            return [self.engine.new_sequence() for _ in prompts]
        pairs = sorted(((common_prefix(seq.ids, p), i, j) for i, p in enumerate(prompts)
                        for j, seq in enumerate(self._pool)), key=lambda x: (-x[0], x[1], x[2]))
        claimed: dict[int, Any] = {}
        taken: set[int] = set()
        best: dict[int, tuple[int, int]] = {}
        for shared, i, j in pairs:
            best.setdefault(i, (shared, j))
            if shared and i not in claimed and j not in taken:
                claimed[i] = self._pool[j]
                taken.add(j)
        for i in range(len(prompts)):
            if i not in claimed:
                shared, j = best.get(i, (0, -1))
                claimed[i] = self._pool[j].fork(1, shared)[0] if shared else self.engine.new_sequence()
        seqs = [claimed[i] for i in range(len(prompts))]
        rest = [s for j, s in enumerate(self._pool) if j not in taken]
        self._pool = seqs + rest[: len(prompts)]
        return seqs
