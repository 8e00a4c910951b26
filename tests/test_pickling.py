"""Every env pickles (by replay, `trace_gym.replay`) at any point of an episode and the copy
continues identically; so every env runs in gymnasium's async vector env, in process pools
and anywhere else an env crosses to another process."""

from __future__ import annotations

import multiprocessing
import pickle

import gymnasium as gym
import pytest

import trace_gym  # noqa: F401  (registers the envs)
from tests.conftest import REPO
from trace_gym.registry import list_envs
from trace_gym.sandbox import EnvSource, RemoteEnv, WorkerPool
from trace_gym.sandbox.isolation import bubblewrap_status
from trace_gym.testing import policies

SHIPPED = [e.id for e in list_envs()]
WRONG = "I am sorry, I cannot help with that."  # a reply no task accepts at once: an early end


def _played(env, seed: int, actions):
    """(obs, reward, terminated, truncated, info) of every step of `actions` after a reset."""
    return [env.reset(seed=seed)] + [env.step(a) for a in actions]


def _oracle_actions(env_id: str, seed: int) -> list:
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    actions, done = [], False
    while not done:
        actions.append(policies.oracle(env.unwrapped, obs))
        obs, _, terminated, truncated, _ = env.step(actions[-1])
        done = terminated or truncated
    env.close()
    return actions


@pytest.mark.parametrize("env_id", SHIPPED)
def test_a_pickled_env_continues_identically_from_any_step(env_id):
    seed = 11
    actions = _oracle_actions(env_id, seed)
    whole = _played(gym.make(env_id), seed, actions)
    assert whole[-1][1] == 1.0  # the oracle's episode: the copies below must end as it does
    for cut in range(len(actions) + 1):  # pickled after the reset and after every step
        env = gym.make(env_id)
        head = _played(env, seed, actions[:cut])
        copy = pickle.loads(pickle.dumps(env))
        tail = [copy.step(a) for a in actions[cut:]]
        assert head + tail == whole, (env_id, cut)
        assert copy.unwrapped.episode.messages == whole[-1][0]  # the whole conversation, in the copy


@pytest.mark.parametrize("env_id", ["trace/retail-v0", "trace/tool_calling_precision-v0"])
def test_a_copy_goes_on_to_the_same_next_episodes_seeded_or_not(env_id):
    env = gym.make(env_id)
    env.reset()  # unseeded: drawn from the env's generator, which a copy must carry
    env.step(WRONG)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.unwrapped.episode.messages == env.unwrapped.episode.messages
    for _ in range(2):
        assert copy.reset()[0] == env.reset()[0]
    assert copy.unwrapped.np_random.integers(1 << 30) == env.unwrapped.np_random.integers(1 << 30)
    fresh = gym.make(env_id)
    assert pickle.loads(pickle.dumps(fresh)).reset(seed=4)[0] == gym.make(env_id).reset(seed=4)[0]


def test_a_copy_keeps_its_knobs_render_mode_and_spec():
    env = gym.make("trace/retail-v0", render_mode="ansi", opening="given")
    env.reset(seed=2)
    copy = pickle.loads(pickle.dumps(env))
    assert copy.unwrapped.spec == env.unwrapped.spec and copy.unwrapped.render_mode == "ansi"
    assert copy.render() == env.render()


def test_a_pickled_action_space_validates_and_samples_without_the_env():
    space = gym.make("trace/airline-v0").action_space
    copy = pickle.loads(pickle.dumps(space))
    call = {"name": "get_user_details", "arguments": {"user_id": "mia_li_3668"}}
    assert copy.contains(call) and not copy.contains({"name": "get_user_details", "arguments": {}})
    assert copy == space and copy.contains(copy.sample())


def _step_in_child(env, action):
    return env.step(action)


