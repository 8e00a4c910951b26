"""Importing SWE-bench runs (SWE-agent .traj, both shapes; OpenHands output.jsonl) graded by
the harness's report (report.json and the run summary) into trajectory records, with the
`localized` and `reproduced` checks the labeller reads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from trace_gym import capabilities as cap
from trace_gym.cli import main
from trace_gym.errors import MalformedFile, TraceGymError
from trace_gym.rollout import read_records
from trace_gym.spaces import ConversationSpace
from trace_gym.swebench import (
    Action,
    import_runs,
    patch_files,
    read_openhands,
    read_swe_agent,
    reproduced_check,
    shell_effects,
)
from trace_gym.trajectory import record_problem

ISSUE = "`core.succ(2)` returns 1, it should return 3."


def diff(*files: str, new: tuple[str, ...] = ()) -> str:
    """A git diff changing `files` (and adding `new`)."""
    parts = []
    for f in files:
        parts.append(f"diff --git a/{f} b/{f}\nindex 1c2a3b4..5d6e7f8 100644\n--- a/{f}\n+++ b/{f}\n"
                     "@@ -1,2 +1,2 @@\n def succ(x):\n-    return x - 1\n+    return x + 1\n")
    for f in new:
        parts.append(f"diff --git a/{f} b/{f}\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n"
                     f"+++ b/{f}\n@@ -0,0 +1 @@\n+print(1)\n")
    return "".join(parts)


# -- SWE-agent ----------------------------------------------------------------------------------------

def swe_agent_traj(actions: list[tuple[str, str]], patch: str | None, model: str = "claude-sonnet-4",
                   function_calling: bool = True) -> dict:
    """A SWE-agent 1.x .traj: `trajectory` steps and the `history` chat (function calling:
    assistant tool_calls answered by tool messages with tool_call_ids)."""
    steps, history = [], [
        {"role": "system", "content": "SETTING: You are an autonomous programmer ...", "agent": "main",
         "message_type": "system_prompt"},
        {"role": "user", "content": "Here is a demonstration ...", "agent": "main", "message_type": "user",
         "is_demo": True},
        {"role": "user", "content": [{"type": "text", "text": f"<uploaded_files>\n/testbed\n</uploaded_files>\n{ISSUE}"}],
         "agent": "main", "message_type": "user"},
    ]
    for i, (action, observation) in enumerate(actions):
        thought = f"Step {i}."
        steps.append({"action": action, "observation": observation, "response": thought, "thought": thought,
                      "execution_time": 0.5, "state": {"open_file": "/testbed/pkg/core.py", "working_dir": "/testbed"},
                      "query": [{"role": "system", "content": "..."}], "extra_info": {}})
        word = action.split()[0]
        tool = word if word in ("str_replace_editor", "submit") else "bash"
        arguments = {"command": action} if tool == "bash" else {"command": action.split()[1] if tool != "submit"
                                                                else "", "path": "/testbed/pkg/core.py"}
        if function_calling:
            call = {"index": 0, "function": {"arguments": json.dumps(arguments), "name": tool}, "id": f"toolu_{i:02d}",
                    "type": "function"}
            history.append({"role": "assistant", "content": thought, "thought": thought, "action": action,
                            "agent": "main", "tool_calls": [call], "message_type": "action", "thinking_blocks": []})
            history.append({"role": "tool", "content": [{"type": "text", "text": f"OBSERVATION:\n{observation}"}],
                            "agent": "main", "message_type": "observation", "tool_call_ids": [f"toolu_{i:02d}"]})
        else:
            history.append({"role": "assistant", "content": f"{thought}\n```\n{action}\n```", "agent": "main"})
            history.append({"role": "user", "content": f"{observation}\n(Open file: /testbed/pkg/core.py)\nbash-$",
                            "agent": "main"})
    data = {"environment": "main", "trajectory": steps, "history": history,
            "info": {"submission": patch, "exit_status": "submitted", "edited_files30": "",
                     "model_stats": {"instance_cost": 0.1, "tokens_sent": 1000, "tokens_received": 100, "api_calls": 4},
                     "swe_agent_version": "1.1.0"}}
    if model:
        data["replay_config"] = json.dumps({"agent": {"type": "default", "model": {"name": model, "temperature": 0.0}},
                                            "problem_statement": {"text": ISSUE, "id": "x", "type": "text"}})
    return data


REPRODUCING = [
    ("str_replace_editor create /testbed/reproduce.py --file_text 'from pkg import core\nprint(core.succ(2))'",
     "File created successfully at: /testbed/reproduce.py"),
    ("python reproduce.py", "1"),
    ("str_replace_editor str_replace /testbed/pkg/core.py   --old_str '    return x - 1' --new_str '    return x + 1'",
     "The file /testbed/pkg/core.py has been edited."),
    ("python reproduce.py", "3"),
    ("submit", diff("pkg/core.py")),
]
EDITING_FIRST = [
    ("find_file core.py", "Found 1 matches for \"core.py\":\n/testbed/pkg/core.py"),
    ("sed -i 's/x - 1/x + 1/' pkg/core.py", ""),
    ("cd /testbed && python -m pytest tests/test_core.py -q", "1 passed"),
    ("submit", diff("pkg/core.py")),
]


def old_swe_agent_traj() -> dict:
    """A SWE-agent 0.x .traj: states as JSON text, a plain-text history, no replay_config; the
    agent edits before it runs anything."""
    actions = [("open pkg/core.py", "[File: /pkg__pkg/pkg/core.py (2 lines total)]"),
               ("edit 2:2\n    return x + 1\nend_of_edit", "File updated."),
               ("python -m pytest tests/test_core.py\n", "1 passed"), ("submit\n", diff("pkg/core.py"))]
    data = swe_agent_traj(actions, "\n" + diff("pkg/core.py").replace("\n", "\r\n"), model="",
                          function_calling=False)
    for step in data["trajectory"]:
        step["state"] = json.dumps({"open_file": "/pkg__pkg/pkg/core.py", "working_dir": "/pkg__pkg"}) + "\n"
        del step["query"], step["extra_info"]
    return data


# -- OpenHands ----------------------------------------------------------------------------------------

WORKSPACE = "/workspace/pkg__pkg__1.0"


class Events:
    """An OpenHands history as `event_to_dict` writes it: actions with `args` and
    tool_call_metadata (the model's response included), observations with `cause`."""

    def __init__(self) -> None:
        self.events: list[dict] = [
            {"id": 0, "timestamp": "2025-04-30T16:32:54.707474", "source": "agent", "message": "You are OpenHands agent",
             "action": "system", "args": {"content": "You are OpenHands agent, a helpful AI assistant.", "tools": [],
                                          "openhands_version": "0.39.0", "agent_class": "CodeActAgent"}},
            {"id": 1, "timestamp": "2025-04-30T16:32:54.708196", "source": "user", "message": ISSUE,
             "action": "message", "args": {"content": f"<uploaded_files>\n{WORKSPACE}\n</uploaded_files>\n{ISSUE}",
                                           "image_urls": None, "wait_for_response": False}},
            {"id": 2, "timestamp": "2025-04-30T16:32:54.729188", "source": "user", "message": "Retrieving content",
             "action": "recall", "args": {"recall_type": "workspace_context", "query": ISSUE, "thought": ""}},
            {"id": 3, "timestamp": "2025-04-30T16:32:54.730878", "source": "environment", "cause": 2,
             "message": "Added workspace context", "observation": "recall", "content": "Added workspace context",
             "extras": {"recall_type": "workspace_context"}},
        ]
        self.calls = 0

    def _metadata(self, tool: str, arguments: dict, thought: str) -> dict:
        self.calls += 1
        call_id = f"toolu_{self.calls:02d}"
        response = {"id": f"gen-{self.calls}", "created": 1746001974, "model": "qwen3-coder", "object": "chat.completion",
                    "choices": [{"finish_reason": "tool_calls", "index": 0, "message": {
                        "content": thought, "role": "assistant", "tool_calls": [{
                            "index": 1, "function": {"arguments": json.dumps(arguments), "name": tool},
                            "id": call_id, "type": "function"}]}}],
                    "usage": {"completion_tokens": 50, "prompt_tokens": 5000, "total_tokens": 5050}}
        return {"function_name": tool, "tool_call_id": call_id, "model_response": response, "total_calls_in_response": 1}

    def _add(self, action: dict, observation: dict | None) -> Events:
        i = len(self.events) + 10
        action["id"] = i
        self.events.append(action)
        if observation is not None:
            observation.update(id=i + 1, cause=i, tool_call_metadata=action["tool_call_metadata"],
                               timestamp="2025-04-30T16:33:00.000000")
            self.events.append(observation)
        return self

    def run(self, command: str, output: str, exit_code: int = 0) -> Events:
        metadata = self._metadata("execute_bash", {"command": command}, f"Let me run `{command}`.")
        return self._add(
            {"timestamp": "2025-04-30T16:32:57.821635", "source": "agent", "message": f"Running command: {command}",
             "action": "run", "args": {"command": command, "is_input": False, "thought": f"Let me run `{command}`.",
                                       "blocking": False, "is_static": False, "cwd": None, "hidden": False,
                                       "confirmation_state": "confirmed", "security_risk": -1},
             "tool_call_metadata": metadata},
            {"source": "agent", "message": f"Command `{command}` executed with exit code {exit_code}.",
             "observation": "run", "content": output,
             "extras": {"command": command, "metadata": {"exit_code": exit_code, "pid": -1, "username": "root",
                                                         "hostname": "abc", "working_dir": WORKSPACE,
                                                         "py_interpreter_path": "/opt/miniconda3/envs/testbed/bin/python",
                                                         "prefix": "", "suffix": ""}, "hidden": False},
             "success": exit_code == 0})

    def read(self, path: str) -> Events:
        metadata = self._metadata("str_replace_editor", {"command": "view", "path": path}, "")
        return self._add(
            {"timestamp": "2025-04-30T16:33:10.979271", "source": "agent", "message": f"Reading file: {path}",
             "action": "read", "args": {"path": path, "start": 0, "end": -1, "thought": "", "security_risk": -1,
                                        "impl_source": "oh_aci", "view_range": None},
             "tool_call_metadata": metadata},
            {"source": "agent", "message": f"I read the file {path}.", "observation": "read",
             "content": f"Here's the result of running `cat -n` on {path}:\n     1\tdef succ(x):\n     2\t    return x - 1\n",
             "extras": {"path": path, "impl_source": "oh_aci"}})

    def edit(self, path: str, command: str = "str_replace", text: str = "") -> Events:
        arguments = {"command": command, "path": path}
        arguments.update({"file_text": text} if command == "create" else
                         {"old_str": "    return x - 1", "new_str": "    return x + 1"})
        metadata = self._metadata("str_replace_editor", arguments, "Now the fix.")
        args = {"path": path, "command": command, "file_text": arguments.get("file_text"),
                "old_str": arguments.get("old_str"), "new_str": arguments.get("new_str"), "insert_line": None,
                "content": "", "start": 1, "end": -1, "thought": "Now the fix.", "security_risk": -1,
                "impl_source": "oh_aci"}
        return self._add(
            {"timestamp": "2025-04-30T16:33:38.279310", "source": "agent", "message": "", "action": "edit",
             "args": args, "tool_call_metadata": metadata},
            {"source": "agent", "message": f"I edited the file {path}.", "observation": "edit",
             "content": f"The file {path} has been edited.",
             "extras": {"path": path, "prev_exist": command != "create", "old_content": args["old_str"],
                        "new_content": args["new_str"], "impl_source": "oh_aci", "diff": ""}})

    def finish(self) -> Events:
        metadata = self._metadata("finish", {"message": "Fixed."}, "")
        return self._add({"timestamp": "2025-04-30T16:34:22.948624", "source": "agent", "message": "Fixed.",
                          "action": "finish", "args": {"final_thought": "Fixed.", "task_completed": "true",
                                                       "outputs": {}, "thought": ""},
                          "tool_call_metadata": metadata}, None)


def openhands_row(instance_id: str, events: Events, patch: str | None, gold: str | None = None,
                  error: str | None = None, model: str = "openai/qwen3-coder") -> dict:
    """One line of OpenHands' output.jsonl (evaluation/utils/shared.py EvalOutput)."""
    row = {"instance_id": instance_id, "test_result": {"git_patch": patch}, "instruction": f"<uploaded_files>...{ISSUE}",
           "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": model, "temperature": 0.0},
                        "max_iterations": 100, "eval_output_dir": "evaluation/evaluation_outputs/x",
                        "start_time": "2025-04-30 16:32:50", "git_commit": "0123abc",
                        "dataset": "princeton-nlp/SWE-bench_Verified", "data_split": "test", "details": {}},
           "history": events.events, "metrics": {"accumulated_cost": 0.0}, "error": error}
    if gold is not None:
        row["instance"] = {"repo": "pkg/pkg", "instance_id": instance_id, "base_commit": "abc", "patch": gold,
                           "test_patch": diff("tests/test_core.py"), "problem_statement": ISSUE, "version": "1.0",
                           "FAIL_TO_PASS": '["tests/test_core.py::test_succ"]', "PASS_TO_PASS": "[]"}
    return row


