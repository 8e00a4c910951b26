"""The README's "Use with your trainer" blocks run as written, and give the env's rewards."""

from __future__ import annotations

import json

import gymnasium as gym
import pandas as pd
import skyrl_gym

from tests.interop.readme import block
from trace_gym.interop.tasks import task_rows


def test_the_gymnasium_block_runs_and_matches_single_envs():
    namespace: dict = {}
    exec(compile(block("Any trainer (Gymnasium)"), "README.md (Gymnasium)", "exec"), namespace)
    envs = namespace["envs"]
    try:
        for i in range(4):
            single = gym.make("trace/retail-v0")
            single.reset(seed=i)
            messages, reward, terminated, truncated, _ = single.step("Hello! How can I help?")
            assert namespace["conversations"][i] == messages
            assert (namespace["rewards"][i], namespace["terminated"][i], namespace["truncated"][i]) == \
                (reward, terminated, truncated)
    finally:
        envs.close()


def test_the_dataset_block_runs_and_holds_the_tasks():
    namespace: dict = {}
    exec(compile(block("A dataset of tasks"), "README.md (tasks)", "exec"), namespace)
    tasks = namespace["tasks"]
    assert len(tasks) == 256
    (row,) = task_rows("trace/precondition_verification-v0", [17])
    assert tasks[17]["seed"] == 17 and json.loads(tasks[17]["task"]) == row["task"]


def test_the_skyrl_block_runs_and_its_rows_play_in_skyrl_gym(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    exec(compile(block("SkyRL"), "README.md (SkyRL)", "exec"), {})
    rows = pd.read_parquet(tmp_path / "runs" / "skyrl-train.parquet").to_dict("records")
    assert len(rows) == 256
    row = rows[3]
    extras = {k: v for k, v in row.items() if k not in ("prompt", "env_class")}
    env = skyrl_gym.make(row["env_class"], env_config={}, extras=extras)
    history, _ = env.init([dict(m) for m in row["prompt"]])
    own = gym.make("trace/precondition_verification-v0")
    assert history == own.reset(seed=3)[0]
    done = False
    while not done:
        action = own.unwrapped.oracle_action(own.unwrapped.episode.messages)
        out = env.step(json.dumps(action) if isinstance(action, dict) else action)
        _, reward, terminated, truncated, _ = own.step(action)
        done = out["done"]
        assert done == (terminated or truncated)
    assert out["reward"] == reward == 1.0


def test_the_art_block_runs_with_a_scripted_client_for_the_server():
    from tests.interop.test_art import ScriptedClient

    code = block("OpenPipe ART")
    served = 'AsyncOpenAI(base_url="http://localhost:8000/v1", api_key="local")'
    assert code.count(served) == 1, "the README's ART block no longer makes its client so"
    namespace: dict = {"ScriptedClient": ScriptedClient}
    exec(compile(code.replace(served, 'ScriptedClient("trace/retail-v0", 0)'), "README.md (ART)", "exec"), namespace)
    trajectory = namespace["trajectory"]
    assert trajectory.reward == 1.0 and trajectory.metadata == {"env_id": "trace/retail-v0", "seed": 0}


def test_the_verifiers_block_runs_against_a_scripted_server():
    from tests.agents.fake_server import FakeServer
    from tests.interop.test_verifiers import Script, opening_key
    from trace_gym.seeding import seeds

    code = block("verifiers")
    served = '"http://localhost:8000/v1"'
    assert code.count(served) == 1, "the README's verifiers block no longer names its server so"
    env_id = "trace/precondition_verification-v0"
    openings = {opening_key(row["prompt"]): row["seed"] for row in task_rows(env_id, seeds("test", 0, 8))}
    with FakeServer(Script(env_id, openings, refuse=set())) as server:
        namespace: dict = {}
        exec(compile(code.replace(served, repr(server.url)), "README.md (verifiers)", "exec"), namespace)
    outputs = namespace["results"]["outputs"]
    assert len(outputs) == 32 and all(out["reward"] == 1.0 for out in outputs)  # the oracle's turns, served
    assert sorted({out["info"]["seed"] for out in outputs}) == list(seeds("test", 0, 8))
