"""The endpoint policy against a local OpenAI-compatible server: tool calls, malformed
calls, HTTP 500s and timeouts."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.agents.fake_server import FakeServer, tool_call
from trace_gym.agents.endpoint import EndpointError, EndpointPolicy
from trace_gym.errors import InvalidConfig
from trace_gym.rollout import read_records, rollout


def test_tool_calls_and_replies_drive_an_episode():
    def script(body):
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        assert body["tools"] and body["messages"][0]["role"] == "system"
        if turn == 0:
            return "ok", {"content": "Could you please tell me your user id?"}
        if turn == 1:
            return "ok", tool_call("get_user_details", {"user_id": "nobody"})
        return "ok", {"content": "Sorry, I cannot help."}

    with FakeServer(script) as server:
        policy = EndpointPolicy(base_url=server.url, model="fake", retries=0)
        env = gym.make("trace/airline-v0")
        obs, info = env.reset(seed=0)
        for _ in range(3):
            obs, reward, terminated, truncated, info = env.step(policy.act(obs, info["tools"]))
        call = next(i for i, m in enumerate(obs) if m.get("tool_calls"))
        assert obs[call]["tool_calls"][0]["function"]["name"] == "get_user_details"
        assert obs[call + 1]["content"].startswith("Error: User nobody not found")


def test_malformed_tool_call_text_becomes_an_error_observation():
    with FakeServer(lambda body: ("ok", {"content": '<tool_call>{"name": "get_user_details", "arguments": </tool_call>'})) as server:
        policy = EndpointPolicy(base_url=server.url, model="fake", retries=0)
        env = gym.make("trace/retail-v0")
        obs, info = env.reset(seed=1)
        obs, *_ = env.step(policy.act(obs, info["tools"]))
        assert obs[-2]["tool_calls"][0]["function"]["name"] == "invalid_tool_call"
        assert obs[-1]["role"] == "tool" and obs[-1]["content"].startswith("Error: tool call is not valid JSON")


def test_server_errors_are_retried_then_reported():
    calls = []

    def script(body):
        calls.append(1)
        return ("error", 500) if len(calls) <= 2 else ("ok", {"content": "hello"})

    with FakeServer(script) as server:
        policy = EndpointPolicy(base_url=server.url, model="fake", retries=3, backoff=0.01)
        assert policy.act([{"role": "user", "content": "hi"}], [])["content"] == "hello"
        assert len(calls) == 3
    with FakeServer(lambda body: ("error", 500)) as server:
        policy = EndpointPolicy(base_url=server.url, model="fake", retries=2, backoff=0.01)
        with pytest.raises(EndpointError, match="failed 3 times"):
            policy.act([{"role": "user", "content": "hi"}], [])
    with FakeServer(lambda body: ("error", 400)) as server:
        policy = EndpointPolicy(base_url=server.url, model="fake", retries=2, backoff=0.01)
        with pytest.raises(EndpointError, match="HTTP 400"):
            policy.act([{"role": "user", "content": "hi"}], [])


def test_timeouts_are_retried_then_reported():
    with FakeServer(lambda body: ("sleep", 2.0)) as server:
        policy = EndpointPolicy(base_url=server.url, model="fake", retries=1, timeout=0.3, backoff=0.01)
        with pytest.raises(EndpointError, match="APITimeoutError"):
            policy.act([{"role": "user", "content": "hi"}], [])


def test_failed_rollout_writes_no_half_episode(tmp_path):
    answers = []

    def script(body):
        answers.append(1)
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        return ("error", 500) if turn >= 2 else ("ok", {"content": "Could you tell me your user id?"})

    out = tmp_path / "runs.jsonl"
    import functools

    from trace_gym.agents import make_policy

    with FakeServer(script) as server:
        factory = functools.partial(make_policy, "endpoint", base_url=server.url, model="fake", retries=1)
        with pytest.raises(EndpointError):
            rollout("trace/airline-v0", factory, [0, 1], out, workers=1, threaded=True, progress=False)
    assert read_records(out) == []
    assert not out.exists() or out.read_text() == ""


def test_configuration_comes_from_environment(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("VLLM_BASE_URLS", raising=False)
    with pytest.raises(InvalidConfig, match="OPENAI_BASE_URL"):
        EndpointPolicy()
    monkeypatch.setenv("VLLM_BASE_URLS", "http://127.0.0.1:9/v1, http://127.0.0.1:10/v1")
    monkeypatch.setenv("TRACE_GYM_MODEL", "qwen")
    policy = EndpointPolicy()
    assert policy.base_url == "http://127.0.0.1:9/v1" and policy.name == "endpoint:qwen"
