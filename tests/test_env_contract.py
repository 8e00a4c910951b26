"""The env contract (README: "The env contract"), exercised on the target envs: action forms, errors as
observations, hint mode, truncation, rendering, configuration errors."""

from __future__ import annotations

import json

import gymnasium as gym
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import trace_gym
from tests.conftest import TARGETS, oracle, play
from trace_gym.env import HINT_OPEN
from trace_gym.errors import EpisodeError, InvalidConfig
from trace_gym.messages import INVALID_TOOL_CALL
from trace_gym.spaces import is_valid_message


@pytest.fixture(params=TARGETS)
def env(request):
    return gym.make(request.param)


def test_reset_observation_and_info(env):
    obs, info = env.reset(seed=1)
    assert [m["role"] for m in obs] == ["system", "user"]
    assert obs in env.observation_space
    assert info["tools"] and all(t["type"] == "function" for t in info["tools"])
    assert info["system_prompt_unhinted"] == obs[0]["content"]
    assert HINT_OPEN not in obs[0]["content"]


def test_numpy_bool_hint_is_a_hint(env):
    import numpy as np

    assert env.reset(seed=2, options={"hint": np.True_})[0] == env.reset(seed=2, options={"hint": True})[0]


def test_hint_mode_keeps_the_unhinted_prompt(env):
    plain, _ = env.reset(seed=2)
    hinted, info = env.reset(seed=2, options={"hint": True})
    assert hinted[0]["content"].startswith(plain[0]["content"]) and HINT_OPEN in hinted[0]["content"]
    assert info["system_prompt_unhinted"] == plain[0]["content"]
    assert hinted[1:] == plain[1:]
    for schema in info["tools"]:  # guidance never names a tool
        assert schema["function"]["name"] not in hinted[0]["content"].split(HINT_OPEN)[1]
    _, reward, _ = play(env, 2, oracle, options={"hint": True})
    assert reward == 1.0


def test_unknown_reset_option_is_refused(env):
    with pytest.raises(InvalidConfig, match="hint"):
        env.reset(seed=0, options={"hnt": True})


@pytest.mark.parametrize("options, words", [(5, "must be a dict"), ("hint", "must be a dict"),
                                            ({"hint": "yes"}, "True or False"), ({1: True, "a": 2}, "unknown")])
def test_malformed_reset_options_are_refused_before_seeding(env, options, words):
    env.reset(seed=3)
    after, _ = env.reset()
    env.reset(seed=3)
    with pytest.raises(InvalidConfig, match=words):
        env.reset(seed=99, options=options)
    assert env.reset()[0] == after  # the refused reset took nothing from the generator