def reproducing_events() -> Events:
    return (Events().run("ls", "pkg tests setup.py")
            .run("cat > /workspace/reproduce.py << 'EOF'\nfrom pkg import core\nprint(core.succ(2) > 2)\nEOF\n"
                 "python /workspace/reproduce.py", "False")
            .read(f"{WORKSPACE}/pkg/core.py").edit(f"{WORKSPACE}/pkg/core.py")
            .run("python /workspace/reproduce.py", "True").finish())


def editing_events() -> Events:
    """Edits first; runs out of iterations (no finish)."""
    return (Events().run("grep -rn 'def succ' .", "./pkg/core.py:1:def succ(x):")
            .edit(f"{WORKSPACE}/pkg/util.py").run("python -m pytest tests", "1 passed"))


# -- reports ------------------------------------------------------------------------------------------

def instance_report(resolved: dict[str, bool]) -> dict:
    """A report.json (harness/grading.py get_eval_report, with tests_status) for these instances."""
    out = {}
    for instance_id, ok in resolved.items():
        f2p = ["tests/test_core.py::test_succ"]
        p2p = ["tests/test_core.py::test_pred", "tests/test_core.py::test_zero"]
        out[instance_id] = {"patch_is_None": False, "patch_exists": True, "patch_successfully_applied": True,
                            "resolved": ok, "infra_failure": False, "tests_status": {
                                "FAIL_TO_PASS": {"success": f2p if ok else [], "failure": [] if ok else f2p},
                                "PASS_TO_PASS": {"success": p2p, "failure": []},
                                "FAIL_TO_FAIL": {"success": [], "failure": []},
                                "PASS_TO_FAIL": {"success": [], "failure": []}}}
    return out


