"""OpenPipe ART: `rollout` returns an `art.Trajectory` whose reward is the env's, played through
a scripted OpenAI-compatible client, and ART's own grouping and message view take it."""

from __future__ import annotations

import asyncio
import json

import gymnasium as gym
import pytest
from openai.types.chat import ChatCompletion

from trace_gym.actions import parse_action
from trace_gym.errors import InvalidConfig
from trace_gym.interop.art import art, rollout  # ART's module, imported without its patch of transformers

ENVS = ["trace/retail-v0", "trace/precondition_verification-v0"]  # a target and a capability env


class ScriptedClient:
    """An `AsyncOpenAI` stand-in: `chat.completions.create` answers each call with the oracle's
    next turn, read off its own copy of the env stepped in lockstep, as a chat completion
    whose tool calls carry ids of its own and whose tokens have log-probabilities."""

    def __init__(self, env_id: str, seed: int) -> None:
        self.env = gym.make(env_id)
        self.env.reset(seed=seed)
        self.requests: list[dict] = []
        self.chat = self
        self.completions = self

    async def create(self, **request):
        self.requests.append(request)
        action = self.env.unwrapped.oracle_action(self.env.unwrapped.episode.messages)
        self.env.step(action)
        parsed = parse_action(action)
        calls = [{"id": f"chatcmpl-call-{len(self.requests)}-{i}", "type": "function",
                  "function": {"name": c.name, "arguments": json.dumps(c.arguments)}} for i, c in enumerate(parsed.calls)]
        message = {"role": "assistant", "content": parsed.content, **({"tool_calls": calls} if calls else {})}
        return ChatCompletion.model_validate({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0, "model": request["model"],
            "choices": [{"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message,
                         "logprobs": {"content": [{"token": "x", "logprob": -0.5, "bytes": None, "top_logprobs": []}]}}]})


@pytest.mark.parametrize("env_id", ENVS)
def test_an_oracle_rollout_is_a_trajectory_with_the_envs_reward(env_id):
    client = ScriptedClient(env_id, 9)
    trajectory = asyncio.run(rollout(client, env_id, 9, model_name="served"))
    assert isinstance(trajectory, art.Trajectory)
    assert trajectory.reward == 1.0 and trajectory.metadata == {"env_id": env_id, "seed": 9}
    own = client.env.unwrapped.episode.messages  # the same turns, as the env recorded them
    choices = [x for x in trajectory.messages_and_choices if not isinstance(x, dict)]
    assert len(choices) == len(client.requests) == client.env.unwrapped.episode.turn
    assert all(c.logprobs is not None for c in choices)
    # every tool result answers a call of the Choice before it, by that Choice's own id
    pending: set[str] = set()
    for item in trajectory.messages_and_choices:
        if not isinstance(item, dict):
            pending = {call.id for call in (item.message.tool_calls or [])}
        elif item["role"] == "tool" and pending:
            assert item["tool_call_id"] in pending
    # what the env added is what the env's own conversation holds, ids aside
    added = [m for m in trajectory.messages() if m["role"] in ("user", "system")]
    assert added == [m for m in own if m["role"] in ("user", "system")]
    assert trajectory.tools == client.requests[0]["tools"] and client.requests[0]["model"] == "served"


def test_a_group_by_seed_gathers_through_art():
    async def gather():
        groups = [art.TrajectoryGroup(rollout(ScriptedClient(ENVS[1], seed), ENVS[1], seed, model_name="m")
                                      for _ in range(2)) for seed in (1, 2)]
        return await art.gather_trajectory_groups(groups)

    groups = asyncio.run(gather())
    assert [[t.reward for t in g.trajectories] for g in groups] == [[1.0, 1.0], [1.0, 1.0]]
    assert [{t.metadata["seed"] for t in g.trajectories} for g in groups] == [{1}, {2}]


def test_a_client_without_a_model_name_is_refused():
    with pytest.raises(InvalidConfig, match="needs model_name"):
        asyncio.run(rollout(ScriptedClient(ENVS[1], 0), ENVS[1], 0))


def test_importing_the_adapter_leaves_transformers_as_it_was():
    """ART 0.5's import patches transformers' mask preparation with a function of another
    signature; the adapter puts transformers' own back, so models still run in the process."""
    import torch
    from transformers import AutoModelForCausalLM, masking_utils

    from tests.conftest import REPO

    assert masking_utils._preprocess_mask_arguments.__module__ == "transformers.masking_utils"
    model = AutoModelForCausalLM.from_pretrained(REPO / "tests" / "fixtures" / "tiny_agent")
    assert model(torch.tensor([[1, 2, 3]])).logits.shape[:2] == (1, 3)
