"""The target envs pay for the behaviour, not for what imitates it: each family of holes
the adversaries found scores 0, under the strict protocol and, where it is about what was
said, under tau2-bench's rule too."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.conftest import TARGETS, oracle, play
from trace_gym.seeding import SPLITS
from trace_gym.targets.user import YES
from trace_gym.testing import adversaries
from trace_gym.testing.wording import MAX_GAIN, wording_leak


def _with_kinds(env_id, kinds, **knobs):
    return gym.make(env_id, kinds=kinds, compound_rate=0.0, **knobs)


@pytest.mark.parametrize("strict", [True, False])
def test_echoing_the_policy_or_listing_values_tells_nothing(strict):
    """Flight statuses, free bags and amounts: a reply that states every value states none."""
    cases = [("trace/airline-v0", ["flight_status", "bag_allowance", "change_cabin", "baggage"]),
             ("trace/retail-v0", ["order_info", "return_items"])]
    for env_id, kinds in cases:
        env = _with_kinds(env_id, kinds, forbidden_rate=0.0, strict=strict)
        for name in ("stuffed_prompt", "stuffed_numbers", "lookup_then_stuffed"):
            for seed in range(40):
                assert adversaries.ADVERSARIES[name](env.unwrapped, seed) == 0.0, (env_id, name, seed)


def test_counting_every_number_of_free_bags_is_not_stating_one():
    env = _with_kinds("trace/airline-v0", ["bag_allowance"])
    ladder = "You get " + ", ".join(f"{k} free" for k in range(16)) + " checked bags."
    for seed in range(30):
        def act(e, obs):
            return ladder if sum(m["role"] == "assistant" for m in obs) > 3 else e.unwrapped.oracle_action(obs)
        assert play(env, seed, act)[1] == 0.0


@pytest.mark.parametrize("strict", [True, False])
def test_a_transfer_is_not_a_lookup(strict):
    """The record's id as a transfer summary, after a question stuffed with rule words."""
    for env_id in TARGETS:
        env = gym.make(env_id, forbidden_rate=1.0, compound_rate=0.0, strict=strict).unwrapped
        for seed in range(40):
            assert adversaries.stuffed_then_transfer(env, seed) == 0.0, (env_id, seed)


@pytest.mark.parametrize("strict", [True, False])
def test_a_refusal_must_state_what_only_the_record_shows(strict):
    """Looking every record up and refusing each request with the rule its kind most often
    breaks: the refusal names the rule but not the record's fact (save basic economy, whose
    name is the cabin)."""
    for env_id in TARGETS:
        env = gym.make(env_id, forbidden_rate=1.0, compound_rate=0.0, strict=strict).unwrapped
        played = 0
        for seed in range(40):
            env.reset(seed=seed)
            request = env.task.requests[0]
            reward = adversaries.refuse_by_kind(env, seed)
            if reward is None:
                continue
            played += 1
            if request.fact.get("kind") != "cabin":
                assert reward == 0.0, (env_id, seed, request.kind)
        assert played > 20


@pytest.mark.parametrize("strict", [True, False])
def test_an_attempted_forbidden_write_voids_the_refusal(strict):
    tried = rejected = 0
    for env_id in TARGETS:
        env = gym.make(env_id, forbidden_rate=1.0, compound_rate=0.0, strict=strict).unwrapped
        for seed in range(60):
            reward = adversaries.attempt_forbidden_then_oracle(env, seed)
            if reward is None:
                continue
            tried += 1
            assert reward == 0.0, (env_id, seed)
            checks = env.episode.verdict.to_json()["checks"]
            refusal = next(c for c in checks if c["name"].startswith("refusal"))
            assert "attempted the forbidden" in refusal["detail"]
            rejected += any(m["role"] == "tool" and m["content"].startswith("Error") for m in env.episode.messages)
    assert tried > 60 and rejected > 20  # many of them the tool itself refused


def _scripted(steps):
    """A policy that plays plan steps ({'say'} or {'call'}) in order, one per turn."""
    def act(env, obs):
        step = steps[min(sum(m["role"] == "assistant" for m in obs), len(steps) - 1)]
        return step["say"] if "say" in step else step["call"]
    return act


def test_strict_protocol_needs_a_yes_before_each_write():
    """The oracle without its summaries (so no yes from the customer): tau2-bench's rule
    passes it, the strict one does not."""
    for env_id in TARGETS:
        for strict, expected in ((True, 0.0), (False, 1.0)):
            env = gym.make(env_id, forbidden_rate=0.0, compound_rate=0.0, strict=strict)
            checked = 0
            for seed in range(40):
                env.reset(seed=seed)
                plan = env.unwrapped.task.plan
                tools = env.unwrapped.toolset
                summaries = {i - 1 for i, s in enumerate(plan) if "call" in s and tools[s["call"]["name"]].kind.value == "WRITE"}
                if not summaries:
                    continue
                _, reward, info = play(env, seed, _scripted([s for i, s in enumerate(plan) if i not in summaries]))
                checked += 1
                assert reward == expected, (env_id, seed, strict, info["verdict"])
                if strict:
                    assert not next(c for c in info["verdict"]["checks"] if c["name"] == "confirmation")["passed"]
            assert checked > 20


