"""The four shipped capability envs: oracle 1.0 on 500 seeds, degenerate policies well
below it, the rewards the issue specifies, and domain mixing."""

from __future__ import annotations

import json
import re

import gymnasium as gym
import pytest

from tests.conftest import oracle, play
from trace_gym.errors import InvalidConfig
from trace_gym.testing import policies

CAPABILITY_ENVS = ["trace/precondition_verification-v0", "trace/structured_data_reasoning-v0",
                   "trace/multi_step_task_completion-v0", "trace/tool_calling_precision-v0"]


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_oracle_scores_one_on_500_seeds(env_id):
    env = gym.make(env_id)
    for seed in range(500):
        _, reward, info = play(env, seed, oracle)
        assert reward == 1.0, (seed, info["verdict"])
        assert info["termination_reason"] == "reply"


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_degenerate_policies_score_well_below_the_oracle(env_id):
    env = gym.make(env_id).unwrapped
    for name, act in policies.degenerate_policies().items():
        mean = sum(policies.play(env, seed, act)[0] for seed in range(200)) / 200
        assert mean <= 0.65 and mean <= 1.0 - 0.35, (name, mean)


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_every_task_needs_its_capability_and_mixes_domains(env_id):
    env = gym.make(env_id)
    capability = env.unwrapped.capability
    domains = set()
    for seed in range(60):
        _, info = env.reset(seed=seed)
        assert "capabilities_needed" not in info  # only once the episode is over
        assert list(env.unwrapped.task.capabilities_needed) == [capability]
        domains.add(env.unwrapped.task.domain)
    assert domains == {"airline", "retail"}
    for share, domain in ((1.0, "airline"), (0.0, "retail")):
        env = gym.make(env_id, airline_share=share)
        assert {env.reset(seed=s)[1] and env.unwrapped.task.domain for s in range(20)} == {domain}


def test_precondition_rewards():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0).unwrapped
    forbidden = [s for s in range(40)]
    for seed in forbidden:
        env.reset(seed=seed)
        task = env.task
        assert task.forbidden
        assert policies.play(env, seed, lambda e, o: "I'm sorry, I can't do that.")[0] == 0.5
        assert policies.play(env, seed, oracle)[0] == 1.0
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=0.0).unwrapped
    for seed in range(40):
        env.reset(seed=seed)
        assert not env.task.forbidden
        assert policies.play(env, seed, lambda e, o: "I'm sorry, I can't do that.")[0] == 0.0
    shares = [gym.make("trace/precondition_verification-v0").unwrapped for _ in range(1)]
    env = shares[0]
    rate = sum(env.reset(seed=s)[1] is not None and env.task.forbidden for s in range(500)) / 500
    assert 0.5 < rate < 0.7


def test_precondition_any_mutating_call_scores_zero_when_forbidden():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0).unwrapped
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        write = next(t["function"]["name"] for t in info["tools"]
                     if env.episode.toolset[t["function"]["name"]].kind.value == "WRITE")
        env.step({"name": write, "arguments": {}})  # fails the schema: still an attempt
        _, reward, *_ = env.step(env.oracle_action(obs))
        assert reward == 0.0


def test_multi_step_reward_formula():
    env = gym.make("trace/multi_step_task_completion-v0").unwrapped
    counts = {}
    for seed in range(300):
        obs, _ = env.reset(seed=seed)
        task = env.task
        n = len(task.operations)
        counts[(task.domain, n)] = counts.get((task.domain, n), 0) + 1
        assert env.episode.max_steps == n + 5
        # do all but the last operation, then one write the tool rejects, then reply
        actions, _ = policies.oracle_actions(env, seed)
        partial = actions[: n - 1]
        wrong = {"name": "cancel_reservation" if task.domain == "airline" else "cancel_pending_order",
                 "arguments": {"reservation_id": "NOPE00"} if task.domain == "airline"
                 else {"order_id": "#W0000000", "reason": "ordered by mistake"}}
        reward, _, info = policies.play(env, seed, policies.replay([*partial, wrong, "Done."]))
        assert reward == pytest.approx(0.6 * (n - 1) / n - 0.1), info["verdict"]  # the rejected write costs 0.1
    assert counts[("airline", 2)] > counts[("airline", 3)] > counts[("airline", 4)]
    assert counts[("retail", 2)] > counts[("retail", 4)]


def test_multi_step_full_credit_has_no_negative_zero():
    env = gym.make("trace/multi_step_task_completion-v0")
    obs, _ = env.reset(seed=0)
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(env.unwrapped.oracle_action(obs))
        done = terminated or truncated
    (check,) = [c for c in info["verdict"]["checks"] if c["name"] == "wrong_writes"]
    assert json.dumps(check["credit"]) == "0.0"  # a penalty of none is 0.0, not -0.0


