"""The programmatic labeller's rule, and the whole analysis on agents made weak on one
capability: it selects that capability and no other (on trace-gym's own targets, and on
imported SWE-bench runs for the coding capabilities)."""

from __future__ import annotations

import functools
import re

import pytest

from trace_gym import capabilities as cap
from trace_gym.agents.base import OraclePolicy
from trace_gym.analysis.pipeline import AnalysisConfig, analyze
from trace_gym.analysis.programmatic import label
from trace_gym.cli import main
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
    data = analyze(files, tmp_path / "analysis", AnalysisConfig())
    selected = {c["name"] for c in data["capabilities"] if c["passes_consistency"]}
    assert selected == {weak}
    status = {c["name"]: c["status"] for c in data["capabilities"]}
    assert status[weak] == "SHIPPED"  # the shipped env has exactly this name
    assert data["trajectories"]["failed"] > 0 and data["trajectories"]["passed"] > 0


def _coding(passed, checks, needed=cap.CODING):
    return _record(passed, list(needed), checks, termination="submitted")


@pytest.mark.parametrize("checks, expected", [
    # (the verdict's checks, the labels of code_localization and issue_reproduction)
    ([("f2p:t", False), ("localized", False), ("reproduced", True)], ("LACKING", "PRESENT")),
    ([("f2p:t", False), ("localized", True), ("reproduced", False)], ("PRESENT", "LACKING")),
    ([("f2p:t", False), ("localized", False), ("reproduced", False)], ("LACKING", "LACKING")),
    ([("f2p:t", False), ("localized", True), ("reproduced", True)], ("PRESENT", "PRESENT")),
    ([("resolved", False), ("reproduced", True)], ("PRESENT", "PRESENT")),  # no gold patch: localization unknown
    ([("f2p:t", False), ("p2p:localized", False), ("reproduced", True)], ("PRESENT", "PRESENT")),  # exact names only
])
def test_coding_rules(checks, expected):
    record = _coding(False, checks)
    assert (label(record, cap.LOCALIZATION), label(record, cap.REPRODUCTION)) == expected
    # a passed run has what it needed; a capability not needed is NA, both ways round
    assert {label(_coding(True, checks), c) for c in cap.CODING} == {"PRESENT"}
    assert {label(record, c) for c in cap.CUSTOMER_SERVICE} == {"NA"}
    assert {label(_coding(False, checks, needed=cap.CUSTOMER_SERVICE), c) for c in cap.CODING} == {"NA"}


def test_the_customer_service_rules_ignore_the_coding_checks():
    record = _record(False, list(cap.CUSTOMER_SERVICE), [("database", True), ("localized", False), ("reproduced", False)])
    assert {c: label(record, c) for c in cap.CUSTOMER_SERVICE} == dict.fromkeys(cap.CUSTOMER_SERVICE, "PRESENT")


def _swebench_runs(tmp_path, weak):
    """20 OpenHands SWE-bench runs graded by a report.json: 6 resolved, 14 not, of which 10
    fail the way an agent lacking `weak` does and 4 fix the right file after reproducing."""
    from tests.test_swebench_import import WORKSPACE, Events, diff, instance_report, openhands_row, write, write_jsonl

    rows, resolved = [], {}
    for i in range(20):
        instance_id = f"pkg__pkg-{i}"
        ok, bad = i < 6, i >= 10
        events = Events().run("grep -rn 'def succ' pkg", "pkg/core.py:1:def succ(x):")
        fixed = "pkg/util.py" if bad and weak == cap.LOCALIZATION else "pkg/core.py"
        if bad and weak == cap.REPRODUCTION:
            events.edit(f"{WORKSPACE}/{fixed}").run("python -m pytest tests", "1 passed")
        else:
            events.edit("/workspace/reproduce.py", command="create", text="from pkg import core\nprint(core.succ(2))")
            events.run("python /workspace/reproduce.py", "1").edit(f"{WORKSPACE}/{fixed}")
        rows.append(openhands_row(instance_id, events.finish(), diff(fixed), gold=diff("pkg/core.py")))
        resolved[instance_id] = ok
    source = write_jsonl(tmp_path / "openhands" / "output.jsonl", rows)
    report = write(tmp_path / "report.json", instance_report(resolved))
    out = tmp_path / "swebench.jsonl"
    assert main(["import-swebench", source, "--report", report, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("weak", cap.CODING)
def test_analysis_of_imported_swebench_runs_selects_the_coding_capability_they_lack(tmp_path, weak):
    data = analyze([_swebench_runs(tmp_path, weak)], tmp_path / "analysis", AnalysisConfig())
    selected = {c["name"] for c in data["capabilities"] if c["passes_consistency"]}
    assert selected == {weak}
    assert data["trajectories"] == {"passed": 6, "failed": 14}
    chosen = next(c for c in data["capabilities"] if c["name"] == weak)
    assert chosen["mean_cov"] == pytest.approx(10 / 14) and chosen["example_failed_ids"]
