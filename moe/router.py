"""Task routing (TRACE, step 4a): the base model picks one adapter per conversation.

The base model reads `prompts/task_routing.md`: lettered options (A: the base, no adapter;
then each capability with its description) and the conversation's recent messages, and
answers with one letter. The answer is constrained to the label set with one generated
token: locally, the next-token logits are restricted to the letters' tokens; on a vLLM
server, the request asks for a structured choice among the letters with max_tokens 1. The
decision is made once per conversation, after its first user message, and kept.

`merge_weighted` builds the optional probability-weighted merge W + sum_c alpha_c B_c A_c of
the adapters with peft's `add_weighted_adapter` (a combined adapter for the router's
probabilities, for a server that serves one adapter per request).
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from typing import Any

import jinja2

from trace_gym.capabilities import DESCRIPTIONS
from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.resources import read_prompt

RECENT = 6
"""Messages of the conversation the router reads (the latest ones, system prompt excluded)."""
CHARACTERS = 400
"""Characters kept of each message."""


@dataclass(frozen=True)
class Option:
    """One choice the router offers: its letter, the capability's name ("base" for no
    adapter) and its description."""

    letter: str
    name: str
    description: str


def options(capabilities: list[str], descriptions: dict[str, str] | None = None) -> list[Option]:
    """A: the base, then one letter per capability, in order."""
    descriptions = {**DESCRIPTIONS, **(descriptions or {})}
    if len(capabilities) + 1 > len(string.ascii_uppercase):
        raise InvalidConfig(f"the router takes at most {len(string.ascii_uppercase) - 1} capabilities")
    out = [Option("A", "base", "none of the capabilities below is what the conversation needs")]
    for letter, name in zip(string.ascii_uppercase[1:], capabilities):
        out.append(Option(letter, name, descriptions.get(name, name.replace("_", " "))))
    return out


def routing_prompt(opts: list[Option], messages: list[dict[str, Any]]) -> str:
    """The router's prompt (`prompts/task_routing.md`) over the options and the
    conversation's latest messages that have text (at most `RECENT`, each cut to
    `CHARACTERS`)."""
    shown = [m for m in messages if m.get("role") in ("user", "assistant", "tool") and m.get("content")][-RECENT:]
    shown = [{"role": m["role"], "content": m["content"][:CHARACTERS]} for m in shown]
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True).from_string(
        read_prompt("task_routing.md"))
    return template.render(options=opts, messages=shown)


def first_user_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation up to and including its first user message (what the decision reads)."""
    for i, m in enumerate(messages):
        if m.get("role") == "user":
            return messages[: i + 1]
    return messages


class TaskRouter:
    """The base model as a classifier over the options' letters."""

    def __init__(self, model: Any, tokenizer: Any, capabilities: list[str],
                 descriptions: dict[str, str] | None = None) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.options = options(capabilities, descriptions)
        self.letter_ids = []
        for o in self.options:
            ids = tokenizer(o.letter, add_special_tokens=False)["input_ids"]
            if len(ids) != 1:
                raise TraceGymError(f"the router's letter {o.letter!r} is {len(ids)} tokens for this tokenizer; "
                                    "it needs one token per option")
            self.letter_ids.append(ids[0])

    def probabilities(self, messages: list[dict[str, Any]]) -> list[float]:
        """P(option) over the letters, from one forward of the base model (adapters off)."""
        import torch

        prompt = routing_prompt(self.options, messages)
        text = self.tokenizer.apply_chat_template([{"role": "user", "content": prompt}], tokenize=False,
                                                  add_generation_prompt=True)
        ids = torch.tensor([self.tokenizer(text, add_special_tokens=False)["input_ids"]],
                           device=next(self.model.parameters()).device)
        disable = getattr(self.model, "disable_adapter", None)
        import contextlib

        with torch.no_grad(), (disable() if callable(disable) else contextlib.nullcontext()):
            logits = self.model(input_ids=ids, logits_to_keep=1).logits[0, -1].float()
        restricted = logits[torch.tensor(self.letter_ids, device=logits.device)]      # (options,)
        return torch.softmax(restricted, -1).tolist()

    def choose(self, messages: list[dict[str, Any]]) -> int:
        """The chosen option's index (0: the base)."""
        probs = self.probabilities(messages)
        return max(range(len(probs)), key=lambda i: (probs[i], -i))


def choose_on_server(client: Any, model: str, opts: list[Option], messages: list[dict[str, Any]]) -> int:
    """The router on an OpenAI-compatible vLLM server: one token, constrained to the letters
    by vLLM's structured outputs (a choice)."""
    letters = [o.letter for o in opts]
    reply = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": routing_prompt(opts, messages)}], max_tokens=1,
        temperature=0.0, extra_body={"structured_outputs": {"choice": letters}})
    answer = (reply.choices[0].message.content or "").strip()
    if answer not in letters:
        raise TraceGymError(f"the router's server answered {answer!r}, not one of {letters}")
    return letters.index(answer)


def merge_weighted(peft_model: Any, names: list[str], weights: list[float], merged: str = "merged") -> str:
    """A new adapter `merged` on `peft_model`: W + sum_c w_c B_c A_c over the named adapters
    (peft's add_weighted_adapter, concatenating the ranks, so no delta is approximated)."""
    if len(names) != len(weights) or not names:
        raise InvalidConfig(f"merge_weighted: {len(names)} adapters but {len(weights)} weights")
    peft_model.add_weighted_adapter(names, weights, merged, combination_type="cat")
    return merged