def summary_report(resolved: list[str], unresolved: list[str], **lists: list[str]) -> dict:
    """A run summary (harness/reporting.py make_run_report, schema_version 2)."""
    ids = sorted([*resolved, *unresolved, *(i for k, v in lists.items() if k != "incomplete_ids" for i in v)])
    out = {"total_instances": 500, "submitted_instances": len(ids), "completed_instances": len(resolved + unresolved),
           "resolved_instances": len(resolved), "unresolved_instances": len(unresolved),
           "empty_patch_instances": 0, "error_instances": 0, "completed_ids": sorted(resolved + unresolved),
           "incomplete_ids": [], "empty_patch_ids": [], "submitted_ids": ids, "resolved_ids": sorted(resolved),
           "unresolved_ids": sorted(unresolved), "infra_failure_ids": [], "ambiguous_failure_ids": [],
           "failure_reasons": {}, "error_ids": [], "schema_version": 2}
    out.update({k: sorted(v) for k, v in lists.items()})
    return out


def write(path, value) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value, indent=2))
    return str(path)


def write_jsonl(path, rows) -> str:
    return write(path, "".join(json.dumps(r) + "\n" for r in rows))


def checks(record) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in record["verdict"]["checks"]}


@pytest.fixture
def run_dir(tmp_path):
    """A SWE-agent batch folder (two instances, and a RetryAgent attempt copy), an OpenHands
    output.jsonl (two instances), a report.json and a dataset file."""
    traj = tmp_path / "trajectories" / "me" / "run"
    write(traj / "pkg__pkg-1" / "pkg__pkg-1.traj", swe_agent_traj(REPRODUCING, diff("pkg/core.py")))
    write(traj / "pkg__pkg-1" / "attempt_0" / "pkg__pkg-1.traj", swe_agent_traj(REPRODUCING, None))
    write(traj / "pkg__pkg-2" / "pkg__pkg-2.traj", swe_agent_traj(EDITING_FIRST, diff("pkg/util.py")))
    write_jsonl(tmp_path / "oh" / "output.jsonl", [
        openhands_row("pkg__pkg-3", reproducing_events(), diff("pkg/core.py", new=("reproduce.py",)),
                      gold=diff("pkg/core.py")),
        openhands_row("pkg__pkg-4", editing_events(), diff("pkg/util.py"), gold=diff("pkg/core.py", "pkg/util.py"),
                      error="RuntimeError: Agent reached maximum iteration in headless mode."),
    ])
    write(tmp_path / "report.json", instance_report({"pkg__pkg-1": True, "pkg__pkg-2": False, "pkg__pkg-3": True,
                                                     "pkg__pkg-4": False}))
    write_jsonl(tmp_path / "dataset.jsonl", [{"instance_id": f"pkg__pkg-{i}", "patch": diff("pkg/core.py"),
                                              "repo": "pkg/pkg"} for i in (1, 2)])
    return tmp_path