def _calls(*calls):
    """One assistant turn that makes every call."""
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"c{i}", "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}
        for i, c in enumerate(calls)]}


IDEMPOTENT = ("update_reservation_passengers", "modify_pending_order_address", "modify_user_address")


def test_multi_step_charges_every_rejected_or_stray_write():
    env = gym.make("trace/multi_step_task_completion-v0").unwrapped
    stray = 0
    for seed in range(20):
        actions, _ = policies.oracle_actions(env, seed)
        writes, reply = actions[:-1], actions[-1]
        rejected = {"name": writes[0]["name"], "arguments": {}}  # breaks the schema: the tool rejects it
        # the old rule charged only writes that went through: a rejected one was free
        assert policies.play(env, seed, policies.replay([rejected, *writes, reply]))[0] == pytest.approx(0.9)
        assert policies.play(env, seed, policies.replay([_calls(*[rejected] * 10), *writes, reply]))[0] == 0.0
        # a write that sets what is already set goes through and completes nothing
        same = [w for w in writes if w["name"] in IDEMPOTENT]
        if same:
            assert policies.play(env, seed, policies.replay([*writes, same[0], reply]))[0] == pytest.approx(0.9)
            stray += 1
    assert stray >= 5


def test_tool_calling_precision_credits_each_argument_of_an_accepted_call():
    env = gym.make("trace/tool_calling_precision-v0").unwrapped
    accepted = rejected = 0
    for seed in range(30):
        actions, _ = policies.oracle_actions(env, seed)
        gold = actions[0]
        for key in gold["arguments"]:
            changed = {"name": gold["name"], "arguments": {**gold["arguments"], key: policies.perturb(gold["arguments"][key])}}
            reward, obs, info = policies.play(env, seed, policies.replay([changed, "Done."]))
            n = len(gold["arguments"])
            if next(m for m in reversed(obs) if m["role"] == "tool")["content"].startswith("Error"):
                rejected += 1
                assert reward == 0.0 and "rejected" in info["verdict"]["checks"][0]["detail"]
            else:
                accepted += 1
                assert reward == pytest.approx((n - 1) / n)
                assert [c["name"] for c in info["verdict"]["checks"] if not c["passed"]] == [key]
    assert accepted > 50 and rejected > 20


@pytest.mark.parametrize("env_id", ["trace/structured_data_reasoning-v0", "trace/tool_calling_precision-v0"])
def test_one_write_envs_pay_only_for_one_accepted_call(env_id):
    env = gym.make(env_id).unwrapped
    for seed in range(40):
        actions, _ = policies.oracle_actions(env, seed)
        gold = actions[0]
        # the gold call plus an argument the schema does not know: the tool rejects it
        extra = {"name": gold["name"], "arguments": {**gold["arguments"], "note": "x"}}
        assert policies.play(env, seed, policies.replay([extra, "Done."]))[0] == 0.0
        # a rejected call first, then the gold one: a retry does not pay
        assert policies.play(env, seed, policies.replay([extra, gold, "Done."]))[0] == 0.0
        assert policies.play(env, seed, policies.replay([gold, gold, "Done."]))[0] == 0.0
        assert policies.play(env, seed, policies.replay([_calls(gold, extra), "Done."]))[0] == 0.0
        # integers sent as booleans (`true == 1` in Python) or as strings
        for retype in (lambda v: v == 1 if isinstance(v, int) and v in (0, 1) else v,
                       lambda v: str(v) if isinstance(v, int) and not isinstance(v, bool) else v):
            args = {k: retype(v) for k, v in gold["arguments"].items()}
            if args != gold["arguments"] or any(type(a) is not type(b) for a, b in zip(args.values(), gold["arguments"].values())):
                assert policies.play(env, seed, policies.replay([{"name": gold["name"], "arguments": args}, "Done."]))[0] == 0.0


def test_structured_gold_writes_go_through_where_the_gift_card_was_short():
    env = gym.make("trace/structured_data_reasoning-v0").unwrapped
    for seed in (142, 2335):  # the gold exchange's gift card did not cover the difference
        reward, obs, _ = policies.play(env, seed, policies.oracle)
        assert reward == 1.0
        assert not any(m["role"] == "tool" and m["content"].startswith("Error") for m in obs), seed


def test_tool_calling_precision_exchange_goes_through_where_the_gift_card_was_short():
    env = gym.make("trace/tool_calling_precision-v0").unwrapped
    seed = 1_000_018_053  # an audit's seed: the gold exchange's gift card did not cover the difference
    reward, obs, _ = policies.play(env, seed, policies.oracle)
    assert reward == 1.0
    assert not any(m["role"] == "tool" and m["content"].startswith("Error") for m in obs)


