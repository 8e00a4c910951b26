"""verifiers: `load_environment` gives a multi-turn env that verifiers' own rollout loop
(`evaluate`, its OpenAI chat client over HTTP) plays against a scripted server on loopback,
each rollout's reward the env's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import gymnasium as gym
import pytest
import verifiers as vf
from openai import AsyncOpenAI

import trace_gym.interop.verifiers as trace_verifiers
from tests.agents.fake_server import FakeServer
from trace_gym.actions import parse_action
from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.interop import score
from trace_gym.interop.aio import AsyncEnv
from trace_gym.interop.verifiers import TraceMultiTurnEnv, load_environment

ENVS = ["trace/retail-v0", "trace/precondition_verification-v0"]  # a target and a capability env
REFUSAL = "Sorry, I cannot help with that."


class Script:
    """A served model, scripted: it finds a request's episode by its opening conversation,
    replays the assistant turns the request holds in its own copy of the env, and answers with
    the oracle's next turn (tool calls under ids of its own, or as hermes text with `as_text`,
    as a server without a tool parser returns them), or, for the seeds in `refuse`, a refusal.
    It records every tool result that answers no call of the turn before it."""

    def __init__(self, env_id: str, openings: dict[str, int], refuse: set[int], as_text: bool = False) -> None:
        self.env_id, self.openings, self.refuse, self.as_text = env_id, openings, refuse, as_text
        self.unanswered: list[str] = []
        self.later: list[list[dict]] = []  # each request's messages after the episode's opening

    def __call__(self, body: dict) -> tuple[str, dict]:
        messages = body["messages"]
        k = next(k for k in range(1, len(messages) + 1) if opening_key(messages[:k]) in self.openings)
        seed = self.openings[opening_key(messages[:k])]
        self.later.append(messages[k:])
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
        if self.as_text:
            blocks = "".join(f"<tool_call>{json.dumps({'name': c.name, 'arguments': c.arguments})}</tool_call>"
                             for c in parsed.calls)
            return "ok", {"content": (parsed.content or "") + blocks}
        turn = len([m for m in messages if m["role"] == "assistant"])
        tool_calls = [{"id": f"served-{seed}-{turn}-{i}", "type": "function",
                       "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
                      for i, c in enumerate(parsed.calls)]
        return "ok", {"content": parsed.content, **({"tool_calls": tool_calls} if tool_calls else {})}


def opening_key(messages: list[dict]) -> str:
    """A conversation's roles and texts, as a key."""
    return json.dumps([(m["role"], m.get("content")) for m in messages])


def openings_of(prompts: list, seeds: list[int]) -> dict[str, int]:
    """The seed of each opening conversation; refused where two seeds open alike (the script
    could not tell their episodes apart)."""
    openings = {opening_key(prompt): seed for prompt, seed in zip(prompts, seeds)}
    assert len(openings) == len(seeds), "two of these seeds open alike: choose others"
    return openings


def _replayed_reward(env_id: str, seed: int, completion: list) -> float:
    """The env's own reward for the assistant turns of a verifiers completion, replayed."""
    turns = []
    for m in completion:  # verifiers' messages, or their dicts (whose tool calls are JSON text)
        m = m if isinstance(m, dict) else m.model_dump()
        if m["role"] == "assistant":
            calls = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                     for c in (json.loads(c) if isinstance(c, str) else c for c in m.get("tool_calls") or [])]
            turns.append({"role": "assistant", "content": m["content"], **({"tool_calls": calls} if calls else {})})
    return score(env_id, seed, turns)


@pytest.mark.parametrize("env_id", ENVS)
def test_verifiers_own_rollout_loop_pays_the_envs_reward(env_id):
    env = load_environment(env_id, num_train_examples=2, num_eval_examples=2)
    assert isinstance(env, vf.MultiTurnEnv)
    rows = env.get_eval_dataset()
    seeds = [json.loads(info)["seed"] for info in rows["info"]]
    assert seeds == [1_000_000_000, 1_000_000_001]  # the test split's first seeds
    assert [json.loads(info)["seed"] for info in env.get_dataset()["info"]] == [0, 1]
    script = Script(env_id, openings_of(rows["prompt"], seeds), refuse={seeds[0]})
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
    with pytest.raises(InvalidConfig, match="no_such_knob"):
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