# -- records ------------------------------------------------------------------------------------------

def test_each_format_gives_wire_format_records_with_the_reports_verdict(run_dir):
    imported = import_runs([run_dir / "trajectories", run_dir / "oh" / "output.jsonl"], run_dir / "report.json")
    by_id = {r["task_id"]: r for r in imported.records}
    assert sorted(by_id) == ["pkg__pkg-1", "pkg__pkg-2", "pkg__pkg-3", "pkg__pkg-4"]  # no attempt_0 copy
    for r in imported.records:
        assert record_problem(r) is None and ConversationSpace().contains(r["messages"])
        assert r["id"] == f"swebench/verified/{r['task_id']}/0" and r["env_id"] == "swebench/verified"
        assert r["domain"] == "coding" and r["capabilities_needed"] == list(cap.CODING)
        assert r["verdict"]["score"] == r["reward"] == (1.0 if r["passed"] else 0.0)
        calls = {tc["id"] for m in r["messages"] for tc in m.get("tool_calls") or []}
        answers = [m["tool_call_id"] for m in r["messages"] if m["role"] == "tool"]
        assert answers and set(answers) <= calls
        assert r["instructions"].endswith(ISSUE)
    assert [by_id[i]["passed"] for i in sorted(by_id)] == [True, False, True, False]
    assert by_id["pkg__pkg-1"]["model"] == "claude-sonnet-4" and by_id["pkg__pkg-1"]["policy"] == "swe-agent/claude-sonnet-4"
    assert by_id["pkg__pkg-3"]["policy"] == "openhands/CodeActAgent/openai/qwen3-coder"
    assert by_id["pkg__pkg-1"]["termination_reason"] == "submitted"
    assert by_id["pkg__pkg-3"]["termination_reason"] == "submitted"
    assert by_id["pkg__pkg-4"]["termination_reason"] == "max_steps"
    # the report's tests become f2p / p2p checks; its entry is kept
    assert checks(by_id["pkg__pkg-2"]) | {"localized": None} == {
        "f2p:tests/test_core.py::test_succ": False, "p2p:tests/test_core.py::test_pred": True,
        "p2p:tests/test_core.py::test_zero": True, "reproduced": False, "localized": None}
    assert by_id["pkg__pkg-2"]["verdict"]["source"]["patch_successfully_applied"] is True
    assert sum(c["credit"] for c in by_id["pkg__pkg-1"]["verdict"]["checks"]) == pytest.approx(1.0)


