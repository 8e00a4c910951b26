"""The target envs meet the contract: the oracle scores 1, degenerate policies do not, the
verifier notices any change to a gold write, seeds reproduce across processes, and nothing
an agent sends raises."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from tests.conftest import REPO, TARGETS, oracle, play
from trace_gym import capabilities as cap
from trace_gym.agents import RandomPolicy
from trace_gym.jsondata import sha256_json
from trace_gym.tools import ToolKind


@pytest.mark.parametrize("env_id", TARGETS)
def test_check_env_passes_without_warnings(env_id):
    env = gym.make(env_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    assert [str(w.message) for w in caught] == []


@pytest.mark.parametrize("env_id", TARGETS)
def test_make_vec_sync(env_id):
    venv = gym.make_vec(env_id, 2, vectorization_mode="sync")
    obs, info = venv.reset(seed=[3, 4])
    assert len(obs) == 2 and obs[0][-1]["role"] == "user"
    actions = tuple(e.unwrapped.oracle_action(o) for e, o in zip(venv.unwrapped.envs, obs))
    obs, reward, terminated, truncated, info = venv.step(actions)
    assert list(reward) == [0.0, 0.0] and not any(terminated)
    venv.close()


@pytest.mark.parametrize("env_id", TARGETS)
def test_oracle_scores_one_on_500_seeds(env_id):
    env = gym.make(env_id)
    kinds = set()
    for seed in range(500):
        obs, reward, info = play(env, seed, oracle)
        base = env.unwrapped
        assert reward == 1.0, (seed, info["verdict"])
        assert info["termination_reason"] == "user_stop", seed
        # the oracle's conversation is clean: every question answered, no failed call
        assert not any(m["role"] == "tool" and m["content"].startswith("Error") for m in obs), seed
        assert not any(m["role"] == "user" and m["content"].startswith(("Could you help", "No, that", "Sorry, I don't"))
                       for m in obs), seed
        kinds.update(base.task.kinds)
    assert kinds == set(env.unwrapped.tasks.KINDS)


@pytest.mark.parametrize("env_id", TARGETS)
def test_episode_leaves_the_initial_world_untouched(env_id):
    env = gym.make(env_id)
    for seed in range(40):
        env.reset(seed=seed)
        before = env.unwrapped.episode.initial_world.hash()
        play(env, seed, oracle)
        assert env.unwrapped.episode.initial_world.hash() == before


@pytest.mark.parametrize("env_id", TARGETS)
def test_random_policy_rarely_succeeds(env_id):
    env = gym.make(env_id)
    policy = RandomPolicy(seed=0)
    rewards = [play(env, seed, lambda e, o: policy.act(o, e.unwrapped.toolset.schemas))[1] for seed in range(200)]
    assert sum(rewards) / len(rewards) <= 0.05


@pytest.mark.parametrize("env_id", TARGETS)
def test_replying_without_tools_rarely_succeeds(env_id):
    env = gym.make(env_id)
    for text in ("Hello! How can I help you today?", "I'm sorry, I cannot help with that."):
        rewards = [play(env, seed, lambda e, o: text)[1] for seed in range(200)]
        assert sum(rewards) / len(rewards) <= 0.05, text


def _perturbations(value):
    """Single changes of one argument value (and of its first nested element)."""
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield value + 1
    elif isinstance(value, float):
        yield value + 1.0
    elif isinstance(value, str):
        yield value + "0"
    elif isinstance(value, list):
        yield value[:-1]
        if value:
            for changed in _perturbations(value[0]):
                yield [changed, *value[1:]]
    elif isinstance(value, dict) and value:
        key = next(iter(value))
        for changed in _perturbations(value[key]):
            yield {**value, key: changed}


def _write_steps(env):
    base = env.unwrapped
    plan = base.task.plan
    return [i for i, s in enumerate(plan) if "call" in s and base.toolset[s["call"]["name"]].kind is ToolKind.WRITE]


@pytest.mark.parametrize("env_id", TARGETS)
def test_changing_any_argument_of_a_gold_write_fails(env_id):
    env = gym.make(env_id, compound_rate=0.5, forbidden_rate=0.0)
    tried = 0
    for seed in range(60):
        env.reset(seed=seed)
        plan = env.unwrapped.task.plan
        for index in _write_steps(env):
            arguments = plan[index]["call"]["arguments"]
            for key, value in arguments.items():
                for changed in _perturbations(value):
                    def act(e, obs, index=index, key=key, changed=changed):
                        action = e.unwrapped.oracle_action(obs)
                        if sum(m["role"] == "assistant" for m in obs) == index:
                            action = {"name": action["name"], "arguments": {**action["arguments"], key: changed}}
                        return action
                    _, reward, info = play(env, seed, act)
                    assert reward < 1.0, (seed, key, changed)
                    tried += 1
    assert tried > 300


@pytest.mark.parametrize("env_id", TARGETS)
def test_tasks_record_the_capabilities_they_need_once_over(env_id):
    """The kind and the capabilities come with the verdict, not at reset (a forbidden
    request needs precondition checking: at reset they would tell the decision)."""
    env = gym.make(env_id)
    tasks = env.unwrapped.tasks
    seen = set()
    for seed in range(200):
        _, info = env.reset(seed=seed)
        assert "capabilities_needed" not in info and "task_kind" not in info
        info = _play_oracle(env)
        assert set(info["capabilities_needed"]) <= set(cap.ALL)
        assert info["task_kind"] == env.unwrapped.task.kind
        seen.update(info["capabilities_needed"])
        requests = env.unwrapped.task.requests
        if len(requests) > 1:
            assert cap.MULTI_STEP in info["capabilities_needed"]
        for request in requests:  # the hint's table covers what each request needs
            assert set(request.capabilities) <= set(tasks.DOMAIN.can_need[request.kind]), (seed, request.kind)
            if request.kind in tasks.FORBIDDABLE:
                assert cap.PRECONDITION in tasks.DOMAIN.can_need[request.kind]
    assert seen == set(cap.CUSTOMER_SERVICE)


def _play_oracle(env):
    obs, info, done = env.unwrapped.episode.messages, {}, False
    while not done:
        obs, _, terminated, truncated, info = env.step(env.unwrapped.oracle_action(obs))
        done = terminated or truncated
    return info


@pytest.mark.parametrize("env_id", TARGETS)
def test_the_hint_and_the_step_limit_are_the_same_for_either_decision(env_id):
    """Two tasks of one request of the same kind, one allowed and one forbidden, with as
    many records, get the same hint and step limit."""
    by_key: dict = {}
    for forbidden_rate in (0.0, 1.0):
        env = gym.make(env_id, compound_rate=0.0, forbidden_rate=forbidden_rate)
        for seed in range(150):
            obs, info = env.reset(seed=seed, options={"hint": True})
            task = env.unwrapped.task
            records = len(env.unwrapped.episode.initial_world.tables["users"][task.user_id][env.unwrapped.records])
            if task.decision is None:
                continue
            hint = obs[0]["content"][len(info["system_prompt_unhinted"]):]
            by_key.setdefault((task.kind, records), {})[task.decision] = (hint, info["max_steps"])
    both = [v for v in by_key.values() if len(v) == 2]
    assert len(both) >= 10
    for v in both:
        assert v["allowed"] == v["forbidden"]


@pytest.mark.parametrize("env_id", TARGETS)
def test_a_thousand_seeds_give_distinct_tasks(env_id):
    env = gym.make(env_id)
    hashes = set()
    for seed in range(1000):
        env.reset(seed=seed)
        hashes.add(sha256_json(env.unwrapped.task.to_json()))
    assert len(hashes) >= 990


_PROBE = """
import json, sys, gymnasium as gym, trace_gym
from trace_gym.jsondata import sha256_json
out = {}
for env_id in ("trace/airline-v0", "trace/retail-v0"):
    env = gym.make(env_id)
    for seed in (0, 1, 7, 123456):
        obs, info = env.reset(seed=seed)
        task = sha256_json(env.unwrapped.task.to_json())
        world = env.unwrapped.episode.initial_world.hash()
        done = False
        while not done:
            obs, r, term, trunc, info = env.step(env.unwrapped.oracle_action(obs))
            done = term or trunc
        out[f"{env_id}/{seed}"] = [task, world, sha256_json(obs), r]
print(json.dumps(out, sort_keys=True))
"""


def test_seeds_reproduce_in_fresh_processes():
    results = []
    for hash_seed in ("0", "4242"):
        proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=REPO,
                              env={"PYTHONHASHSEED": hash_seed, "PATH": "/usr/bin:/bin"}, check=True)
        results.append(json.loads(proc.stdout))
    assert results[0] == results[1]
    assert len({v[0] for v in results[0].values()}) == len(results[0])
