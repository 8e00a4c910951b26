"""The programmatic labeller's rule, and the whole analysis on agents made weak on one
capability: it selects that capability and no other."""

from __future__ import annotations

import functools
import re

import pytest

from trace_gym import capabilities as cap
from trace_gym.agents.base import OraclePolicy
from trace_gym.analysis.pipeline import AnalysisConfig, analyze
from trace_gym.analysis.programmatic import label
from trace_gym.rollout import rollout
from trace_gym.targets.user import CONFIRM_CUES


class WeakOracle(OraclePolicy):
    """The oracle, except where a task needs `weak`: there it fails the way an agent
    lacking that capability does."""

    def __init__(self, weak: str) -> None:
        super().__init__()
        self.weak = weak
        self.name = f"weak:{weak}"

    def act(self, messages, tools):
        action = super().act(messages, tools)
        if self.weak not in self._env.task.capabilities_needed or not isinstance(action, str):
            return action
        if self.weak == cap.PRECONDITION and "cannot" in action:
            return "I am sorry, I cannot do that."  # refuses without naming the rule
        if self.weak == cap.STRUCTURED and not any(cue in action.lower() for cue in CONFIRM_CUES):
            # (a summary asking for the yes keeps its figures: without them it is no summary,
            # and writing without one skips a policy rule, another capability)
            for value in (i["value"] for r in self._env.task.requests for i in r.communicate):
                action = re.sub(rf"\b{re.escape(value)}\b", "some", action, flags=re.IGNORECASE)
        return action


def _record(passed, needed, checks, messages=(), termination="user_stop"):
    return {"id": "x", "passed": passed, "capabilities_needed": needed, "termination_reason": termination,
            "verdict": {"checks": [{"name": n, "passed": ok} for n, ok in checks]}, "messages": list(messages)}


def test_rule():
    assert label(_record(False, [], [("database", False)]), cap.PRECONDITION) == "NA"
    assert label(_record(True, [cap.PRECONDITION], [("database", True)]), cap.PRECONDITION) == "PRESENT"
    assert label(_record(False, [cap.PRECONDITION], [("refusal[0]:x", False)]), cap.PRECONDITION) == "LACKING"
    assert label(_record(False, [cap.PRECONDITION], [("database", False)]), cap.PRECONDITION) == "PRESENT"
    bad_write = [{"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {
        "name": "cancel_reservation", "arguments": "{}"}}]}, {"role": "tool", "tool_call_id": "c", "content": "Error: x"}]
    assert label(_record(False, [cap.PRECISION], [("database", False)], bad_write), cap.PRECISION) == "LACKING"
    assert label(_record(False, [cap.STRUCTURED], [("communicate[0]:12", False)]), cap.STRUCTURED) == "LACKING"
    assert label(_record(False, [cap.MULTI_STEP], [("database", False)], termination="max_steps"), cap.MULTI_STEP) == "LACKING"


@pytest.mark.parametrize("check", ["confirmation", "identification", "forbidden_write[0]:cancel_order"])
def test_a_skipped_protocol_rule_is_a_precondition_left_unchecked(check):
    needed = [cap.PRECONDITION, cap.STRUCTURED, cap.PRECISION, cap.MULTI_STEP]
    record = _record(False, needed, [("database", True), (check, False)])
    assert label(record, cap.PRECONDITION) == "LACKING"
    assert {c: label(record, c) for c in needed[1:]} == dict.fromkeys(needed[1:], "PRESENT")
    assert label(_record(False, [cap.STRUCTURED], [(check, False)]), cap.PRECONDITION) == "NA"
    assert label(_record(False, [cap.PRECONDITION], [(check, True), ("database", False)]), cap.PRECONDITION) == "PRESENT"


def test_a_write_without_a_yes_is_labelled_from_the_verdict_of_a_real_episode():
    """The oracle with its summary-and-yes turns skipped: the strict verdict fails
    `confirmation` alone, and the labeller puts it down to precondition verification."""
    import gymnasium as gym

    env = gym.make("trace/retail-v0", kinds=("cancel_order",), forbidden_rate=0.0, compound_rate=0.0).unwrapped
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        done, info = False, {}
        while not done:
            action = env.oracle_action(obs)
            if isinstance(action, str) and any(cue in action.lower() for cue in CONFIRM_CUES):
                action = env.oracle_action([*obs, {"role": "assistant", "content": action},
                                            {"role": "user", "content": "Yes, please go ahead."}])
            obs, _, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        failed = [c["name"] for c in info["verdict"]["checks"] if not c["passed"]]
        assert failed == ["confirmation"], (seed, failed)
        record = {"passed": False, "capabilities_needed": env.task.capabilities_needed, "messages": obs,
                  "termination_reason": "user_stop", "verdict": info["verdict"]}
        assert cap.PRECONDITION in record["capabilities_needed"]
        assert label(record, cap.PRECONDITION) == "LACKING"


@pytest.mark.parametrize("weak", [cap.PRECONDITION, cap.STRUCTURED])
def test_analysis_selects_what_the_agent_was_left_weak_on(tmp_path, weak):
    files = []
    for env_id in ("trace/airline-v0", "trace/retail-v0"):
        out = tmp_path / f"{env_id.split('/')[1]}.jsonl"
        # One request per conversation: after a figure withheld the customer asks again, and an
        # oracle whose plan has moved on would answer later requests out of turn.
        rollout(env_id, functools.partial(WeakOracle, weak), range(150), out, progress=False,
                env_kwargs={"compound_rate": 0.0})
        files.append(out)
    data = analyze(files, tmp_path / "analysis", AnalysisConfig(), log=lambda m: None)
    selected = {c["name"] for c in data["capabilities"] if c["passes_consistency"]}
    assert selected == {weak}
    status = {c["name"]: c["status"] for c in data["capabilities"]}
    assert status[weak] == "SHIPPED"  # the shipped env has exactly this name
    assert data["trajectories"]["failed"] > 0 and data["trajectories"]["passed"] > 0