def test_swe_agent_messages_come_from_the_history_with_its_tool_calls(run_dir):
    run = read_swe_agent(run_dir / "trajectories" / "me" / "run" / "pkg__pkg-1" / "pkg__pkg-1.traj")
    roles = [m["role"] for m in run.messages]
    assert roles[:2] == ["system", "user"] and "Here is a demonstration" not in json.dumps(run.messages)
    assert roles[2:] == ["assistant", "tool"] * len(REPRODUCING)
    first = run.messages[2]["tool_calls"][0]
    assert first["id"] == "toolu_00" and first["function"]["name"] == "str_replace_editor"
    assert run.messages[3] == {"role": "tool", "tool_call_id": "toolu_00",
                               "content": "OBSERVATION:\nFile created successfully at: /testbed/reproduce.py"}
    assert run.instructions == ISSUE and run.total_s == pytest.approx(2.5)


def test_a_0x_trajectory_without_tool_calls_gets_one_call_per_step(tmp_path):
    path = write(tmp_path / "pkg__pkg-9.traj", old_swe_agent_traj())
    run = read_swe_agent(path)
    assert run.model is None and run.agent == "swe-agent"
    calls = [tc["function"] for m in run.messages for tc in m.get("tool_calls") or []]
    assert [c["name"] for c in calls] == ["open", "edit", "bash", "submit"]  # SWE-agent's commands, else bash
    assert json.loads(calls[1]["arguments"]) == {"command": "edit 2:2\n    return x + 1\nend_of_edit"}
    assert [a.edit for a in run.actions] == ["", "modify", "", ""]
    assert run.actions[1].path == "/pkg__pkg/pkg/core.py"  # the open file, from the state's JSON text
    assert patch_files(run.patch) == {"pkg/core.py": "modified"}  # CRLF and a leading newline
    assert reproduced_check(run.actions).passed is False
    assert ConversationSpace().contains(run.messages)


def test_openhands_history_becomes_tool_calls_with_the_models_own_arguments(run_dir):
    run = next(read_openhands(run_dir / "oh" / "output.jsonl"))
    assert [m["role"] for m in run.messages[:2]] == ["system", "user"]  # recall events left out
    calls = [tc for m in run.messages for tc in m.get("tool_calls") or []]
    assert [c["function"]["name"] for c in calls] == ["execute_bash", "execute_bash", "str_replace_editor",
                                                      "str_replace_editor", "execute_bash", "finish"]
    assert json.loads(calls[2]["function"]["arguments"]) == {"command": "view", "path": f"{WORKSPACE}/pkg/core.py"}
    answered = [m["tool_call_id"] for m in run.messages if m["role"] == "tool"]
    assert answered == [c["id"] for c in calls[:5]]  # finish has no observation
    assert [a.tool for a in run.actions] == ["execute_bash", "execute_bash", "str_replace_editor", "execute_bash"]
    assert run.gold_patch == diff("pkg/core.py") and run.instructions == ISSUE


