"""`opening = "given"`: the customer states who they are, the record's id and the whole
request at once; the oracle asks nothing and still scores 1, and reading the customer's
other records before their own user record still fails identification."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.conftest import TARGETS, oracle, play
from trace_gym.errors import InvalidConfig
from trace_gym.targets.user import is_question

MINIATURE = {"max_requests": 1, "compound_rate": 0.0, "distractors": 0, "opening": "given"}


@pytest.mark.parametrize("env_id", TARGETS)
def test_a_given_opening_states_the_user_the_record_and_every_detail(env_id):
    env = gym.make(env_id, **MINIATURE).unwrapped
    for seed in range(40):
        obs, _ = env.reset(seed=seed)
        task, first = env.task, obs[1]["content"]
        assert task.user_id in first and task.opening == "given"
        for fact in task.requests[0].facts.values():
            assert fact in first
        if task.requests[0].subject is not None and task.requests[0].kind not in ("book_flight",):
            assert task.requests[0].subject in first, (seed, first)
        assert not any(is_question(s["say"]) for s in task.plan if "say" in s)  # the oracle asks nothing
        assert task.plan[0] == {"call": {"name": "get_user_details", "arguments": {"user_id": task.user_id}}}


@pytest.mark.parametrize("env_id", TARGETS)
@pytest.mark.parametrize("knobs", [MINIATURE, {"opening": "given"}])
def test_the_oracle_scores_one_at_a_given_opening_and_asks_less(env_id, knobs):
    given, asked = gym.make(env_id, **knobs).unwrapped, gym.make(env_id, **{**knobs, "opening": "ask"}).unwrapped
    fewer = 0
    for seed in range(60):
        _, reward, info = play(given, seed, oracle)
        assert reward == 1.0, (seed, info["verdict"])
        given.reset(seed=seed)
        asked.reset(seed=seed)
        fewer += len(given.task.plan) < len(asked.task.plan)
    assert fewer >= 55


def test_the_ask_opening_is_the_default_and_unchanged():
    for env_id in TARGETS:
        env = gym.make(env_id).unwrapped
        obs, _ = env.reset(seed=1)
        assert env.task.opening == "ask" and obs[1]["content"] == env.task.requests[0].opening
    with pytest.raises(InvalidConfig, match="opening"):
        gym.make("trace/retail-v0", opening="tell")


@pytest.mark.parametrize("env_id", TARGETS)
def test_reading_a_record_before_the_customers_own_fails_identification_at_a_given_opening(env_id):
    env = gym.make(env_id, **{**MINIATURE, "forbidden_rate": 0.0})
    base = env.unwrapped
    table = "reservation" if env_id.startswith("trace/airline") else "order"
    checked = 0
    for seed in range(40):
        env.reset(seed=seed)
        request, plan = base.task.requests[0], base.task.plan
        if request.subject is None:
            continue
        early = [{"call": {"name": f"get_{table}_details", "arguments": {f"{table}_id": request.subject}}}]
        _, reward, info = play(env, seed, _scripted(early + plan))
        ident = next(c for c in info["verdict"]["checks"] if c["name"] == "identification")
        assert not ident["passed"] and reward == 0.0, (seed, info["verdict"])
        checked += 1
    assert checked > 15


def _scripted(steps):
    from tests.targets.test_reward_integrity import _scripted as scripted

    return scripted(steps)
