"""verifiers: `load_environment` gives a multi-turn env that verifiers' own rollout loop
(`evaluate`, its OpenAI chat client over HTTP) plays against a scripted server on loopback,
each rollout's reward the env's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gymnasium as gym
import pytest
import verifiers as vf
from openai import AsyncOpenAI

from tests.agents.fake_server import FakeServer
from trace_gym.actions import parse_action
from trace_gym.errors import InvalidConfig
from trace_gym.interop.verifiers import TraceMultiTurnEnv, load_environment

ENVS = ["trace/retail-v0", "trace/precondition_verification-v0"]  # a target and a capability env
REFUSAL = "Sorry, I cannot help with that."


class Script:
    """A served model, scripted: it finds a request's episode by its opening conversation,
    replays the assistant turns the request holds in its own copy of the env, and answers with
    the oracle's next turn (tool calls under ids of its own), or, for the seeds in `refuse`, a
    refusal. It records every pairing of a tool result with the call it answers."""

    def __init__(self, env_id: str, openings: dict[str, int], refuse: set[int]) -> None:
        self.env_id, self.openings, self.refuse = env_id, openings, refuse
        self.unanswered: list[str] = []

    def __call__(self, body: dict) -> tuple[str, dict]:
        messages = body["messages"]
        k = next(k for k in range(1, len(messages) + 1) if opening_key(messages[:k]) in self.openings)
        seed = self.openings[opening_key(messages[:k])]
        if seed in self.refuse:
            return "ok", {"content": REFUSAL}
        env = gym.make(self.env_id)
        env.reset(seed=seed)
        calls: set[str] = set()
        for m in messages[k:]:
            if m["role"] == "assistant":
                env.step(m)
                calls = {c["id"] for c in m.get("tool_calls") or []}
            elif m["role"] == "tool" and m["tool_call_id"] not in calls:
                self.unanswered.append(m["tool_call_id"])
        parsed = parse_action(env.unwrapped.oracle_action(env.unwrapped.episode.messages))
        turn = len([m for m in messages if m["role"] == "assistant"])
        tool_calls = [{"id": f"served-{seed}-{turn}-{i}", "type": "function",
                       "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                      for i, c in enumerate(parsed.calls)]
        return "ok", {"content": parsed.content, **({"tool_calls": tool_calls} if tool_calls else {})}


def opening_key(messages: list[dict]) -> str:
    """A conversation's roles and texts, as a key."""
    return json.dumps([(m["role"], m.get("content")) for m in messages])


def _replayed_reward(env_id: str, seed: int, completion: list) -> float:
    """The env's own reward for the assistant turns of a verifiers completion, replayed."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    for m in completion:  # verifiers' messages, or their dicts (whose tool calls are JSON text)
        m = m if isinstance(m, dict) else m.model_dump()
        if m["role"] == "assistant":
            calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                     for c in (json.loads(c) if isinstance(c, str) else c for c in m.get("tool_calls") or [])]
            _, reward, terminated, truncated, _ = env.step(
                {"role": "assistant", "content": m["content"], **({"tool_calls": calls} if calls else {})})
            if terminated or truncated:
                return float(reward)
    raise AssertionError("the completion ended before the episode did")


@pytest.mark.parametrize("env_id", ENVS)
def test_verifiers_own_rollout_loop_pays_the_envs_reward(env_id):
    env = load_environment(env_id, num_train_examples=2, num_eval_examples=2)
    assert isinstance(env, vf.MultiTurnEnv)
    rows = env.get_eval_dataset()
    seeds = [json.loads(info)["seed"] for info in rows["info"]]
    assert seeds == [1_000_000_000, 1_000_000_001]  # the test split's first seeds
    assert [json.loads(info)["seed"] for info in env.get_dataset()["info"]] == [0, 1]
    openings = {opening_key(prompt): seed for prompt, seed in zip(rows["prompt"], seeds)}
    script = Script(env_id, openings, refuse={seeds[0]})
    with FakeServer(script) as server:
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.url, api_key="-"))
        results = env.evaluate_sync(client, "served", num_examples=2, rollouts_per_example=2)
    outputs = results["outputs"]
    assert len(outputs) == 4
    by_seed = {}
    for out in outputs:
        seed = out["info"]["seed"]
        by_seed.setdefault(seed, []).append(out["reward"])
        assert out["reward"] == _replayed_reward(env_id, seed, out["completion"])
    assert by_seed == {seeds[0]: [0.0, 0.0], seeds[1]: [1.0, 1.0]}  # the refusals fail, the oracle passes
    assert script.unanswered == []  # every tool result answered a call of the turn before it, by its id
    tools = server.requests[0]["tools"]
    assert [t["function"]["name"] for t in tools] == [t["name"] for t in json.loads(rows["info"][0])["tool_defs"]]


def test_an_unknown_knob_is_refused_when_the_env_is_loaded():
    with pytest.raises((InvalidConfig, TypeError), match="no_such_knob"):
        load_environment(ENVS[1], no_such_knob=3)


def test_an_env_without_eval_rows_has_no_eval_dataset():
    env = TraceMultiTurnEnv(ENVS[1], [5], [])
    assert env.eval_dataset is None and [json.loads(i)["seed"] for i in env.get_dataset()["info"]] == [5]


def test_a_verifiers_without_the_classic_stack_is_named_on_import(tmp_path):
    """verifiers 0.4 has no MultiTurnEnv (its stack is verifiers.v1): the import says which
    version it found and which the adapter needs."""
    (tmp_path / "verifiers").mkdir()
    (tmp_path / "verifiers" / "__init__.py").write_text('__version__ = "0.4.0"\n')
    out = subprocess.run([sys.executable, "-c", "import trace_gym.interop.verifiers"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)}, timeout=120)
    assert out.returncode == 1
    assert "needs verifiers 0.3 (its MultiTurnEnv); installed: 0.4.0" in out.stderr
