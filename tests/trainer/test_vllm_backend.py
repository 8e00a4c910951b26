"""The vLLM rollout backend against local servers that speak vLLM's completions and LoRA
endpoints: the adapter of each iteration is saved, loaded under a new name on every server
and the previous one unloaded; every turn is a token-id completion with the current adapter;
the servers' log-probabilities are the trainer's p_old."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO

pytest.importorskip("torch")
pytest.importorskip("peft")

from tests.trainer.fake_vllm import FakeVLLM
from tests.trainer.learnable_env import register
from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.trainer.config import GRPOConfig
from trace_gym.trainer.vllm import base_urls

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


def test_base_urls_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("VLLM_BASE_URLS", "http://a:8000/v1, http://b:8001/")
    assert base_urls() == ["http://a:8000/v1", "http://b:8001/v1"]
    monkeypatch.delenv("VLLM_BASE_URLS")
    with pytest.raises(InvalidConfig, match="VLLM_BASE_URLS"):
        base_urls()


def test_training_through_two_servers_hot_swaps_the_adapter(tmp_path, monkeypatch):
    from trace_gym.trainer.train import train

    with FakeVLLM(FIXTURE) as a, FakeVLLM(FIXTURE) as b:
        monkeypatch.setenv("VLLM_BASE_URLS", f"{a.url},{b.url}")
        config = GRPOConfig(env_id=register(), env_kwargs={}, iterations=2, groups=2, group_size=4,
                            max_new_tokens=8, threads=1, lr=1e-2, backend="vllm", min_informative=0.0,
                            checkpoint_every=2, batch_episodes=4)
        train(config, FIXTURE, tmp_path / "run", log=None)
        for server in (a, b):
            assert server.events == [("load", "trace-adapter-it0"), ("unload", "trace-adapter-it0"),
                                     ("load", "trace-adapter-it1")]
            assert server.completions and all(isinstance(c["prompt"], list) and c["return_token_ids"]
                                              and c["logprobs"] == 0 for c in server.completions)
        models = [c["model"] for c in a.completions + b.completions]
        assert set(models) == {"trace-adapter-it0", "trace-adapter-it1"}
        rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
        assert [r["episodes/total"] for r in rows] == [8, 8]
        # the servers run the trainer's own weights: their log-probabilities are the trainer's
        informative = [r for r in rows if "loss/logp_mismatch" in r]
        assert informative and all(r["loss/logp_mismatch"] < 1e-4 for r in informative)


def test_a_server_error_is_named(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from trace_gym.agents.episodes import Request
    from trace_gym.trainer.vllm import VLLMBackend

    with FakeVLLM(FIXTURE) as server:
        backend = VLLMBackend([server.url], AutoTokenizer.from_pretrained(FIXTURE), "trace/airline-v0",
                              {"prompt_style": "compact"}, adapter_dir=tmp_path, retries=0)
        with pytest.raises(TraceGymError, match="no adapter loaded yet"):
            backend.play([Request(1, 0, False, 0)])
        backend.served = "never-loaded"
        with pytest.raises(TraceGymError, match="answered 404.*never-loaded"):
            backend.play([Request(1, 0, False, 0)])
