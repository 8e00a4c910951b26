"""The oracle of the target envs: it follows the task's gold plan, finding its place from
the observation (its own turns so far), so it can drive any copy of the episode."""

from __future__ import annotations

from typing import Any

from trace_gym.jsondata import copy_json
from trace_gym.messages import Message
from trace_gym.targets.task import Step


def plan_action(plan: list[Step], messages: list[Message]) -> Any:
    """The plan's next turn: a tool-call dict or a reply text."""
    done = sum(1 for m in messages if m["role"] == "assistant")
    if done >= len(plan):  # the customer kept talking after the plan: close politely
        return "Thank you for contacting us. Have a great day."
    step = plan[done]
    if "say" in step:
        return step["say"]
    return {"name": step["call"]["name"], "arguments": copy_json(step["call"]["arguments"])}