def test_an_older_history_of_action_observation_pairs_is_read(tmp_path):
    events = reproducing_events().events
    pairs = [[a, {k: v for k, v in o.items() if k != "cause"}] for a, o in zip(events[4::2], events[5::2])
             if "action" in a and "observation" in o]
    path = write_jsonl(tmp_path / "output.jsonl", [openhands_row("pkg__pkg-3", reproducing_events(), None)
                                                   | {"history": pairs}])
    run = next(read_openhands(path))
    assert ConversationSpace().contains(run.messages)
    tools = [m["tool_call_id"] for m in run.messages if m["role"] == "tool"]
    calls = [tc["id"] for m in run.messages for tc in m.get("tool_calls") or []]
    assert tools == calls and len(calls) == 5


# -- the two checks -----------------------------------------------------------------------------------

def test_localized_needs_every_file_of_the_gold_patch(run_dir):
    imported = import_runs([run_dir / "oh" / "output.jsonl"], run_dir / "report.json")
    by_id = {r["task_id"]: checks(r) for r in imported.records}
    assert by_id["pkg__pkg-3"]["localized"] is True  # a reproduce.py left in the patch does not matter
    assert by_id["pkg__pkg-4"]["localized"] is False  # changed util.py, not core.py
    detail = next(c["detail"] for c in imported.records[1]["verdict"]["checks"] if c["name"] == "localized")
    assert detail == "the patch leaves out pkg/core.py"


def test_localized_is_left_out_without_a_gold_patch_and_read_from_the_dataset(run_dir):
    trajs = [run_dir / "trajectories"]
    assert all("localized" not in checks(r) for r in import_runs(trajs, run_dir / "report.json").records)
    imported = import_runs(trajs, run_dir / "report.json", dataset=run_dir / "dataset.jsonl")
    assert {r["task_id"]: checks(r)["localized"] for r in imported.records} == {"pkg__pkg-1": True,
                                                                                 "pkg__pkg-2": False}


def test_reproduced_is_running_code_before_the_first_edit_of_the_code(run_dir):
    imported = import_runs([run_dir / "trajectories", run_dir / "oh" / "output.jsonl"], run_dir / "report.json")
    assert {r["task_id"]: checks(r)["reproduced"] for r in imported.records} == {
        "pkg__pkg-1": True, "pkg__pkg-2": False, "pkg__pkg-3": True, "pkg__pkg-4": False}
    detail = next(c["detail"] for c in imported.records[0]["verdict"]["checks"] if c["name"] == "reproduced")
    assert detail == "ran `python reproduce.py` before the first edit (/testbed/pkg/core.py)"


@pytest.mark.parametrize("command, kinds", [
    ("cd /testbed && python reproduce.py", [("run", "")]),
    ("python3.9 -c 'print(1)'", [("run", "")]),
    ("FOO=1 timeout 30 pytest -x tests/", [("run", "")]),
    ("tox -e py39; nosetests tests", [("run", ""), ("run", "")]),
    ("./run_tests.sh", [("run", "")]),
    ("python -m pip install -e .", []),
    ("ls -la | grep py && cat setup.py", []),
    ("echo 'python x.py > y.py'", []),
    ("sed -i 's/a/b/' pkg/core.py pkg/util.py", [("modify", "pkg/core.py"), ("modify", "pkg/util.py")]),
    ("sed -i.bak -e 's/a/b/' pkg/core.py", [("modify", "pkg/core.py")]),
    ("sed -n '1,20p' pkg/core.py", []),
    ("cat > repro.py << 'EOF'\nimport os\nos.system('python evil.py')\nEOF\npython repro.py",
     [("create", "repro.py"), ("run", "")]),
    ("echo 'x = 1' >> pkg/core.py", [("modify", "pkg/core.py")]),
    ("python x.py > out.txt 2>&1", [("run", "")]),
])
def test_shell_commands(command, kinds):
    assert [(e.kind, e.path) for e in shell_effects(command)] == kinds


@pytest.mark.parametrize("actions, passed", [
    ([Action("bash", command="python -c 'import pkg'"), Action("str_replace_editor", path="pkg/core.py", edit="modify")],
     True),
    ([Action("str_replace_editor", path="pkg/core.py", edit="modify"), Action("bash", command="pytest")], False),
    # a scratch script written, then run, then the fix
    ([Action("create", path="/testbed/repro.py", edit="create"), Action("edit", path="repro.py", edit="modify"),
      Action("bash", command="python repro.py"), Action("edit", path="/testbed/pkg/core.py", edit="modify")], True),
    # a regression test added to the suite and run first
    ([Action("edit", path="tests/test_core.py", edit="modify"), Action("bash", command="pytest tests"),
      Action("edit", path="pkg/core.py", edit="modify")], True),
    # creating over a file the fix changes is an edit of the code
    ([Action("create", path="/testbed/pkg/core.py", edit="create"), Action("bash", command="python -m pkg")], False),
    # a redirect into a source file
    ([Action("bash", command="echo 'x = 1' >> pkg/core.py"), Action("bash", command="python -m pkg")], False),
    ([Action("run_tests"), Action("edit_file", path="pkg/core.py", edit="modify")], True),
    ([Action("bash", command="ls"), Action("edit", path="", edit="modify")], False),
    ([Action("bash", command="pytest")], True),
    ([], False),
])
def test_reproduced_rule(actions, passed):
    assert reproduced_check(actions, {"pkg/core.py"}).passed is passed