def test_tool_calls_written_as_text_get_their_results_as_user_turns():
    """A server with no tool parser returns hermes `<tool_call>` text: the env plays the calls,
    and their results come back as user turns, since a tool message answering no call is
    refused by OpenAI-compatible servers."""
    env = TraceMultiTurnEnv(ENVS[1], [], [3, 4])
    rows = env.get_eval_dataset()
    script = Script(ENVS[1], openings_of(rows["prompt"], [3, 4]), refuse=set(), as_text=True)
    with FakeServer(script) as server:
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.url, api_key="-"))
        results = env.evaluate_sync(client, "served", num_examples=2, rollouts_per_example=1)
    assert [out["reward"] for out in results["outputs"]] == [1.0, 1.0]
    assert script.unanswered == []
    later = [m for request in script.later for m in request]
    assert not any(m["role"] == "tool" for m in later)  # after the openings, the results are user turns
    assert any(m["role"] == "user" and m["content"].startswith("<tool_response>") for m in later)
    for out in results["outputs"]:
        assert out["reward"] == _replayed_reward(ENVS[1], out["info"]["seed"], out["completion"])


class _Counted(AsyncEnv):
    """An AsyncEnv that takes a while to make (a sandboxed env starting its worker) and counts
    the envs made and closed."""

    made: list[gym.Env] = []
    closed: list[gym.Env] = []

    def __init__(self, *args, **kwargs) -> None:
        time.sleep(0.3)
        super().__init__(*args, **kwargs)
        counted = self.env.close

        def close():
            _Counted.closed.append(self.env)
            counted()

        self.env.close = close
        _Counted.made.append(self.env)


def test_a_rollout_timed_out_while_its_env_is_made_still_closes_the_env(monkeypatch):
    monkeypatch.setattr(trace_verifiers, "AsyncEnv", _Counted)
    monkeypatch.setattr(_Counted, "made", [])
    monkeypatch.setattr(_Counted, "closed", [])
    env = TraceMultiTurnEnv(ENVS[1], [], [3, 4], timeout_seconds=0.05)
    with FakeServer(lambda body: ("ok", {"content": REFUSAL})) as server:
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.url, api_key="-"))
        results = env.evaluate_sync(client, "served", num_examples=2, rollouts_per_example=2)
    assert [out["stop_condition"] for out in results["outputs"]] == ["timeout_reached"] * 4
    assert [out["reward"] for out in results["outputs"]] == [0.0] * 4
    assert len(_Counted.made) == 4 and sorted(map(id, _Counted.closed)) == sorted(map(id, _Counted.made))


def test_an_env_that_fails_fails_its_rollout_only(monkeypatch):
    """A trace-gym error in a step (a sandboxed env's lost worker) is the rollout's error."""
    played = AsyncEnv.astep

    async def astep(self, action):
        if self.env.unwrapped.episode.seed == 4:
            raise TraceGymError("the worker of this env was lost")
        return await played(self, action)

    monkeypatch.setattr(AsyncEnv, "astep", astep)
    env = TraceMultiTurnEnv(ENVS[1], [], [3, 4])
    rows = env.get_eval_dataset()
    with FakeServer(Script(ENVS[1], openings_of(rows["prompt"], [3, 4]), refuse=set())) as server:
        client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=server.url, api_key="-"))
        results = env.evaluate_sync(client, "served", num_examples=2, rollouts_per_example=1)
    by_seed = {out["info"]["seed"]: out for out in results["outputs"]}
    assert by_seed[3]["reward"] == 1.0 and by_seed[3]["error"] is None
    assert by_seed[4]["reward"] == 0.0 and "the worker of this env was lost" in str(by_seed[4]["error"])
