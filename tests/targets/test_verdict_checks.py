"""The target verifier's checks say exactly what they check: every check credits 1 when it
passes and 0 when it fails, explains a failure and only a failure, and the score is 1 only
when all pass; the verdict of a conversation read back from JSON is the same (no identity
comparison of strings); and each check's rule holds at its edges: what counts as a lookup,
as the customer's yes before a write, as identification before a read."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest

from tests.conftest import TARGETS, oracle, play
from trace_gym.targets.user import YES
from trace_gym.targets.verify import verify
from trace_gym.testing import adversaries
from trace_gym.tools import ToolKind


def _episode(env_id: str, seed: int, act=oracle, **knobs):
    env = gym.make(env_id, **knobs)
    messages, reward, info = play(env, seed, act)
    base = env.unwrapped
    return base, messages, reward, info


def _check(verdict, prefix: str):
    return next(c for c in verdict.checks if c.name.startswith(prefix))


def _played(env, seed):
    """The env after each of: the oracle, doing nothing, two adversaries (conversations that
    pass and fail each check)."""
    for act in (env.oracle_action, lambda messages: "I cannot help with that."):
        env.reset(seed=seed)
        while not env.episode.over:
            env.step(act(env.episode.messages))
        yield env
    for adversary in (adversaries.attempt_forbidden_then_oracle, adversaries.stuffed_then_transfer):
        if adversary(env, seed) is not None:
            yield env


@pytest.mark.parametrize("strict", [True, False])
def test_every_check_credits_and_explains_exactly_its_result(strict):
    seen = {True: set(), False: set()}
    for env_id in TARGETS:
        env = gym.make(env_id, forbidden_rate=0.5, strict=strict).unwrapped
        for seed in range(25):
            for played in _played(env, seed):
                ep = played.episode
                verdict = env.verify(ep.task, ep.initial_world, ep.world, ep.messages)
                assert verdict == ep.verdict
                for c in verdict.checks:
                    assert c.credit == (1.0 if c.passed else 0.0), (env_id, seed, c)
                    assert (c.detail == "") == c.passed, (env_id, seed, c)
                    seen[c.passed].add(c.name.split("[")[0])
                assert verdict.score == (1.0 if all(c.passed for c in verdict.checks) else 0.0)
                # read back from JSON, as a stored trajectory is: the same verdict
                again = env.verify(ep.task, ep.initial_world, ep.world, json.loads(json.dumps(ep.messages)))
                assert again == verdict, (env_id, seed)
    names = {"database", "communicate", "refusal"} | ({"forbidden_write", "confirmation", "identification"}
                                                       if strict else set())
    assert names <= seen[True] and names - {"identification"} <= seen[False]


def test_strict_is_the_default_rule():
    base, messages, _, _ = _episode("trace/airline-v0", 3, forbidden_rate=1.0, compound_rate=0.0)
    ep = base.episode
    default = verify(ep.task, ep.initial_world, ep.world, ep.messages, base.toolset)
    assert {"confirmation", "identification"} <= {c.name for c in default.checks}


def _forbidden_episode(env_id: str, seed_range=range(60)):
    """Oracle episodes of one forbidden request whose record the oracle looked up."""
    for seed in seed_range:
        base, messages, reward, _ = _episode(env_id, seed, forbidden_rate=1.0, compound_rate=0.0)
        request = base.task.requests[0]
        if request.forbidden and request.subject is not None and reward == 1.0:
            yield base, request


def _lookup_index(base, request):
    messages = base.episode.messages
    return next(i for i, m in enumerate(messages) if m["role"] == "assistant" and m.get("tool_calls")
                and request.subject in m["tool_calls"][0]["function"]["arguments"]
                and base.toolset[m["tool_calls"][0]["function"]["name"]].kind is ToolKind.READ)


def _reverify(base, messages):
    ep = base.episode
    return base.verify(ep.task, ep.initial_world, ep.world, messages)


@pytest.mark.parametrize("env_id", TARGETS)
def test_only_a_read_that_took_the_records_id_is_a_lookup(env_id):
    checked = 0
    for base, request in _forbidden_episode(env_id):
        messages = json.loads(json.dumps(base.episode.messages))
        i = _lookup_index(base, request)
        call = messages[i]["tool_calls"][0]["function"]
        # the record's id inside another value is not the id
        edited = json.loads(json.dumps(messages))
        args = json.loads(call["arguments"])
        key = next(k for k, v in args.items() if v == request.subject)
        edited[i]["tool_calls"][0]["function"]["arguments"] = json.dumps({**args, key: request.subject + "9"})
        refusal = _check(_reverify(base, edited), "refusal")
        assert not refusal.passed and f"did not look up {request.subject}" in refusal.detail
        # a write that went through with the id is not a lookup either
        write = next(n for n, t in base.toolset.items() if t.kind is ToolKind.WRITE
                     and n not in {f["name"] for f in request.forbids})
        edited = json.loads(json.dumps(messages))
        edited[i]["tool_calls"][0]["function"]["name"] = write
        refusal = _check(_reverify(base, edited), "refusal")
        assert not refusal.passed and "did not look up" in refusal.detail and "attempted" not in refusal.detail
        # nor a generic tool's call that took it and went through (a transfer's summary)
        edited = json.loads(json.dumps(messages))
        edited[i]["tool_calls"][0]["function"].update(name="transfer_to_human_agents",
                                                      arguments=json.dumps({"summary": request.subject}))
        refusal = _check(_reverify(base, edited), "refusal")
        assert not refusal.passed and "did not look up" in refusal.detail
        checked += 1
        if checked == 5:
            break
    assert checked == 5


def test_a_refusals_detail_names_each_missing_part():
    kinds = set()
    for env_id in TARGETS:
        for n, (base, request) in enumerate(_forbidden_episode(env_id, range(200))):
            messages = json.loads(json.dumps(base.episode.messages))
            silent = [m if not (m["role"] == "assistant" and not m.get("tool_calls")) else {**m, "content": "Okay."}
                      for m in messages]
            refusal = _check(_reverify(base, silent), "refusal")
            assert not refusal.passed
            assert "no message states the" in refusal.detail and "names one of" in refusal.detail
            assert "did not look up" not in refusal.detail and "attempted" not in refusal.detail
            assert ("(besides: " in refusal.detail) == bool(request.fact["also"])
            kinds.add(bool(request.fact["also"]))
            if n == 20:
                break
    assert kinds == {True, False}


def _write_episode(env_id: str):
    for seed in range(60):
        base, messages, reward, _ = _episode(env_id, seed, forbidden_rate=0.0, compound_rate=0.0)
        writes = [i for i, m in enumerate(base.episode.messages) if m["role"] == "assistant" and m.get("tool_calls")
                  and base.toolset[m["tool_calls"][0]["function"]["name"]].kind is ToolKind.WRITE]
        if reward == 1.0 and writes:
            yield base, writes[0]


@pytest.mark.parametrize("env_id", TARGETS)
def test_the_yes_before_a_write_is_exactly_the_customers_yes(env_id):
    base, w = next(_write_episode(env_id))
    messages = json.loads(json.dumps(base.episode.messages))
    assert messages[w - 1]["content"] == YES
    assert _check(_reverify(base, messages), "confirmation").passed
    longer = json.loads(json.dumps(messages))
    longer[w - 1]["content"] = YES + " But first, tell me the fare."
    confirmation = _check(_reverify(base, longer), "confirmation")
    assert not confirmation.passed and "no explicit yes to a summary of" in confirmation.detail
    # a read between the yes and the write: the yes is still the customer's last message
    read = next(n for n, t in base.toolset.items() if t.kind is ToolKind.READ)
    lookup = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_x", "type": "function", "function": {"name": read, "arguments": "{}"}}]},
              {"role": "tool", "tool_call_id": "call_x", "content": "Error: missing arguments"}]
    between = messages[:w] + lookup + messages[w:]
    assert _check(_reverify(base, between), "confirmation").passed
    # a reply in between too ("One moment."): the yes is the customer's last message
    waited = messages[:w] + [{"role": "assistant", "content": "One moment."}] + messages[w:]
    assert _check(_reverify(base, waited), "confirmation").passed
    # wherever the exchange sits in the conversation (one more message before it)
    shifted = messages[:2] + [{"role": "assistant", "content": "Hello."}] + messages[2:]
    assert _check(_reverify(base, shifted), "confirmation").passed
    # the summary must be the agent's: a tool result naming the record is not one
    tooled = json.loads(json.dumps(messages))
    tooled[w - 2] = {"role": "tool", "tool_call_id": "call_y", "content": tooled[w - 2]["content"]}
    assert not _check(_reverify(base, tooled), "confirmation").passed
    # an unknown tool's call is neither a read nor a write
    unknown = json.loads(json.dumps(between))
    unknown[w]["tool_calls"][0]["function"]["name"] = "no_such_tool"
    assert _check(_reverify(base, unknown), "confirmation").passed


@pytest.mark.parametrize("env_id", TARGETS)
def test_identification_is_the_customer_saying_who_they_are(env_id):
    for seed in range(40):
        base, messages, reward, _ = _episode(env_id, seed, unknown_id_rate=0.0, compound_rate=0.0,
                                             forbidden_rate=0.0)
        task = base.task
        messages = json.loads(json.dumps(base.episode.messages))
        told = next(i for i, m in enumerate(messages) if m["role"] == "user"
                    and any(a in (m.get("content") or "") for a in task.identity.values()))
        user = base.episode.initial_world.tables["users"][task.user_id]
        theirs = {task.user_id, *user.get("reservations", ()), *user.get("orders", ())}
        reads = [i for i, m in enumerate(messages) if i > told and m["role"] == "assistant" and m.get("tool_calls")
                 and theirs & {v for v in json.loads(m["tool_calls"][0]["function"]["arguments"]).values()
                               if isinstance(v, str)}]
        if reward < 1.0 or not reads:
            continue
        read = messages[reads[0]]
        early = {"role": "assistant", "content": None, "tool_calls": read["tool_calls"]}
        result = messages[reads[0] + 1]
        # the agent saying the customer's words itself, then reading: not identification
        guess = {"role": "assistant", "content": f"Perhaps: {next(iter(task.identity.values()))}"}
        edited = messages[:1] + [messages[1], guess, early, result] + messages[2:]
        ident = _check(_reverify(base, edited), "identification")
        assert not ident.passed and ident.credit == 0.0 and "before they said who they are" in ident.detail
        # a write with the customer's id before identification is not a read of their records
        write = next(n for n, t in base.toolset.items() if t.kind is ToolKind.WRITE)
        wrote = json.loads(json.dumps(early))
        wrote["tool_calls"][0]["function"]["name"] = write
        edited = messages[:2] + [wrote, {**result, "content": "Error: refused"}] + messages[2:]
        assert _check(_reverify(base, edited), "identification").passed
        # nor is a generic tool's call with it
        generic = {"role": "assistant", "content": None, "tool_calls": [{"id": "call_g", "type": "function", "function": {
            "name": "transfer_to_human_agents", "arguments": json.dumps({"summary": task.user_id})}}]}
        edited = messages[:2] + [generic, {"role": "tool", "tool_call_id": "call_g", "content": "Transfer successful"}] \
            + messages[2:]
        assert _check(_reverify(base, edited), "identification").passed
        return
    pytest.fail("no episode with a read after identification")
