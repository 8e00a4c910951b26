"""The composition a vLLM server plays: an adapter as an endpoint policy (loaded at runtime
under a name from its hash) and the served task router, against a local stand-in server."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from tests.trainer.fake_vllm import FakeVLLM  # noqa: E402
from trace_gym.agents import endpoint, make_policy  # noqa: E402
from trace_gym.cli import main  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"
CONFIG = REPO / "configs" / "embedded.toml"
ENV = "trace/precondition_verification-v0"


@pytest.fixture(scope="module")
def compose_dir(tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("served")
    adapters = {}
    for i, name in enumerate(("precondition_verification", "tool_calling_precision")):
        torch.manual_seed(i)
        model = get_peft_model(AutoModelForCausalLM.from_pretrained(FIXTURE), LoraConfig(
            r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
        model.save_pretrained(root / f"adapter{i}")
        adapters[name] = str(root / f"adapter{i}")
    (root / "router.json").write_text(json.dumps({"adapters": adapters, "envs": {}}))
    return root


@pytest.fixture(autouse=True)
def fresh_process_cache():
    endpoint._LOADED.clear()  # each test starts as a new process would
    yield
    endpoint._LOADED.clear()


def _turn(policy, seed=0):
    env = gym.make(ENV, prompt_style="compact").unwrapped
    messages, info = env.reset(seed=seed)
    policy.bind(env, seed)
    return policy.act(messages, info["tools"])


def test_an_adapter_is_loaded_once_under_its_hash_and_its_turns_go_to_it(compose_dir):
    adapter = compose_dir / "adapter0"
    with FakeVLLM(FIXTURE) as server:
        policy = make_policy("endpoint", base_url=server.url, model="base", adapter=str(adapter),
                             temperature=0.0, max_tokens=8)
        assert policy.model == endpoint.adapter_name(adapter) and policy.model.startswith("adapter0-")
        assert server.events == [("load", policy.model)]
        _turn(policy)
        assert server.chats[-1]["model"] == policy.model
        make_policy("endpoint", base_url=server.url, model="base", adapter=str(adapter))
        assert server.events == [("load", policy.model)]  # this process loaded it already
        endpoint._LOADED.clear()  # another process: the server answers "already loaded", which is fine
        assert make_policy("endpoint", base_url=server.url, model="base", adapter=str(adapter)).model == policy.model


def test_a_long_adapter_name_loaded_by_another_process_is_accepted(compose_dir, tmp_path):
    import shutil

    long = tmp_path / ("adapter-" + "x" * 240)  # vLLM's "already been loaded" message names it first
    shutil.copytree(compose_dir / "adapter0", long)
    with FakeVLLM(FIXTURE) as server:
        name = make_policy("endpoint", base_url=server.url, model="base", adapter=str(long)).model
        endpoint._LOADED.clear()
        assert make_policy("endpoint", base_url=server.url, model="base", adapter=str(long)).model == name
        with pytest.raises(endpoint.ServerRefused, match="answered 404"):  # a missing route is not "loaded"
            endpoint.serve_adapter(server.url.removesuffix("/v1"), compose_dir / "adapter1")


def test_a_changed_adapter_gets_a_new_name_and_a_bad_one_is_refused(compose_dir, tmp_path):
    import shutil

    changed = tmp_path / "adapter0"
    shutil.copytree(compose_dir / "adapter0", changed)
    (changed / "README.md").write_text("retrained\n")
    assert endpoint.adapter_name(changed) != endpoint.adapter_name(compose_dir / "adapter0")
    with pytest.raises(Exception, match="not a LoRA adapter directory"):
        endpoint.adapter_name(tmp_path)


def test_the_served_router_decides_once_per_episode_on_the_base_and_plays_the_chosen_option(compose_dir, tmp_path):
    out = tmp_path / "router.jsonl"
    with FakeVLLM(FIXTURE) as server:
        assert main(["rollout", ENV, "--policy", "served_router", "--base-url", server.url, "--model", "base",
                     "--compose-dir", str(compose_dir), "--seeds", "0:2", "--out", str(out), "--quiet",
                     "--workers", "2", "--temperature", "0", "--max-new-tokens", "8", "--config", str(CONFIG)]) == 0
        decisions = [c for c in server.chats if c.get("structured_outputs")]
        turns = [c for c in server.chats if not c.get("structured_outputs")]
        # later turns of a conversation keep its option: no second decision
        policy = make_policy("served_router", base_url=server.url, model="base", compose_dir=str(compose_dir),
                             temperature=0.0, max_tokens=4)
        env = gym.make(ENV, prompt_style="compact").unwrapped
        messages, info = env.reset(seed=0)
        policy.bind(env, 0)
        before = len(server.chats)
        policy.act(messages, info["tools"])
        policy.act([*messages, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "and?"}], info["tools"])
        assert [bool(c.get("structured_outputs")) for c in server.chats[before:]] == [True, False, False]
    assert len(decisions) == 2 and {c["model"] for c in decisions} == {"base"}
    assert decisions[0]["structured_outputs"]["choice"] == ["A", "B", "C"] and decisions[0]["max_tokens"] == 1
    served = {"base", *(endpoint.adapter_name(compose_dir / f"adapter{i}") for i in range(2))}
    assert turns and {c["model"] for c in turns} <= served
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and records[0]["run"]["policy"]["name"] == "served_router"
    assert set(records[0]["run"]["policy"]["adapters_sha256"]) == {"precondition_verification", "tool_calling_precision"}
