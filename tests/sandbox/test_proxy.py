"""RemoteEnv: the same episodes as in this process, the env surface the kit uses, checked
answers, and what a timeout or a lost worker does to an episode."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from tests.audit.mutants import mutant
from tests.conftest import REPO
from trace_gym.errors import EpisodeError, InvalidConfig
from trace_gym.sandbox import EnvSource, EnvWorkerError, Limits, RemoteEnv, RemoteEnvError, WorkerPool
from trace_gym.testing import policies

PRECONDITION = REPO / "generated_envs" / "precondition_verification.py"
QUICK = Limits(memory_bytes=2 * 2**30, request_seconds=3)


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(2, QUICK) as p:
        yield p


def _episode(env, seed, act):
    obs, info = env.reset(seed=seed)
    steps = [(obs, info)]
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(act(env, obs))
        steps.append((obs, reward, terminated, truncated, info))
        done = terminated or truncated
    return steps


@pytest.mark.parametrize("policy", ["oracle", "random"])
def test_remote_episodes_equal_in_process_ones(pool, policy):
    local = gym.make("trace/precondition_verification-v0").unwrapped
    remote = RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool)
    act = policies.oracle if policy == "oracle" else policies.degenerate_policies(3)["random"]
    act_again = policies.oracle if policy == "oracle" else policies.degenerate_policies(3)["random"]
    for seed in (0, 1, 7, 1_000_000_003):
        assert _episode(remote, seed, act) == _episode(local, seed, act_again)
        assert remote.task.to_json() == local.task.to_json() and remote.task.hidden == local.task.hidden
        assert remote.episode.initial_world.hash() == local.episode.initial_world.hash()
        assert remote.episode.turn == local.episode.turn
        assert [(t.name, t.kind, t.schema) for t in remote.episode.toolset.values()] == \
               [(t.name, t.kind, t.schema) for t in local.episode.toolset.values()]
    assert list(remote.action_space.toolset) == list(local.action_space.toolset)
    assert remote.metadata == local.metadata and remote.code_sha256() == local.code_sha256()


def test_hints_and_options_cross_the_pipe(pool):
    remote = RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool)
    local = gym.make("trace/precondition_verification-v0").unwrapped
    assert remote.reset(seed=4, options={"hint": True}) == local.reset(seed=4, options={"hint": True})
    with pytest.raises(InvalidConfig, match="unknown reset option"):
        remote.reset(seed=4, options={"bogus": 1})


def test_actions_json_cannot_carry_are_read_as_in_process(pool):
    class Odd(dict):
        def keys(self):
            raise RuntimeError("no keys")

    remote = RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool)
    local = gym.make("trace/precondition_verification-v0").unwrapped
    for action in [("a", "tuple"), {"name": "get_user_details", "arguments": {"user_id": object()}}, Odd(name="x"),
                   {"name": "get_user_details", "arguments": {"user_id": float("nan")}}]:
        remote.reset(seed=2)
        local.reset(seed=2)
        assert remote.step(action) == local.step(action)


def test_check_env_passes_and_ansi_renders(pool):
    remote = RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool)
    check_env(remote, skip_render_check=True)
    ansi = RemoteEnv(EnvSource.from_file(PRECONDITION), render_mode="ansi", pool=pool)
    ansi.reset(seed=1)
    assert ansi.render().startswith("[SYSTEM]")


def test_out_of_order_calls_are_episode_errors(pool):
    remote = RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool)
    with pytest.raises(EpisodeError, match="before reset"):
        remote.step("hi")
    remote.reset(seed=0)
    policies.play(remote, 0, policies.oracle)
    with pytest.raises(EpisodeError, match="after the episode ended"):
        remote.step("hi")


def test_many_envs_share_a_few_workers():
    with WorkerPool(2, QUICK) as pool:
        envs = [RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool) for _ in range(12)]
        for i, env in enumerate(envs):
            env.reset(seed=i)
        assert len({env._worker.proc.pid for env in envs}) == 2
        assert sorted(w.instances for w in pool.workers) == [6, 6]


def test_a_module_changed_after_hashing_is_not_run(tmp_path, pool):
    path = mutant(tmp_path, "fine")
    source = EnvSource.from_file(path)
    path.write_text(path.read_text() + "\nX = 1\n")
    with pytest.raises(RemoteEnvError, match="changed since it was hashed"):
        RemoteEnv(source, pool=pool)


HANG = {"env_methods": ("def step(self, action):\n"
                        "    while action == 'hang':\n"
                        "        pass\n"
                        "    return super().step(action)")}
RETURNS_JUNK = {"env_methods": ("def step(self, action):\n"
                                "    obs, r, te, tr, info = super().step(action)\n"
                                "    return 'not messages', r, te, tr, info")}


def test_a_step_over_its_time_ends_the_episode_as_truncated_and_the_env_recovers(tmp_path):
    path = mutant(tmp_path, "hangs", **HANG)
    with WorkerPool(1, QUICK) as pool:
        env = RemoteEnv(EnvSource.from_file(path), pool=pool)
        neighbour = RemoteEnv(EnvSource.from_file(path), pool=pool)
        before, _ = env.reset(seed=1)
        neighbour.reset(seed=2)
        obs, reward, terminated, truncated, info = env.step("hang")
        assert (reward, terminated, truncated) == (0.0, False, True)
        assert info["termination_reason"] == "env_timeout: the env worker did not answer within 3 s (an endless loop?)"
        assert info["verdict"] is None and obs == before  # the conversation as it was
        # the other episode on the killed worker ends too, saying why
        *_, info = neighbour.step("Done.")
        assert info["termination_reason"].startswith("env_worker_lost: the env worker did not answer")
        # the next reset gets a fresh worker
        assert policies.play(env, 1, policies.oracle)[0] == 1.0


def test_the_kit_gets_an_error_not_a_truncation(tmp_path):
    from trace_gym.sandbox import WorkerTimeout

    path = mutant(tmp_path, "hangs", **HANG)
    with WorkerPool(1, QUICK) as pool:
        env = RemoteEnv(EnvSource.from_file(path), pool=pool, on_timeout="raise")
        env.reset(seed=1)
        with pytest.raises(WorkerTimeout, match="endless loop"):
            env.step("hang")


def test_answers_outside_the_env_contract_are_refused(tmp_path, pool):
    env = RemoteEnv(EnvSource.from_file(mutant(tmp_path, "junk", **RETURNS_JUNK)), pool=pool)
    env.reset(seed=0)
    with pytest.raises(EnvWorkerError, match="outside the env contract"):
        env.step("Done.")


def test_an_env_that_raises_raises_its_error_here(tmp_path, pool):
    path = mutant(tmp_path, "raises", env_methods="def step(self, action):\n    raise ValueError('broken step')")
    env = RemoteEnv(EnvSource.from_file(path), pool=pool)
    env.reset(seed=0)
    with pytest.raises(RemoteEnvError, match="ValueError: broken step"):
        env.step("Done.")


def test_instances_of_collected_proxies_are_closed_in_the_worker():
    import gc

    with WorkerPool(1, QUICK) as pool:
        gone = []
        for seed in range(5):
            env = RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool)
            env.reset(seed=seed)
            gone.append(env._id)
        del env
        gc.collect()
        keep = RemoteEnv(EnvSource.from_file(PRECONDITION), pool=pool)  # its request carries the drops
        keep.reset(seed=0)
        worker = keep._worker
        assert worker.instances == 1 and worker.dropped == []
        assert worker.call({"op": "render", "id": keep._id}) is None  # the kept one still answers
        for old in gone:
            with pytest.raises(RemoteEnvError, match="no env instance"):
                worker.call({"op": "render", "id": old})


def test_an_env_ref_read_back_from_json_keeps_its_pool(pool):
    from trace_gym.testing import EnvRef

    ref = EnvRef(path=str(PRECONDITION), pool=pool)
    again = EnvRef.from_json(ref.to_json())
    assert again.pool is pool and again == ref
    assert EnvRef.from_json(EnvRef(path=str(PRECONDITION)).to_json()).pool is None
