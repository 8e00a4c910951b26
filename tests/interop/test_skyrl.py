"""SkyRL: trace-gym envs through skyrl_gym's own `make`, `init` and `step`, as SkyRL's
generator calls them, with a model whose turns are text (hermes tool-call blocks)."""

from __future__ import annotations

import copy
import json

import gymnasium as gym
import pytest
import skyrl_gym

from trace_gym.actions import parse_action
from trace_gym.errors import InvalidConfig
from trace_gym.interop.skyrl import ENV_CLASS, register, skyrl_rows

ENVS = ["trace/retail-v0", "trace/precondition_verification-v0"]  # a target and a capability env


def as_text(action) -> str:
    """An action as a model writes it: its reply, then a hermes block per tool call."""
    parsed = parse_action(action)
    blocks = "".join(f"<tool_call>\n{json.dumps({'name': c.name, 'arguments': c.arguments})}\n</tool_call>"
                     for c in parsed.calls)
    return (parsed.content or "") + blocks


def generator_episode(row, policy):
    """SkyRL's generator loop over one row: make, init, then step until done."""
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    env = skyrl_gym.make(row["env_class"], env_config={}, extras=extras)
    history, metadata = env.init(copy.deepcopy(row["prompt"]))
    rewards, done = [], False
    while not done:
        text = policy(env, history)
        out = env.step(text)
        history = history + [{"role": "assistant", "content": text}] + out["observations"]
        rewards.append(out["reward"])
        done = out["done"]
    metrics = env.get_metrics()
    env.close()
    return history, rewards, metadata, metrics


@pytest.mark.parametrize("env_id", ENVS)
def test_an_oracle_episode_through_skyrl_gym_earns_the_envs_reward(env_id):
    register()
    (row,) = skyrl_rows(env_id, [5])
    history, rewards, metadata, metrics = generator_episode(
        row, lambda env, history: as_text(env.env.unwrapped.oracle_action(env.env.unwrapped.episode.messages)))
    # the env's own episode, with the same turns given as text
    own = gym.make(env_id)
    opening, info = own.reset(seed=5)
    assert history[:len(opening)] == opening == row["prompt"] and metadata["tools"] == info["tools"]
    texts = [m["content"] for m in history[len(opening):] if m["role"] == "assistant"]
    for text in texts:
        _, reward, terminated, truncated, _ = own.step(text)
    assert terminated and rewards[-1] == reward == 1.0 and set(rewards[:-1]) <= {0.0}
    assert metrics == {"reward": 1.0, "turns": len(texts)}
    # what SkyRL appended after each turn is what the env's own conversation holds there
    assert [m for m in history if m["role"] != "assistant"] == \
        [m for m in own.unwrapped.episode.messages if m["role"] != "assistant"]


def test_a_refusal_earns_what_the_env_gives_it():
    register()
    (row,) = skyrl_rows("trace/retail-v0", [7], opening="given")
    _, rewards, _, _ = generator_episode(row, lambda env, history: "I am sorry, I cannot help with that.")
    own = gym.make("trace/retail-v0", opening="given")
    own.reset(seed=7)
    own_rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, _ = own.step("I am sorry, I cannot help with that.")
        own_rewards.append(reward)
        done = terminated or truncated
    assert rewards == own_rewards and rewards[-1] < 1.0


def test_a_row_without_its_env_is_refused_by_name():
    register()
    with pytest.raises(InvalidConfig, match="needs env_id, seed"):
        skyrl_gym.make(ENV_CLASS, env_config={}, extras={})