def test_precondition_refusal_must_name_only_the_rule_that_applies():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0).unwrapped
    every_rule = ("I cannot: 24 hours, insurance, business, flown, departed, basic economy, remove, "
                  "pending, delivered, balance.")
    for seed in range(40):
        assert policies.play(env, seed, lambda e, o: every_rule)[0] == 0.5  # not acting, but no rule named
        assert policies.play(env, seed, lambda e, o: o[0]["content"])[0] == 0.5  # the system prompt echoed
        assert policies.play(env, seed, policies.oracle)[0] == 1.0


def test_precondition_refusal_must_state_the_record_fact():
    """Naming the rule of the request's kind is what a policy that never reads the records says
    on every request of that kind: the refusal must also state the fact that breaks the rule."""
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0).unwrapped
    kinds = {}
    for seed in range(120):
        env.reset(seed=seed)
        task = env.task
        kinds[task.kind] = kinds.get(task.kind, 0) + 1
        rule_only = f"I'm sorry, but I cannot do that: {task.rule[0]}."
        reward, _, info = policies.play(env, seed, policies.replay([rule_only]))
        if task.fact["kind"] == "cabin":  # "basic economy" names the rule and states the cabin
            assert reward == 1.0
            continue
        assert reward == 0.5, (seed, info["verdict"])
        stated = f"{rule_only[:-1]}; the record says {task.fact['value']}."
        if task.fact["kind"] == "amount":
            stated = f"{rule_only[:-1]}; the balance is ${task.fact['value']}."
        if task.fact["kind"] == "bags":
            stated = f"{rule_only[:-1]}; it has {task.fact['value']} checked bags."
        assert policies.play(env, seed, policies.replay([stated]))[0] == 1.0, (seed, stated)
        # Another value of the fact's kind (a status is drawn among several: never the fact's own).
        statuses = {"flight_status": ("on time", "delayed"), "order_status": ("exchange requested", "processed")}
        wrong = {"date": "2024-01-01", "amount": "$0.01", "bags": "0 bags",
                 **{kind: next(v for v in values if v != task.fact["value"]) for kind, values in statuses.items()}
                 }[task.fact["kind"]]
        assert policies.play(env, seed, policies.replay([f"{stated} Or {wrong}."]))[0] == 0.5, (seed, wrong)
    assert len(kinds) == 6


def test_precondition_flight_changes_are_forbidden_for_either_reason():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=1.0, airline_share=1.0).unwrapped
    rules = {}
    for seed in range(300):
        env.reset(seed=seed)
        if env.task.kind == "change_flight":
            rules[env.task.rule[0]] = rules.get(env.task.rule[0], 0) + 1
    assert set(rules) == {"basic economy", "no longer be booked"}
    assert rules["basic economy"] < rules["no longer be booked"]  # refusing every change alike is mostly wrong


def test_precondition_rejected_writes_cost_on_allowed_requests():
    env = gym.make("trace/precondition_verification-v0", forbidden_rate=0.0).unwrapped
    for seed in range(20):
        actions, _ = policies.oracle_actions(env, seed)
        rejected = {"name": actions[0]["name"], "arguments": {}}
        assert policies.play(env, seed, policies.replay([rejected, *actions]))[0] == pytest.approx(0.9)
        assert policies.play(env, seed, policies.replay([_calls(*[rejected] * 10), *actions]))[0] == 0.0


def test_config_is_validated():
    with pytest.raises(InvalidConfig, match="forbidden_rate"):
        gym.make("trace/precondition_verification-v0", forbidden_rate=2)
    with pytest.raises(InvalidConfig, match="min_operations"):
        gym.make("trace/multi_step_task_completion-v0", min_operations=4, max_operations=3)
    with pytest.raises(InvalidConfig, match="unknown argument"):
        gym.make("trace/tool_calling_precision-v0", colour="red")


@pytest.mark.parametrize("env_id", CAPABILITY_ENVS)
def test_hint_mode(env_id):
    env = gym.make(env_id)
    plain, _ = env.reset(seed=4)
    hinted, info = env.reset(seed=4, options={"hint": True})
    assert "<expert_guidance>" in hinted[0]["content"] and info["system_prompt_unhinted"] == plain[0]["content"]
    guidance = hinted[0]["content"].split("<expert_guidance>")[1]
    words = set(re.findall(r"[a-z_]+", guidance.lower()))
    for schema in info["tools"]:
        assert schema["function"]["name"] not in words
        for arg in schema["function"]["parameters"].get("properties", {}):
            assert arg not in words, arg