def test_strict_protocol_needs_identification_before_reading_the_customers_records():
    for env_id in TARGETS:
        env = gym.make(env_id, unknown_id_rate=0.0, compound_rate=0.0, forbidden_rate=0.0)
        base = env.unwrapped
        checked = 0
        for seed in range(40):
            env.reset(seed=seed)
            plan = base.task.plan
            request = base.task.requests[0]
            if request.subject is None:
                continue
            table = "reservation" if env_id.startswith("trace/airline") else "order"
            # ask for the record first, read it, then follow the oracle's plan
            early = [{"say": f"Which {table} is it? Please give me the {table} id."},
                     {"call": {"name": f"get_{table}_details", "arguments": {f"{table}_id": request.subject}}}]
            _, reward, info = play(env, seed, _scripted(early + plan))
            checked += 1
            ident = next(c for c in info["verdict"]["checks"] if c["name"] == "identification")
            assert not ident["passed"] and reward == 0.0, (env_id, seed, info["verdict"])
        assert checked > 20


@pytest.mark.parametrize("env_id", TARGETS)
def test_the_oracle_passes_both_rules(env_id):
    for strict in (True, False):
        env = gym.make(env_id, strict=strict)
        for seed in range(100):
            assert play(env, seed, oracle)[1] == 1.0, (seed, strict)


def test_strict_is_validated():
    from trace_gym.errors import InvalidConfig
    with pytest.raises(InvalidConfig, match="strict"):
        gym.make("trace/airline-v0", strict="yes")


@pytest.mark.parametrize("env_id", TARGETS)
def test_what_the_customer_can_say_does_not_give_the_decision_away(env_id):
    """Every fact the customer answers with, and the request's opening, are drawn the same
    way whatever the records decide: the same topics, and words a classifier cannot use."""
    env = gym.make(env_id).unwrapped
    topics: dict[tuple[str, str], set] = {}

    def collect(seeds):
        out = []
        for seed in seeds:
            env.reset(seed=seed)
            for r in env.task.to_json()["requests"]:
                if r["decision"] is None:
                    continue
                topics.setdefault((r["kind"], r["decision"]), set()).add(frozenset(r["facts"]))
                out.append((" ".join([r["opening"], *r["facts"].values()]), r["decision"]))
        return out

    train = collect(SPLITS["train"][i * 7919 % len(SPLITS["train"])] for i in range(800))
    test = collect(SPLITS["test"][:800])
    for (kind, decision), keys in topics.items():
        other = topics.get((kind, "allowed" if decision == "forbidden" else "forbidden"))
        assert other is None or keys == other, (kind, keys, other)
    result = wording_leak(train, test)
    assert result.gain <= MAX_GAIN, result.describe()


def test_yes_is_what_the_customer_says():
    # the strict confirmation check reads the customer's own yes
    env = gym.make("trace/airline-v0", kinds=["cancel_reservation"], forbidden_rate=0.0, compound_rate=0.0)
    obs, _, _ = play(env, 0, oracle)
    assert any(m["role"] == "user" and m["content"] == YES for m in obs)


def _play_with_extra(env, seed, extra, before_reply):
    """The oracle, with `extra` (a reply) sent right before its `before_reply`-th reply to
    the customer; the oracle does not see the extra turn or the customer's answer to it."""
    obs, _ = env.reset(seed=seed)
    hidden, replies, done, info, reward = [], 0, False, {}, 0.0
    while not done:
        view = [m for i, m in enumerate(obs) if i not in hidden]
        action = env.unwrapped.oracle_action(view)
        if isinstance(action, str):
            replies += 1
            if replies == before_reply:
                start = len(obs)
                obs, reward, terminated, truncated, info = env.step(extra)
                hidden += range(start, len(obs))
                if terminated or truncated:
                    break
        obs, reward, terminated, truncated, info = env.step(action)
        done = terminated or truncated
    return reward, info


