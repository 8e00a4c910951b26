"""The target envs pay for the behaviour, not for what imitates it: each family of holes
the adversaries found scores 0, under the strict protocol and, where it is about what was
said, under tau2-bench's rule too."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.conftest import TARGETS, oracle, play
from trace_gym.seeding import SPLITS
from trace_gym.testing import adversaries
from trace_gym.testing.wording import MAX_GAIN, wording_leak
from trace_gym.targets.user import YES

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