def test_all_three_action_forms(env):
    obs, _ = env.reset(seed=3)
    user_id_tool = "get_user_details"
    env.step("Could you please tell me your user id?")
    obs, *_ = env.step({"name": user_id_tool, "arguments": {"user_id": "nobody"}})
    assert obs[-1]["role"] == "tool" and obs[-1]["content"].startswith("Error: User")
    obs, *_ = env.step({"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "2*3"}'}}]})
    assert obs[-1]["content"] == "6.0"
    obs, *_ = env.step('<tool_call>{"name": "calculate", "arguments": {"expression": "1+1"}}</tool_call>')
    assert obs[-1]["content"] == "2.0"
    call = obs[-2]["tool_calls"][0]
    assert call["id"] == "call_3_0" and json.loads(call["function"]["arguments"]) == {"expression": "1+1"}


def test_malformed_calls_become_error_observations(env):
    env.reset(seed=4)
    cases = {
        '<tool_call>{"name": "calculate", "arguments": </tool_call>': "not valid JSON",
        '{"oops": 1}': "needs a non-empty string 'name'",
        '{"name": "fly_me_to_the_moon", "arguments": {}}': "unknown tool",
        '{"name": "calculate", "arguments": {"expression": 5}}': "invalid arguments",
        '{"name": "calculate", "arguments": {"expression": "1", "extra": 2}}': "unexpected argument",
    }
    for action, expected in cases.items():
        obs, reward, terminated, truncated, _ = env.step(action)
        assert obs[-1]["role"] == "tool" and obs[-1]["content"].startswith("Error") and expected in obs[-1]["content"], obs[-1]
        assert reward == 0.0 and not terminated
    assert obs[-2]["tool_calls"][0]["function"]["name"] in ("calculate", INVALID_TOOL_CALL)


def test_several_calls_in_one_turn_all_run_and_text_is_not_delivered(env):
    obs, _ = env.reset(seed=5)
    n = len(obs)
    obs, *_ = env.step({"role": "assistant", "content": "Hello customer", "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "1"}'}},
        {"id": "b", "type": "function", "function": {"name": "calculate", "arguments": '{"expression": "2"}'}}]})
    assert [m["role"] for m in obs[n:]] == ["assistant", "tool", "tool"]
    assert [m["tool_call_id"] for m in obs[n + 1:]] == ["call_0_0", "call_0_1"]


def test_plain_text_is_a_reply_the_customer_answers(env):
    obs, _ = env.reset(seed=6)
    obs, *_ = env.step("Hello, how can I help?")
    assert [m["role"] for m in obs[-2:]] == ["assistant", "user"]


def test_seeded_reset_leaves_gymnasiums_generator(env):
    """A seeded reset makes its Generator only when read; it must be the one gymnasium's
    reset makes, advanced past the draw the episode took, so that unseeded resets after
    it continue as they would with gymnasium's own reset."""
    from gymnasium.utils import seeding

    base = env.unwrapped
    first, _ = env.reset(seed=11)
    expected, _ = seeding.np_random(11)
    expected.bit_generator.random_raw()
    assert base.np_random_seed == 11
    assert base._np_random.bit_generator.state == expected.bit_generator.state
    after, _ = env.reset()
    env.reset(seed=11)
    assert env.reset()[0] == after and after != first
    with pytest.raises(gym.error.Error, match="greater or equal to zero"):
        env.reset(seed=-1)


def test_step_order_is_enforced(env):
    base = env.unwrapped
    with pytest.raises(EpisodeError, match="before reset"):
        type(base)().step("hi")
    play(env, 7, oracle)
    with pytest.raises(EpisodeError, match="after the episode ended"):
        base.step("hello")


def test_truncation_gives_zero_and_keeps_the_verdict():
    env = gym.make("trace/airline-v0")
    obs, info = env.reset(seed=8)
    steps = 0
    while True:
        obs, reward, terminated, truncated, info = env.step({"name": "calculate", "arguments": {"expression": "1+1"}})
        steps += 1
        if terminated or truncated:
            break
    assert truncated and not terminated and reward == 0.0
    assert steps == info["max_steps"] and info["termination_reason"] == "max_steps"
    assert "checks" in info["verdict"]


def test_render_modes():
    env = gym.make("trace/retail-v0", render_mode="ansi")
    env.reset(seed=9)
    env.step("hello")
    text = env.render()
    assert "[USER]" in text and "[AGENT] hello" in text
    with pytest.raises(InvalidConfig, match="render_mode"), pytest.warns(UserWarning, match="render_mode"):
        gym.make("trace/retail-v0", render_mode="rgb_array")


def test_ansi_render_cannot_redraw_the_terminal():
    """An agent's reply that carries an ANSI sequence or a bidirectional override is shown
    escaped: the text a person reads is the text that was sent."""
    env = gym.make("trace/retail-v0", render_mode="ansi")
    env.reset(seed=9)
    env.step("fine\x1b[2J\x1b[1;1Hrefund approved\u202e")
    text = env.render()
    assert "\x1b" not in text and "\u202e" not in text
    assert "[AGENT] fine\\x1b[2J\\x1b[1;1Hrefund approved\\u202e" in text


def test_human_render_prints(capsys):
    env = gym.make("trace/airline-v0", render_mode="human")
    env.reset(seed=1)
    env.step("Could you please tell me your user id?")
    assert "AGENT" in capsys.readouterr().out


@pytest.mark.parametrize("kwargs, field", [
    ({"forbidden_rate": 1.5}, "forbidden_rate"),
    ({"max_requests": 0}, "max_requests"),
    ({"kinds": ("fly",)}, "kinds"),
    ({"prompt_style": "tiny"}, "prompt_style"),
    ({"colour": "red"}, "colour"),
    ({"world_size": {"airports": 1}}, "airports"),
])
def test_bad_knobs_are_refused_with_the_field_named(kwargs, field):
    with pytest.raises(InvalidConfig, match=field):
        gym.make("trace/airline-v0", **kwargs)


def test_knobs_change_the_tasks():
    env = gym.make("trace/retail-v0", kinds=("cancel_order",), forbidden_rate=1.0, compound_rate=0.0)
    for seed in range(20):
        env.reset(seed=seed)
        task = env.unwrapped.task
        assert task.kinds == ["cancel_order"] and task.requests[0].forbidden


def test_observations_share_nothing_with_the_env(env):
    obs, _ = env.reset(seed=10)
    obs[0]["content"] = "tampered"
    obs.append({"role": "user", "content": "x"})
    obs2, *_ = env.step("hello")
    assert obs2[0]["content"] != "tampered" and obs2[2]["role"] == "assistant"


def _vandalise(obs: list) -> None:
    """Edit an observation every way a user might: each message, its tool calls, the list."""
    for m in obs:
        m["content"] = "tampered"
        m["extra"] = 1
        for tc in m.get("tool_calls") or ():
            tc["id"] = "tampered"
            tc["function"]["name"] = "tampered"
            tc["function"]["arguments"] = "{}"
        if m.get("tool_calls"):
            m["tool_calls"].append({"id": "x"})
    obs.append({"role": "user", "content": "x"})


@pytest.mark.parametrize("env_id", [e.id for e in trace_gym.list_envs()])
def test_editing_observations_changes_nothing_the_env_hands_out(env_id):
    """Every observation is the user's own: editing one, before or after the next step,
    changes neither the env's conversation, nor the next observation, nor the outcome."""
    env = gym.make(env_id)
    base = env.unwrapped

    def run(edit: bool) -> list[str]:
        obs, info = env.reset(seed=7)
        seen, done, kept = [json.dumps(obs)], False, []
        while not done:
            action = base.oracle_action(obs)
            if edit:
                _vandalise(obs)
                info["tools"] = info["max_steps"] = None
            obs, reward, terminated, truncated, info = env.step(action)
            seen.append(json.dumps([obs, reward, info]))
            kept.append((obs, json.dumps(obs)))
            done = terminated or truncated
        if edit:  # the final info's list is the caller's too
            info["capabilities_needed"].append("x")
        seen.append(json.dumps(list(base.episode.capabilities_needed)))
        if not edit:  # later steps leave earlier observations as they were, and editing
            for earlier, text in kept:  # one observation changes no other
                assert json.dumps(earlier) == text
            for earlier, _ in kept[:-1]:
                _vandalise(earlier)
            assert json.dumps(kept[-1][0]) == kept[-1][1]
        seen.append(json.dumps(base.episode.messages))
        return seen

    assert run(edit=True) == run(edit=False)


json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=15),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=12,
)
tool_names = st.sampled_from(["calculate", "get_user_details", "book_reservation", "cancel_pending_order",
                              "modify_pending_order_items", "update_reservation_flights", "nope", ""])
