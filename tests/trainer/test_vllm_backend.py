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


def _vllm_config(**kw):
    base = dict(env_id=register(), env_kwargs={}, iterations=2, groups=2, group_size=4, max_new_tokens=8,
                threads=1, lr=1e-2, backend="vllm", min_informative=0.0, checkpoint_every=2, batch_episodes=4,
                temperature=0.7)
    return GRPOConfig(**{**base, **kw})


def test_training_through_two_servers_hot_swaps_the_adapter(tmp_path, monkeypatch):
    """At T = 0.7 the servers' log-probabilities (processed, after the temperature) are the
    trainer's log_softmax(logits / T): dropping the temperature on either side fails here."""
    import re

    from trace_gym.trainer.training import train

    with FakeVLLM(FIXTURE, "processed_logprobs") as a, FakeVLLM(FIXTURE, "processed_logprobs") as b:
        monkeypatch.setenv("VLLM_BASE_URLS", f"{a.url},{b.url}")
        train(_vllm_config(), FIXTURE, tmp_path / "run")
        for server in (a, b):
            assert [e[0] for e in server.events] == ["load", "unload", "load"]
            names = [e[1] for e in server.events]
            assert re.fullmatch(r"trace-adapter-[0-9a-f]{8}-it0", names[0]) and names[1] == names[0]
            assert names[2] == names[0].replace("-it0", "-it1")
            assert server.completions and all(isinstance(c["prompt"], list) and c["return_token_ids"]
                                              and c["logprobs"] == 0 for c in server.completions)
        models = [c["model"] for c in a.completions + b.completions]
        assert set(models) == {names[0], names[2]}
        # only the adapter last served is kept on disk
        assert [d.name for d in (tmp_path / "run" / "served_adapters").iterdir()] == [names[2]]
        rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
        assert [r["episodes/total"] for r in rows] == [8, 8]
        # the servers run the trainer's own weights: their log-probabilities are the trainer's
        informative = [r for r in rows if "loss/logp_mismatch" in r]
        assert informative and all(r["loss/logp_mismatch"] < 1e-4 for r in informative)


def test_a_server_reporting_raw_logprobs_is_refused_at_start(tmp_path, monkeypatch):
    from trace_gym.trainer.training import train

    with FakeVLLM(FIXTURE) as server:  # vLLM's default mode: before the temperature
        monkeypatch.setenv("VLLM_BASE_URLS", server.url)
        with pytest.raises(TraceGymError, match="start it with --logprobs-mode processed_logprobs"):
            train(_vllm_config(temperature=1.0), FIXTURE, tmp_path / "run")
        assert not [c for c in server.completions if c["temperature"] == 1.0]  # refused before any rollout


def test_a_resumed_vllm_run_reloads_the_adapter_its_killed_run_left_loaded(tmp_path, monkeypatch):
    from trace_gym.trainer.training import train

    def crash(row):
        raise KeyboardInterrupt  # after iteration 0, before its checkpoint

    with FakeVLLM(FIXTURE, "processed_logprobs") as server:
        monkeypatch.setenv("VLLM_BASE_URLS", server.url)
        config = _vllm_config(checkpoint_every=1)
        with pytest.raises(KeyboardInterrupt):
            train(config, FIXTURE, tmp_path / "run", on_iteration=crash)
        left = set(server.adapters)
        assert len(left) == 1
        train(config, FIXTURE, tmp_path / "run", resume=True)
        kinds = [e[0] for e in server.events]
        assert kinds == ["load", "unload", "load", "unload", "load"]  # the name unloaded, then loaded again
        assert server.events[1][1] == server.events[2][1] == left.pop()


def test_a_server_error_is_named(tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    from trace_gym.agents.episodes import EpisodeRequest
    from trace_gym.trainer.vllm import VLLMBackend

    with FakeVLLM(FIXTURE) as server:
        backend = VLLMBackend([server.url], AutoTokenizer.from_pretrained(FIXTURE), "trace/airline-v0",
                              {"prompt_style": "compact"}, adapter_dir=tmp_path, retries=0)
        with pytest.raises(TraceGymError, match="no adapter loaded yet"):
            backend.play([EpisodeRequest(1, 0, False, 0)])
        backend.served = "never-loaded"
        with pytest.raises(TraceGymError, match="answered 404.*never-loaded"):
            backend.play([EpisodeRequest(1, 0, False, 0)])


def test_a_hinted_episode_of_an_env_without_an_unhinted_prompt_is_played_as_the_other_backends_play_it():
    """An env whose reset info gives no `system_prompt_unhinted` has no hint-free prompt to
    condition the loss on: the loss conditions on the prompt played, as the local and OpenVINO
    backends do (this backend rendered a system prompt of None, and the chat template failed)."""
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from trace_gym.driver import EpisodeRequest, Live
    from trace_gym.trainer.vllm import _Completions

    backend = SimpleNamespace(served="trace-adapter", urls=["http://unused/v1"],
                              tokenizer=AutoTokenizer.from_pretrained(FIXTURE), complete=lambda url, prompt, seed: None)
    messages = [{"role": "system", "content": "Help the customer."}, {"role": "user", "content": "Hi."}]
    live = Live(0, EpisodeRequest(1, 0, hint=True), "some/env-v0", None, messages, [], None)
    with _Completions(backend, 1) as policy:
        policy.submit(live)
        ((_, prompt, loss_prompt),) = policy.pending.values()
    assert prompt and loss_prompt == prompt
