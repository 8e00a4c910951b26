"""The four shipped capability envs: oracle 1.0 on 500 seeds, degenerate policies well
below it, the rewards the issue specifies, and domain mixing."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

from tests.conftest import oracle, play
from trace_gym.errors import InvalidConfig
from trace_gym.testing import policies

CAPABILITY_ENVS = ["trace/precondition_verification-v0", "trace/structured_data_reasoning-v0",
                   "trace/multi_step_task_completion-v0", "trace/tool_calling_precision-v0"]


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_oracle_scores_one_on_500_seeds(env_id):
    env = gym.make(env_id)
    for seed in range(500):
        _, reward, info = play(env, seed, oracle)
        assert reward == 1.0, (seed, info["verdict"])
        assert info["termination_reason"] == "reply"


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_degenerate_policies_score_well_below_the_oracle(env_id):
    env = gym.make(env_id).unwrapped
    for name, act in policies.degenerate_policies().items():
        mean = sum(policies.play(env, seed, act)[0] for seed in range(200)) / 200
        assert mean <= 0.65 and mean <= 1.0 - 0.35, (name, mean)


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_every_task_needs_its_capability_and_mixes_domains(env_id):
    env = gym.make(env_id)
    capability = env.unwrapped.capability
    domains = set()
    for seed in range(60):
        _, info = env.reset(seed=seed)
        assert info["capabilities_needed"] == [capability]
        domains.add(env.unwrapped.task.domain)
    assert domains == {"airline", "retail"}
    for share, domain in ((1.0, "airline"), (0.0, "retail")):
        env = gym.make(env_id, airline_share=share)
        assert {env.reset(seed=s)[1] and env.unwrapped.task.domain for s in range(20)} == {domain}


def test_precondition_rewards():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0).unwrapped
    forbidden = [s for s in range(40)]
    for seed in forbidden:
        env.reset(seed=seed)
        task = env.task
        assert task.forbidden
        assert policies.play(env, seed, lambda e, o: "I'm sorry, I can't do that.")[0] == 0.5
        assert policies.play(env, seed, oracle)[0] == 1.0
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=0.0).unwrapped
    for seed in range(40):
        env.reset(seed=seed)
        assert not env.task.forbidden
        assert policies.play(env, seed, lambda e, o: "I'm sorry, I can't do that.")[0] == 0.0
    shares = [gym.make("trace/precondition_verification-v0").unwrapped for _ in range(1)]
    env = shares[0]
    rate = sum(env.reset(seed=s)[1] is not None and env.task.forbidden for s in range(500)) / 500
    assert 0.5 < rate < 0.7


def test_precondition_any_mutating_call_scores_zero_when_forbidden():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0).unwrapped
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        write = next(t["function"]["name"] for t in info["tools"]
                     if env.episode.toolset[t["function"]["name"]].kind.value == "WRITE")
        env.step({"name": write, "arguments": {}})  # fails the schema: still an attempt
        _, reward, *_ = env.step(env.oracle_action(obs))
        assert reward == 0.0


def test_multi_step_reward_formula():
    env = gym.make("trace/multi_step_task_completion-v0").unwrapped
    counts = {}
    for seed in range(300):
        obs, _ = env.reset(seed=seed)
        task = env.task
        n = len(task.operations)
        counts[(task.domain, n)] = counts.get((task.domain, n), 0) + 1
        assert env.episode.max_steps == n + 5
        # do all but the last operation, then one wrong write, then reply
        actions, _ = policies.oracle_actions(env, seed)
        partial = actions[: n - 1]
        wrong = {"name": "cancel_reservation" if task.domain == "airline" else "cancel_pending_order",
                 "arguments": {"reservation_id": "NOPE00"} if task.domain == "airline"
                 else {"order_id": "#W0000000", "reason": "ordered by mistake"}}
        reward, _, _ = policies.play(env, seed, policies.replay([*partial, wrong, "Done."]))
        assert reward == pytest.approx(0.6 * (n - 1) / n)  # the wrong write failed: no penalty
    assert counts[("airline", 2)] > counts[("airline", 3)] > counts[("airline", 4)]
    assert counts[("retail", 2)] > counts[("retail", 4)]


def test_multi_step_full_credit_has_no_negative_zero():
    env = gym.make("trace/multi_step_task_completion-v0")
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action(obs))
        done = terminated or truncated
    (check,) = [c for c in info["verdict"]["checks"] if c["name"] == "wrong_writes"]
    assert json.dumps(check["credit"]) == "0.0"  # a penalty of none is 0.0, not -0.0


def test_multi_step_penalises_extra_writes():
    env = gym.make("trace/multi_step_task_completion-v0").unwrapped
    obs, _ = env.reset(seed=3)
    actions, _ = policies.oracle_actions(env, 3)
    writes = actions[:-1]
    reward, _, _ = policies.play(env, 3, policies.replay([*writes, writes[0], "Done."]))
    assert reward in (pytest.approx(0.9), 1.0)  # a repeated write either fails or costs 0.1


def test_tool_calling_precision_credits_each_argument():
    env = gym.make("trace/tool_calling_precision-v0").unwrapped
    for seed in range(30):
        actions, _ = policies.oracle_actions(env, seed)
        gold = actions[0]
        key = next(iter(gold["arguments"]))
        changed = {"name": gold["name"], "arguments": {**gold["arguments"], key: policies.perturb(gold["arguments"][key])}}
        reward, _, info = policies.play(env, seed, policies.replay([changed, "Done."]))
        n = len(gold["arguments"])
        assert reward == pytest.approx((n - 1) / n)
        assert [c["name"] for c in info["verdict"]["checks"] if not c["passed"]] == [key]


def test_config_is_validated():
    with pytest.raises(InvalidConfig, match="forbidden_rate"):
        gym.make("trace/precondition_verification-v0", forbidden_rate=2)
    with pytest.raises(InvalidConfig, match="min_operations"):
        gym.make("trace/multi_step_task_completion-v0", min_operations=4, max_operations=3)
    with pytest.raises(InvalidConfig, match="unknown argument"):
        gym.make("trace/tool_calling_precision-v0", colour="red")


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_hint_mode(env_id):
    env = gym.make(env_id)
    plain, _ = env.reset(seed=4)
    hinted, info = env.reset(seed=4, options={"hint": True})
    assert "<expert_guidance>" in hinted[0]["content"] and info["system_prompt_unhinted"] == plain[0]["content"]
    guidance = hinted[0]["content"].split("<expert_guidance>")[1]
    words = set(re.findall(r"[a-z_]+", guidance.lower()))
    for schema in info["tools"]:
        assert schema["function"]["name"] not in words
        for arg in schema["function"]["parameters"].get("properties", {}):
            assert arg not in words, arg