# -- the report ---------------------------------------------------------------------------------------

def test_a_run_summary_grades_by_its_lists(run_dir):
    summary = write(run_dir / "summary.json", summary_report(["pkg__pkg-1"], ["pkg__pkg-3"],
                                                             empty_patch_ids=["pkg__pkg-2"],
                                                             error_ids=["pkg__pkg-4"]))
    imported = import_runs([run_dir / "trajectories", run_dir / "oh" / "output.jsonl"], summary)
    by_id = {r["task_id"]: r for r in imported.records}
    assert {i: r["passed"] for i, r in by_id.items()} == {"pkg__pkg-1": True, "pkg__pkg-2": False,
                                                          "pkg__pkg-3": False, "pkg__pkg-4": False}
    assert checks(by_id["pkg__pkg-1"])["resolved"] is True
    assert by_id["pkg__pkg-2"]["verdict"]["source"] == {"report": "summary", "listed_in": "empty_patch_ids"}


def test_a_directory_of_report_files_is_one_report(run_dir):
    logs = run_dir / "logs" / "run_evaluation" / "run1" / "model"
    for instance_id, ok in {"pkg__pkg-1": True, "pkg__pkg-2": False}.items():
        write(logs / instance_id / "report.json", instance_report({instance_id: ok}))
    imported = import_runs([run_dir / "trajectories"], run_dir / "logs")
    assert {r["task_id"]: r["passed"] for r in imported.records} == {"pkg__pkg-1": True, "pkg__pkg-2": False}


def test_an_instance_missing_from_the_report_is_refused_by_name_unless_skipped(run_dir):
    report = write(run_dir / "partial.json", instance_report({"pkg__pkg-1": True}))
    with pytest.raises(TraceGymError, match=r"pkg__pkg-2\.traj: instance 'pkg__pkg-2': the report .*partial\.json "
                                            r"does not grade it \(--skip-missing"):
        import_runs([run_dir / "trajectories"], report)
    imported = import_runs([run_dir / "trajectories"], report, skip_missing=True)
    assert [r["task_id"] for r in imported.records] == ["pkg__pkg-1"] and imported.skipped == ["pkg__pkg-2"]
    summary = write(run_dir / "summary.json", summary_report(["pkg__pkg-1"], [], incomplete_ids=["pkg__pkg-2"]))
    with pytest.raises(TraceGymError, match="lists it as not evaluated"):
        import_runs([run_dir / "trajectories"], summary)


# -- malformed input ----------------------------------------------------------------------------------

def test_bad_json_in_an_output_file_is_refused_at_its_line(run_dir):
    good = (run_dir / "oh" / "output.jsonl").read_text().splitlines()[0]
    bad = write(run_dir / "bad" / "output.jsonl", good + "\n\n" + '{"instance_id": "x", "history": [\n')
    with pytest.raises(MalformedFile, match=r"bad/output\.jsonl: line 3: not valid JSON"):
        list(read_openhands(bad))
    for row, says in [("[1, 2]", "line 1: not a JSON object"), ('{"history": []}', "line 1: no 'instance_id'"),
                      ('{"instance_id": "x", "history": {}}', "line 1: 'history' must be a list of events"),
                      ('{"instance_id": "x", "history": [{"id": 1}]}', r"line 1: history\[0\] is not an event"),
                      ('{"instance_id": "x", "history": [{"action": ["run"]}]}', r"history\[0\]\.action must be a string"),
                      ('{"instance_id": "x", "history": [[{"action": 3}, {"observation": "run"}]]}',
                       r"history\[0\]\.action must be a string")]:
        write(run_dir / "bad" / "output.jsonl", row + "\n")
        with pytest.raises(MalformedFile, match=says):
            list(read_openhands(run_dir / "bad" / "output.jsonl"))


