"""A policy run by a local transformers model (the tiny agent, or any causal LM directory),
optionally with a LoRA adapter through peft.

The prompt is the model's chat template over the conversation and the tools; the completion
is raw text (hermes `<tool_call>` blocks or a reply), which the env parses. Generation is
batched across episodes (`act_batch`), sampled with temperature and top-p, and seeded from
the episodes in the batch, so a rollout with the same schedule gives the same text.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gymnasium as gym

from trace_gym.errors import InvalidConfig
from trace_gym.messages import Message


class LocalModelPolicy:
    def __init__(self, model_path: str | os.PathLike, adapter: str | os.PathLike | None = None,
                 temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 192,
                 threads: int = 1, seed: int = 0) -> None:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from trace_gym.agents.base import check_sampling

        check_sampling("local policy", temperature, top_p, max_new_tokens)
        if not (type(threads) is int and threads >= 1):
            raise InvalidConfig(f"local policy: threads={threads!r} is invalid: must be an integer >= 1")
        path = Path(model_path)
        if not (path / "config.json").is_file():
            raise InvalidConfig(f"model_path={str(path)!r} is not a model directory (no config.json); "
                                "build one with `trace-gym tiny-agent build`")
        torch.set_num_threads(threads)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
        if adapter is not None:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, str(adapter))
        self.model = model.eval()
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.name = f"local:{path.name}" + (f"+{Path(adapter).name}" if adapter else "")
        self.seed = seed
        self._episode_seed = seed

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
        self._episode_seed = (self.seed * 1_000_003 + seed * 7919 + sample) % 2**31

    def prompt(self, messages: list[Message], tools: list[dict[str, Any]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> str:
        return self.act_batch([(messages, tools, self._episode_seed + len(messages))])[0]

    def act_batch(self, items: list[tuple[list[Message], list[dict[str, Any]], int]]) -> list[str]:
        """Completions for several conversations at once; each item carries a seed."""
        import torch

        prompts = [self.prompt(m, t) for m, t, _ in items]
        batch = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        torch.manual_seed(sum(seed * (i + 1) for i, (_, _, seed) in enumerate(items)) % 2**31)
        sample = self.temperature > 0
        with torch.no_grad():
            out = self.model.generate(
                **batch, do_sample=sample, temperature=self.temperature if sample else None,
                top_p=self.top_p if sample else None, max_new_tokens=self.max_new_tokens,
                eos_token_id=self.end, pad_token_id=self.tokenizer.pad_token_id)
        texts = []
        for row in out[:, batch["input_ids"].shape[1]:].tolist():
            if self.end in row:
                row = row[: row.index(self.end)]
            texts.append(self.tokenizer.decode(row, skip_special_tokens=False).replace(self.tokenizer.pad_token, ""))
        return texts