@pytest.mark.parametrize("env_id", SHIPPED)
def test_every_env_runs_in_an_async_vector_env(env_id):
    seeds = [3, 5]
    sync = gym.make_vec(env_id, 2, vectorization_mode="sync")
    vector = gym.make_vec(env_id, 2, vectorization_mode="async", vector_kwargs={"shared_memory": False})
    try:
        assert vector.reset(seed=seeds)[0] == sync.reset(seed=seeds)[0]
        stepped, expected = vector.step((WRONG, WRONG)), sync.step((WRONG, WRONG))
        assert stepped[0] == expected[0] and list(stepped[1]) == list(expected[1])
        assert list(stepped[2]) == list(expected[2]) and list(stepped[3]) == list(expected[3])
    finally:
        vector.close()
        sync.close()


def test_a_pickled_env_steps_on_in_a_process_pool():
    env = gym.make("trace/airline-v0")
    obs, _ = env.reset(seed=1)
    action = policies.oracle(env.unwrapped, obs)
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        there = pool.apply(_step_in_child, (env, action))
    assert there[:4] == env.step(action)[:4]


@pytest.mark.skipif(not bubblewrap_status()[0], reason="bubblewrap cannot run here")
def test_a_sandboxed_env_reconnects_to_a_worker_of_its_own():
    source = EnvSource.from_file(REPO / "generated_envs" / "multi_step_task_completion.py")
    with WorkerPool(1) as pool:
        env = RemoteEnv(source, pool=pool)
        obs, _ = env.reset(seed=6)
        actions = []
        for _ in range(2):
            actions.append(policies.oracle(env, obs))
            obs = env.step(actions[-1])[0]
        copy = pickle.loads(pickle.dumps(env))
        assert copy.pool is not pool and copy.episode.messages == env.episode.messages
        action = policies.oracle(env, obs)
        assert copy.step(action)[:4] == env.step(action)[:4]
        copy.close()
        env.reset()  # unseeded: the worker drew the episode, which no copy can replay
        with pytest.raises(pickle.PicklingError, match="reset without a seed"):
            pickle.dumps(env)
        env.close()


def test_an_action_changed_after_its_step_changes_no_copy():
    env = gym.make("trace/airline-v0")
    env.reset(seed=1)
    action = {"name": "get_user_details", "arguments": {"user_id": "nobody_1"}}
    env.step(action)
    action["arguments"]["user_id"] = "somebody_else_2"  # the caller reuses its dict
    copy = pickle.loads(pickle.dumps(env))
    assert copy.unwrapped.episode.messages == env.unwrapped.episode.messages


def test_an_action_no_pickle_takes_makes_the_env_refuse_to_pickle_saying_why():
    env = gym.make("trace/retail-v0")
    env.reset(seed=1)

    class Turn(dict):  # a dict the parser reads, which pickle cannot rebuild (a local class)
        pass

    env.step(Turn(role="assistant", content="Hello, how can I help?"))
    with pytest.raises(pickle.PicklingError, match="does not pickle"):
        pickle.dumps(env)
    env.reset(seed=2)  # a new episode pickles again
    assert pickle.loads(pickle.dumps(env)).unwrapped.episode.messages == env.unwrapped.episode.messages


@pytest.mark.skipif(not bubblewrap_status()[0], reason="bubblewrap cannot run here")
def test_a_pickled_sandboxed_env_does_not_load_a_module_swapped_since(tmp_path):
    """The pickle names the module file and its sha256: a module replaced on disk between the
    pickle and its load (an audited one swapped for anything else) is refused, not replayed."""
    from trace_gym.sandbox import RemoteEnvError

    module = tmp_path / "env_module.py"
    module.write_bytes((REPO / "generated_envs" / "multi_step_task_completion.py").read_bytes())
    with WorkerPool(1) as pool:
        env = RemoteEnv(EnvSource.from_file(module), pool=pool)
        env.reset(seed=6)
        blob = pickle.dumps(env)
        env.close()
    module.write_text(module.read_text() + "\n# changed after the audit\n")
    with pytest.raises(RemoteEnvError, match="changed since it was hashed"):
        pickle.loads(blob)