@pytest.mark.parametrize("content, says", [
    ('{"history": [], "info": {}}', "no 'trajectory' list of steps"),
    ("[1]", "expected a JSON object"),
    ('{\n"trajectory": [,]}', "line 2: not valid JSON"),
    ('{"trajectory": ["step"]}', r"trajectory\[0\] is not a step object"),
    ('{"trajectory": [{"action": 3}]}', r"trajectory\[0\]\.action must be a string"),
    ('{"trajectory": [], "history": "x"}', "'history' must be a list"),
    ('{"trajectory": [], "info": {"submission": 1}}', "info.submission must be the patch text"),
])
def test_a_malformed_traj_is_refused_naming_the_file_and_why(tmp_path, content, says):
    path = write(tmp_path / "pkg__pkg-1.traj", content)
    with pytest.raises(MalformedFile, match=rf"pkg__pkg-1\.traj: .*{says}"):
        read_swe_agent(path)


@pytest.mark.parametrize("report, says", [
    ({"x": {"resolved": "yes"}}, "instance 'x': 'resolved' must be true or false"),
    ({"x": {"resolved": True, "tests_status": {"FAIL_TO_PASS": {"success": "t"}}}},
     r"instance 'x': tests_status\.FAIL_TO_PASS\.success must be a list"),
    ({"resolved_ids": "a"}, "field 'resolved_ids' must be a list of instance ids"),
    ({"resolved_ids": ["a"], "unresolved_ids": ["a"]}, "'a' is listed both in 'resolved_ids' and in 'unresolved_ids'"),
    ({"total": 3}, "not a SWE-bench evaluation report"),
    ("{", "line 1: not valid JSON"),
])
def test_a_malformed_report_is_refused(tmp_path, run_dir, report, says):
    path = write(tmp_path / "r.json", report)
    with pytest.raises(MalformedFile, match=rf"r\.json: .*{says}"):
        import_runs([run_dir / "trajectories"], path)


def test_bad_paths_are_refused(tmp_path, run_dir):
    with pytest.raises(TraceGymError, match="no .traj files under this directory"):
        import_runs([tmp_path / "oh"], run_dir / "report.json")
    with pytest.raises(TraceGymError, match="expected a SWE-agent .traj file"):
        import_runs([run_dir / "report.json"], run_dir / "report.json")
    write(tmp_path / "dataset.jsonl", '{"instance_id": "pkg__pkg-1"}\n')
    with pytest.raises(MalformedFile, match=r"dataset\.jsonl: line 1: needs a string 'instance_id' and a string"):
        import_runs([run_dir / "trajectories"], run_dir / "report.json", dataset=tmp_path / "dataset.jsonl")
    traj = run_dir / "trajectories" / "me" / "run" / "pkg__pkg-1" / "pkg__pkg-1.traj"
    with pytest.raises(TraceGymError, match="instance 'pkg__pkg-1' was read from .* too"):
        import_runs([run_dir / "trajectories", traj], run_dir / "report.json")


# -- the command --------------------------------------------------------------------------------------

def test_cli_end_to_end(run_dir, capsys):
    out = run_dir / "runs" / "swebench.jsonl"
    out.parent.mkdir()  # a file --out goes into a folder that exists
    argv = ["import-swebench", str(run_dir / "trajectories"), str(run_dir / "oh" / "output.jsonl"),
            "--report", str(run_dir / "report.json"), "--dataset", str(run_dir / "dataset.jsonl"), "--out", str(out)]
    assert main(argv) == 0
    assert "4 trajectory record(s) written to" in capsys.readouterr().err
    records = read_records(out)
    assert [r["task_id"] for r in records] == ["pkg__pkg-1", "pkg__pkg-2", "pkg__pkg-3", "pkg__pkg-4"]
    assert main(argv) == 0 and len(read_records(out)) == 4  # replaced whole, not appended
    assert [p.name for p in out.parent.iterdir()] == ["swebench.jsonl"]  # no temporary file left
    capsys.readouterr()
    partial = write(run_dir / "partial.json", instance_report({"pkg__pkg-1": True}))
    bad = ["import-swebench", str(run_dir / "trajectories"), "--report", partial, "--out", str(out)]
    assert main(bad) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trace-gym: error: ") and "'pkg__pkg-2'" in err[0]
    assert len(read_records(out)) == 4  # a refused import leaves the old file
    assert main([*bad, "--skip-missing"]) == 0
    assert "1 instance(s) the report does not grade left out: pkg__pkg-2" in capsys.readouterr().err
    assert [r["task_id"] for r in read_records(out)] == ["pkg__pkg-1"]


def test_the_command_is_listed_and_imports_no_model_library():
    code = ("import sys; from trace_gym.cli import main, command_names; import trace_gym.swebench; "
            "assert 'import-swebench' in command_names(); "
            "print(sorted(m for m in ('torch', 'transformers', 'openvino') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