@pytest.mark.parametrize("strict", [True, False])
def test_a_wrong_value_stated_once_cannot_be_taken_back(strict):
    """The amount, status or count a request needs, stated wrong in a message of its own
    before the oracle states the right one: the request's check fails (one candidate per
    message is not telling)."""
    cases = [("trace/airline-v0", ["flight_status", "bag_allowance", "change_cabin"]),
             ("trace/retail-v0", ["order_info", "return_items"])]
    failed = 0
    for env_id, kinds in cases:
        env = gym.make(env_id, kinds=kinds, compound_rate=0.0, forbidden_rate=0.0, strict=strict)
        for seed in range(30):
            env.reset(seed=seed)
            info_needed = env.unwrapped.task.requests[0].communicate[0]
            wrong = {"amount": "$1.23", "flight_status": "landed" if info_needed["value"] != "landed" else "delayed",
                     "free_bags": "17 free", "token": "0" * len(info_needed["value"])}[info_needed["kind"]]
            reward, info = _play_with_extra(env, seed, f"It is {wrong}. Could you tell me your user id?", 2)
            assert reward == 0.0, (env_id, seed, info["verdict"])
            check = next(c for c in info["verdict"]["checks"] if c["name"].startswith("communicate"))
            assert not check["passed"] and "a message states the" in check["detail"]
            failed += 1
    assert failed == 60


def test_a_refusal_with_its_parts_in_two_messages_fails():
    from trace_gym.targets.verify import verify

    for env_id in TARGETS:
        env = gym.make(env_id, forbidden_rate=1.0, compound_rate=0.0).unwrapped
        checked = 0
        for seed in range(60):
            obs, _, _ = play(env, seed, oracle)
            request = env.task.requests[0]
            if not request.forbidden or not request.fact or request.fact["kind"] == "cabin":
                continue  # basic economy's fact is its rule's name
            refusal = request.plan[-1]["say"]
            index = next(i for i, m in enumerate(obs) if m["role"] == "assistant" and m.get("content") == refusal)
            rule_only = f"I'm sorry, but I cannot do that: {request.rule[0]}."
            fact_only = {"date": f"The date is {request.fact['value']}.", "bags": f"It has {request.fact['value']} bags.",
                         "passengers": f"It has {request.fact['value']} passengers.",
                         "membership": f"You are {request.fact['value']}.",
                         "order_status": f"The order is {request.fact['value']}.",
                         "amount": f"It is ${request.fact['value']}."}[request.fact["kind"]]
            split = [*obs[:index], {**obs[index], "content": rule_only}, {"role": "user", "content": "Why?"},
                     {**obs[index], "content": fact_only}, *obs[index + 1:]]
            base = env.episode
            whole = verify(env.task, base.initial_world, base.world, obs, env.toolset)
            parts = verify(env.task, base.initial_world, base.world, split, env.toolset)
            assert whole.score == 1.0
            refusal_check = next(c for c in parts.checks if c.name.startswith("refusal"))
            assert parts.score == 0.0 and not refusal_check.passed, (env_id, seed, parts)
            checked += 1
        assert checked > 15, env_id


def test_a_declined_summary_fails_strict_scoring_and_two_end_the_call():
    """A summary of another of the customer's records is declined, restating the request:
    under strict scoring the episode fails at once; under lenient scoring the customer
    hangs up at the second."""
    from trace_gym.targets.user import DECLINE

    for env_id in TARGETS:
        table = "reservations" if env_id.startswith("trace/airline") else "orders"
        for strict in (True, False):
            env = gym.make(env_id, forbidden_rate=0.0, compound_rate=0.0, unknown_id_rate=0.0, strict=strict)
            checked = 0
            for seed in range(40):
                env.reset(seed=seed)
                task = env.unwrapped.task
                request = task.requests[0]
                records = env.unwrapped.episode.initial_world.tables["users"][task.user_id][table]
                others = [r for r in records if r != request.subject]
                summary = next((i for i, s in enumerate(request.plan) if "say" in s and "(yes/no)" in s["say"]), None)
                if request.subject is None or not others or summary is None:
                    continue
                text = request.plan[summary]["say"].replace(request.subject, others[0])
                once, info = _play_with_extra(env, seed, text, 1 + sum("say" in s for s in [*task.intro, *request.plan[:summary]]))
                declines = [m for m in env.unwrapped.episode.messages if m["role"] == "user" and m["content"].startswith(DECLINE)]
                assert len(declines) == 1, (env_id, seed)
                summaries = next((c for c in info["verdict"]["checks"] if c["name"] == "summaries"), None)
                if strict:
                    assert once == 0.0 and not summaries["passed"], (env_id, seed, info["verdict"])
                else:
                    assert once == 1.0 and summaries is None, (env_id, seed, info["verdict"])
                env.reset(seed=seed)
                for _ in range(2):
                    _, reward, terminated, _, info = env.step(text)
                assert terminated and info["termination_reason"] == "user_stop" and reward == 0.0
                checked += 1
            assert checked > 10, (env_id, strict)