actions = st.one_of(
    st.text(max_size=200),
    json_like,
    json_like.map(json.dumps),
    st.builds(lambda n, a: {"name": n, "arguments": a}, tool_names, json_like),
    st.builds(lambda n, a: f"<tool_call>{json.dumps({'name': n, 'arguments': a})}</tool_call>", tool_names, json_like),
    st.builds(lambda n, a: {"role": "assistant", "content": None,
                            "tool_calls": [{"id": "x", "type": "function", "function": {"name": n, "arguments": a}}]},
              tool_names, st.text(max_size=40)),
)


@pytest.mark.parametrize("env_id", TARGETS)
@settings(max_examples=80)
@given(seed=st.integers(0, 10**6), batch=st.lists(actions, min_size=1, max_size=6))
def test_fuzzed_steps_never_raise(env_id, seed, batch):
    env = gym.make(env_id)
    obs, _ = env.reset(seed=seed)
    for action in batch:
        obs, reward, terminated, truncated, info = env.step(action)
        assert 0.0 <= reward <= 1.0
        assert all(is_valid_message(m) for m in obs)
        last_assistant = max(i for i, m in enumerate(obs) if m["role"] == "assistant")
        for call in obs[last_assistant].get("tool_calls") or ():
            if call["function"]["name"] == INVALID_TOOL_CALL:
                results = [m for m in obs[last_assistant + 1:] if m.get("tool_call_id") == call["id"]]
                assert results and results[0]["content"].startswith("Error")
        if terminated or truncated:
            return
    # the episode stays usable: the oracle can still act in it
    env.step(env.unwrapped.oracle_action(obs))


def test_compact_prompt_is_short_and_keeps_the_rules():
    for env_id in TARGETS:
        full, _ = gym.make(env_id).reset(seed=0)
        compact, _ = gym.make(env_id, prompt_style="compact").reset(seed=0)
        assert len(compact[0]["content"]) < len(full[0]["content"]) / 3
        assert compact[1:] == full[1:]
        assert "Refuse" in compact[0]["content"]


def test_actions_json_cannot_hold_are_error_observations(env):
    cyclic: dict = {}
    cyclic["self"] = cyclic
    env.reset(seed=12)
    for arguments in (cyclic, {"user_id": object()}, "[" * 100_000):
        obs, reward, terminated, truncated, _ = env.step({"name": "get_user_details", "arguments": arguments})
        assert obs[-1]["role"] == "tool" and obs[-1]["content"].startswith("Error: "), arguments
        assert not (terminated or truncated) and reward == 0.0
