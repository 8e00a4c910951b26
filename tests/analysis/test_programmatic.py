"""The programmatic labeller's rule, and the whole analysis on agents made weak on one
capability: it selects that capability and no other."""

from __future__ import annotations

import functools

import pytest

from trace_gym import capabilities as cap
from trace_gym.agents.base import OraclePolicy
from trace_gym.analysis.pipeline import AnalysisConfig, analyze
from trace_gym.analysis.programmatic import label
from trace_gym.rollout import rollout


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
        if self.weak == cap.STRUCTURED:
            infos = [i["value"] for r in self._env.task.requests for i in r.communicate]
            if any(i.replace(",", "").lower() in action.replace(",", "").lower() for i in infos):
                return "All set, anything else?"  # never tells the figure it had to work out
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


@pytest.mark.parametrize("weak", [cap.PRECONDITION, cap.STRUCTURED])
def test_analysis_selects_what_the_agent_was_left_weak_on(tmp_path, weak):
    files = []
    for env_id in ("trace/airline-v0", "trace/retail-v0"):
        out = tmp_path / f"{env_id.split('/')[1]}.jsonl"
        rollout(env_id, functools.partial(WeakOracle, weak), range(150), out, progress=False)
        files.append(out)
    data = analyze(files, tmp_path / "analysis", AnalysisConfig(), log=lambda m: None)
    selected = {c["name"] for c in data["capabilities"] if c["passes_consistency"]}
    assert selected == {weak}
    status = {c["name"]: c["status"] for c in data["capabilities"]}
    assert status[weak] == "SHIPPED"  # the shipped env has exactly this name
    assert data["trajectories"]["failed"] > 0 and data["trajectories"]["passed"] > 0
