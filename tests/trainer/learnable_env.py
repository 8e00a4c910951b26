"""A one-turn env a tiny model can learn in a few dozen GRPO iterations: the customer asks
where their order is, and the turn earns 1.0 when it calls a tool (any call, even a malformed
one) instead of chatting. The committed fixture agent does so on about a third of its
samples at temperature 1.0, so groups have variance from the start and the ceiling is far."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from trace_gym import messages as msg
from trace_gym.env import EpisodeState, NewEpisode, TraceEnv
from trace_gym.verdict import Check, Verdict
from trace_gym.worlds import retail

ENV_ID = "trace_test/call_a_tool-v0"


@dataclass
class Task:
    question: str
    kind: str = "call_a_tool"
    capabilities_needed = ("tool_calling_precision",)

    @property
    def instructions(self) -> str:
        return self.question

    def to_json(self) -> dict[str, Any]:
        return {"question": self.question}


class CallAToolEnv(TraceEnv):
    QUESTIONS = ("Hi, where is my order?", "Hello, has my order shipped?", "Where is my package?")

    def __init__(self, render_mode: str | None = None) -> None:
        super().__init__(retail.TOOLS.subset(["get_order_details"]), render_mode)

    def _new_episode(self, rng) -> NewEpisode:
        task = Task(rng.choice(self.QUESTIONS))
        return NewEpisode(task, retail.RetailBuilder(rng, retail.RetailWorldSize(products=3, variants=3, users=0))
                          .build(), "You are a customer service agent.", [msg.user(task.question)], max_steps=1,
                          hint="Look the order up before you answer.")

    def _after_reply(self, episode: EpisodeState, text: str) -> str | None:
        return "replied"

    def _after_tools(self, episode: EpisodeState, names: list[str]) -> str | None:
        return "called"

    def verify(self, task, initial_world, final_world, messages) -> Verdict:
        called = bool(messages[-1].get("role") == "tool")
        return Verdict(1.0 if called else 0.0, (Check("called_a_tool", called, 1.0 if called else 0.0),))

    def oracle_action(self, messages):
        return {"name": "get_order_details", "arguments": {"order_id": "#W0000000"}}


def register() -> str:
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point=CallAToolEnv)
    return ENV_ID
