"""Import SWE-bench runs (SWE-agent trajectories, OpenHands output) into trace-gym trajectory records.

Sources, each read against its project's public code:

- SWE-agent `<instance_id>.traj` (JSON): SWE-agent/SWE-agent at 3ea751c0 (2026-07):
  `sweagent/types.py` (StepOutput, TrajectoryStep, HistoryItem, AgentInfo),
  `sweagent/agent/agents.py` (`get_trajectory_data`, `save_trajectory`,
  `add_step_to_history`, `_add_templated_messages_to_history`; the RetryAgent's
  `attempt_<n>/` copies), `docs/usage/trajectories.md`, and two stored files: the 1.x
  function-calling demo `trajectories/demonstrations/replay__marshmallow-code__marshmallow-1867__function_calling_replace__install-1/marshmallow-code__marshmallow-1867.traj`
  and the 0.x `tests/test_data/trajectories/gpt4__swe-bench-dev-easy_first_only__default__t-0.00__p-0.95__c-3.00__install-1/pydicom__pydicom-1458.traj`.
  A file holds `trajectory` (steps: `action`, `observation`, `response`, `thought`, `state`
  with `open_file`: a dict in 1.x, a JSON string in 0.x), `history` (the chat: `role`,
  `content` (text or a list of parts), in 1.x `message_type`, `action`, `tool_calls`
  (litellm's), `tool_call_ids` on tool messages, `is_demo` on demonstrations), `info`
  (`submission`: the patch, `exit_status`) and, from 1.x, `replay_config` (a dict, or the
  JSON text of one; `agent.model.name` is the model).
- OpenHands `output.jsonl`: All-Hands-AI/OpenHands at 156d0686 (2025-11):
  `evaluation/utils/shared.py` (EvalOutput: `instance_id`, `instruction`, `instance` (the
  dataset row: `patch`, `problem_statement`), `test_result.git_patch`, `metadata`
  (`agent_class`, `llm_config.model`), `history`, `error`),
  `evaluation/benchmarks/swe_bench/run_infer.py` (process_instance),
  `openhands/events/serialization/event.py` (`event_to_dict`: actions carry `action` and
  `args`, observations `observation`, `content`, `extras` and `cause`, the action's id; both
  `tool_call_metadata` with `function_name`, `tool_call_id` and the `model_response`),
  `openhands/events/action/{commands,files,message}.py`,
  `openhands/events/observation/{commands,files}.py`, `openhands/core/schema/*.py`,
  `openhands/agenthub/codeact_agent/function_calling.py` (execute_bash, str_replace_editor,
  edit_file, think, finish), and the stored rows of
  `evaluation/benchmarks/multi_swe_bench/examples/output.jsonl`. The older history of
  [action, observation] pairs is read too.
- The evaluation report: SWE-bench/SWE-bench at 7a21e057 (2026-08):
  `swebench/harness/grading.py` (`get_eval_report`: report.json is `{instance_id:
  {"patch_is_None", "patch_exists", "patch_successfully_applied", "resolved",
  "tests_status": {"FAIL_TO_PASS": {"success": [...], "failure": [...]}, "PASS_TO_PASS":
  ...}}}`) and `swebench/harness/reporting.py` (`make_run_report`, schema_version 2:
  `resolved_ids`, `unresolved_ids`, `empty_patch_ids`, `error_ids`, `incomplete_ids`,
  `infra_failure_ids`, ...). A directory is read as every `report.json` under it (the
  harness's `logs/run_evaluation/<run>/<model>/<instance>/report.json`).

Each run becomes one record of the shape `trace_gym.tau2` emits: id
`swebench/verified/<instance_id>/0`, env_id "swebench/verified", domain "coding", task_id
the instance id, policy `<agent>/<model>` and model (from the source's metadata, else None),
messages in the OpenAI wire format (every action an assistant tool call, its observation the
tool message answering it), reward 1 when the report says resolved, capabilities_needed
`capabilities.CODING`, termination_reason (SWE-agent's exit_status; OpenHands: "submitted"
after a finish action, "max_steps", "error"), and a verdict whose checks are the report's
tests (`f2p:<test>` / `p2p:<test>`, or one `resolved` check when the report lists none),
with the report's entry under `verdict.source`, plus two informational checks (credit 0)
the programmatic labeller reads:

- `localized`: the files the agent's patch changes include every file of the gold patch
  (the OpenHands row's `instance.patch`, or `--dataset`); left out when no gold patch is known;
- `reproduced`: the agent ran code (a `python`, `pytest`, `py.test`, `tox`, `nosetests` or
  `./script` command, `python -m pip` excepted, or a `run_tests` / `run` tool call) before
  its first edit of the code. An edit is a create / write / str_replace / insert / edit
  action, a `sed -i`, or a shell redirect into a .py file; writing the agent's own scratch
  files is not an edit of the code: a file it creates (a create or write action, a `>`
  redirect) that no patch changes as an existing file, later edits of that file, and edits
  of test files (under tests/ or test/, test_*.py, *_test.py, conftest.py). So the usual
  "create reproduce.py, run it, then fix" passes, as it must.

A malformed file is refused naming the file, the line or field, and why (`MalformedFile`); an
instance the report does not list is refused by name unless `skip_missing`.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shlex
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.errors import MalformedFile, TraceGymError
from trace_gym.jsondata import loads
from trace_gym.trajectory import SCHEMA_VERSION, passed
from trace_gym.verdict import Check

ENV_ID = "swebench/verified"
"""The env id every imported record carries."""
DOMAIN = "coding"
"""The domain of every imported record."""
TASK_KIND = "swebench"
"""The task kind (and split) of every imported record."""

RUNNERS = re.compile(r"python[0-9.]*|pytest|py\.test|tox|nosetests")
"""Program names whose command runs code (`./script` runs code too)."""
RUN_TOOLS = frozenset({"run_tests", "run"})
"""Tool names whose call runs code when it carries no shell command."""
CREATES = frozenset({"create", "write"})
"""Editor commands that write a whole file."""
MODIFIES = frozenset({"str_replace", "insert", "edit", "append", "undo_edit", ""})
"""Editor commands that change part of a file ("" is OpenHands' LLM-based edit)."""
SWE_AGENT_TOOLS = frozenset({"str_replace_editor", "create", "edit", "insert", "append", "open", "goto",
                             "scroll_up", "scroll_down", "find_file", "search_dir", "search_file", "filemap",
                             "submit", "exit_forfeit", "view_image"})
"""SWE-agent's own commands (tools/*/config.yaml); any other action is a shell command."""
_WRAPPERS = frozenset({"sudo", "env", "time", "nohup", "exec", "command", "timeout"})
_SEPARATOR = re.compile(r"^[;&|()\n]+$")
_REDIRECTS = {">": "create", ">|": "create", "&>": "create", ">>": "modify", "&>>": "modify"}
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


# -- the evaluation report -------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """What the evaluation report says of one instance."""

    resolved: bool
    """Whether the harness counted the instance resolved."""
    tests: dict[str, dict[str, list[str]]] | None
    """report.json's tests_status (FAIL_TO_PASS / PASS_TO_PASS: success, failure), if given."""
    source: dict[str, Any]
    """The report's own entry for the instance (kept under the verdict's `source`)."""


@dataclass(frozen=True)
class Report:
    """An evaluation report: instance id -> outcome, and ids it names as not evaluated."""

    path: Path
    """Where it was read from."""
    outcomes: dict[str, Outcome]
    """The instances it grades."""
    not_evaluated: frozenset[str] = frozenset()
    """Instances it lists as never evaluated (a run summary's incomplete_ids)."""


SUMMARY_FAILED = ("unresolved_ids", "empty_patch_ids", "error_ids")
"""A run summary's lists of instances that were not resolved."""
SUMMARY_LISTS = ("resolved_ids", *SUMMARY_FAILED, "incomplete_ids", "completed_ids", "submitted_ids",
                 "infra_failure_ids", "ambiguous_failure_ids")
"""Every list of instance ids a run summary may hold (reporting.py, schema_version 2)."""


def _read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedFile(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedFile(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}); expected {what}") from None
    except ValueError as exc:
        raise MalformedFile(f"{path}: not valid JSON ({exc}); expected {what}") from None


def _id_list(path: Path, data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MalformedFile(f"{path}: field {key!r} must be a list of instance ids")
    return value


def _summary(path: Path, data: dict[str, Any]) -> Report:
    lists = {key: _id_list(path, data, key) for key in SUMMARY_LISTS}
    resolved = set(lists["resolved_ids"])
    failed: dict[str, str] = {}
    for key in SUMMARY_FAILED:
        for i in lists[key]:
            failed.setdefault(i, key)
    for key in ("completed_ids", "submitted_ids"):
        for i in lists[key]:
            if i not in resolved:
                failed.setdefault(i, key)
    both = sorted(resolved & failed.keys())
    if both:
        raise MalformedFile(f"{path}: instance {both[0]!r} is listed both in 'resolved_ids' and in "
                            f"{failed[both[0]]!r}")
    infra = set(lists["infra_failure_ids"])
    reasons = data.get("failure_reasons") if isinstance(data.get("failure_reasons"), dict) else {}
    outcomes = {}
    for i in sorted(resolved | failed.keys()):
        source: dict[str, Any] = {"report": "summary", "listed_in": "resolved_ids" if i in resolved else failed[i]}
        if i in infra:
            source["infra_failure"] = True
        if i in reasons:
            source["failure_reason"] = reasons[i]
        outcomes[i] = Outcome(i in resolved, None, source)
    not_evaluated = frozenset(set(lists["incomplete_ids"]) - outcomes.keys())
    return Report(path, outcomes, not_evaluated)


def _tests_status(path: Path, instance_id: str, status: Any) -> dict[str, dict[str, list[str]]] | None:
    if status is None:
        return None
    where = f"{path}: instance {instance_id!r}: tests_status"
    if not isinstance(status, dict):
        raise MalformedFile(f"{where} must be an object")
    out = {}
    for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if group not in status:
            continue
        part = status[group]
        if not isinstance(part, dict):
            raise MalformedFile(f"{where}.{group} must be an object with 'success' and 'failure'")
        for key in ("success", "failure"):
            tests = part.get(key, [])
            if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
                raise MalformedFile(f"{where}.{group}.{key} must be a list of test names")
        out[group] = {"success": list(part.get("success", [])), "failure": list(part.get("failure", []))}
    return out


def _per_instance(path: Path, data: dict[str, Any]) -> dict[str, Outcome]:
    outcomes = {}
    for instance_id, entry in data.items():
        if not isinstance(entry, dict):
            raise MalformedFile(f"{path}: instance {instance_id!r}: expected an object with 'resolved'")
        if not isinstance(entry.get("resolved"), bool):
            raise MalformedFile(f"{path}: instance {instance_id!r}: 'resolved' must be true or false, "
                                f"got {entry.get('resolved')!r}")
        tests = _tests_status(path, instance_id, entry.get("tests_status"))
        source = {"report": "instance", **{k: v for k, v in entry.items() if k != "tests_status"}}
        outcomes[instance_id] = Outcome(entry["resolved"], tests, source)
    return outcomes


def read_report(path: str | Path) -> Report:
    """The SWE-bench harness report at `path`: a run summary (`resolved_ids`, `unresolved_ids`,
    ...), a report.json (`{instance_id: {"resolved": ..., "tests_status": ...}}`), or a
    directory read as every report.json under it."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("report.json"))
        if not files:
            raise MalformedFile(f"{path}: no report.json under this directory")
        outcomes: dict[str, Outcome] = {}
        seen: dict[str, Path] = {}
        for f in files:
            data = _read_json(f, "a SWE-bench report.json")
            if not isinstance(data, dict) or "resolved_ids" in data:
                raise MalformedFile(f"{f}: not a per-instance report.json ({{instance_id: {{'resolved': ...}}}})")
            for instance_id, outcome in _per_instance(f, data).items():
                if instance_id in seen:
                    raise MalformedFile(f"{f}: instance {instance_id!r} is graded in {seen[instance_id]} too")
                seen[instance_id] = f
                outcomes[instance_id] = outcome
        return Report(path, outcomes)
    data = _read_json(path, "a SWE-bench evaluation report")
    if isinstance(data, dict) and "resolved_ids" in data:
        return _summary(path, data)
    if isinstance(data, dict) and data and all(isinstance(v, dict) and "resolved" in v for v in data.values()):
        return Report(path, _per_instance(path, data))
    raise MalformedFile(f"{path}: not a SWE-bench evaluation report (expected a run summary with 'resolved_ids' "
                        "and 'unresolved_ids', or a report.json of {instance_id: {'resolved': true|false, ...}})")



def _json_lines(path: Path, what: str, shape: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a JSON-lines file; a file that cannot be
    read, a line that is not JSON or not an object is refused naming the file and the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise MalformedFile(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except ValueError as exc:
            raise MalformedFile(f"{path}: line {number}: not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise MalformedFile(f"{path}: line {number}: not {shape}")
        yield number, row

def read_dataset(path: str | Path) -> dict[str, str]:
    """instance_id -> gold patch, from a SWE-bench dataset JSONL (one instance a line, with
    `instance_id` and `patch`)."""
    path = Path(path)
    gold: dict[str, str] = {}
    for number, row in _json_lines(path, "a SWE-bench dataset file", "a JSON object"):
        if not isinstance(row.get("instance_id"), str) or not isinstance(row.get("patch"), str):
            raise MalformedFile(f"{path}: line {number}: needs a string 'instance_id' and a string 'patch'")
        gold[row["instance_id"]] = row["patch"]
    return gold


# -- patches ---------------------------------------------------------------------------------------

_DIFF_GIT = re.compile(r"^diff --git a/(.+?) b/(.+)$")


def patch_files(patch: str | None) -> dict[str, str]:
    """The files a unified diff changes: path -> "modified", "added" or "deleted"."""
    files: dict[str, str] = {}
    current: str | None = None
    git = False
    for raw in (patch or "").splitlines():
        line = raw.rstrip("\r")
        m = _DIFF_GIT.match(line)
        if m:
            git, current = True, m.group(2)
            files[current] = "modified"
        elif current is not None and (line.startswith("new file mode") or line == "--- /dev/null"):
            files[current] = "added"
        elif current is not None and (line.startswith("deleted file mode") or line == "+++ /dev/null"):
            files[current] = "deleted"
        elif not git and line.startswith("+++ b/"):
            files[line[len("+++ b/"):].split("\t")[0]] = "modified"
    return files


def _same_file(path: str, repo_path: str) -> bool:
    """Whether a path the agent named (absolute, or relative to where it worked) is the
    repository's `repo_path`."""
    p = path.strip().strip("'\"")
    while p.startswith("./"):
        p = p[2:]
    return bool(p) and (p == repo_path or p.endswith("/" + repo_path) or
                        (not p.startswith("/") and repo_path.endswith("/" + p)))


def _is_test_file(path: str) -> bool:
    parts = PurePosixPath(path).parts
    name = parts[-1] if parts else ""
    return (bool({"tests", "test"} & set(parts[:-1])) or name == "conftest.py"
            or (name.startswith("test_") and name.endswith(".py")) or name.endswith("_test.py"))


# -- what the agent did ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Action:
    """One thing the agent did, reduced to what the `reproduced` check reads."""

    tool: str
    """The tool or command name ("bash" for a shell command)."""
    command: str = ""
    """The shell text, for an action that ran a shell command."""
    path: str = ""
    """The file an editor action names."""
    edit: str = ""
    """"create" (writes a whole file), "modify" (changes part of one) or "" (no edit)."""


@dataclass(frozen=True)
class Effect:
    """What an action does, in order: runs code, or writes a file."""

    kind: str
    """"run", "create" or "modify"."""
    path: str = ""
    """The file written ("" when unknown)."""
    text: str = ""
    """The command or tool that did it, for the check's detail."""


def _heredoc_free(command: str) -> str:
    """The command without the bodies of its here-documents (text, not commands)."""
    out, end = [], None
    for line in command.split("\n"):
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        out.append(line)
        m = _HEREDOC.search(line)
        if m:
            end = m.group(2)
    return "\n".join(out)


def _tokens(text: str) -> list[str]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars="();<>|&\n")
    lexer.whitespace = " \t\r"
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:  # an unclosed quote: words split on white space, no operators
        return text.split()


def _segments(command: str) -> list[list[str]]:
    """The simple commands of a shell command line, as token lists."""
    segments: list[list[str]] = [[]]
    for token in _tokens(_heredoc_free(command)):
        if _SEPARATOR.match(token):
            segments.append([])
        else:
            segments[-1].append(token)
    return [s for s in segments if s]


def _program(tokens: list[str]) -> list[str]:
    """The tokens from the program name on (assignments and wrappers such as sudo skipped)."""
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if _ASSIGNMENT.match(t):
            i += 1
        elif t in _WRAPPERS:
            i += 1
            if t == "timeout":
                while i < len(tokens) and tokens[i].startswith("-"):
                    i += 1
                i += 1  # the duration
        else:
            break
    return tokens[i:]


def _runs_code(tokens: list[str]) -> bool:
    words = _program(tokens)
    if not words:
        return False
    name = PurePosixPath(words[0]).name
    if RUNNERS.fullmatch(name):
        return not (name.startswith("python") and words[1:3] == ["-m", "pip"])
    return words[0].startswith("./") and len(words[0]) > 2


def _sed_targets(words: list[str]) -> list[str] | None:
    """The files a `sed -i` edits, or None when it is no in-place sed."""
    if not words or PurePosixPath(words[0]).name != "sed":
        return None
    args = words[1:]
    if not any(a == "--in-place" or a.startswith("--in-place=") or re.match(r"^-[A-Za-z]*i", a) for a in args):
        return None
    script_given, files, skip = False, [], False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-e", "-f", "--expression", "--file"):
            script_given, skip = True, True
        elif a.startswith(("--expression=", "--file=")):
            script_given = True
        elif a.startswith("-") and a != "-":
            continue
        elif not script_given:
            script_given = True  # the script itself
        else:
            files.append(a)
    return files


def shell_effects(command: str) -> list[Effect]:
    """What a shell command line does that the `reproduced` check reads, in order: code it
    runs, in-place seds, redirects into .py files."""
    out: list[Effect] = []
    for tokens in _segments(command):
        text = " ".join(tokens)[:120]
        if _runs_code(tokens):
            out.append(Effect("run", "", text))
        targets = _sed_targets(_program(tokens))
        for target in targets or []:
            out.append(Effect("modify", target, text))
        for op, target in itertools.pairwise(tokens):
            if op in _REDIRECTS and target.endswith(".py"):
                out.append(Effect(_REDIRECTS[op], target, text))
    return out


def effects(action: Action) -> list[Effect]:
    """What one action does that the `reproduced` check reads."""
    if action.command:
        return shell_effects(action.command)
    if action.edit:
        return [Effect(action.edit, action.path, f"{action.tool} {action.path}".strip())]
    if action.tool in RUN_TOOLS:
        return [Effect("run", "", action.tool)]
    return []


def localized_check(patch: str | None, gold: str | None) -> Check | None:
    """`localized`: the agent's patch changes every file of the gold patch; None when no gold
    patch is known."""
    needed = set(patch_files(gold)) if gold is not None else set()
    if not needed:
        return None
    missing = sorted(needed - set(patch_files(patch)))
    detail = (f"the patch changes every file of the fix ({', '.join(sorted(needed))})" if not missing
              else f"the patch leaves out {', '.join(missing)}")
    return Check("localized", not missing, 0.0, detail)


def reproduced_check(actions: Iterable[Action], repo_files: Iterable[str] = ()) -> Check:
    """`reproduced`: the agent ran code before its first edit of the code (the module docstring's
    rule). `repo_files`: files known to exist in the repository or to belong to the fix (an
    edit of one is always an edit of the code)."""
    repo = list(repo_files)
    scratch: list[str] = []
    ran: Effect | None = None
    for action in actions:
        for effect in effects(action):
            if effect.kind == "run":
                ran = ran or effect
                continue
            path = effect.path
            own = bool(path) and not any(_same_file(path, r) for r in repo) and (
                _is_test_file(path) or effect.kind == "create" or any(_same_file(path, s) for s in scratch))
            if own:
                if effect.kind == "create":
                    scratch.append(path)
                continue
            where = path or "a file"
            if ran:
                return Check("reproduced", True, 0.0, f"ran `{ran.text}` before the first edit ({where})")
            return Check("reproduced", False, 0.0, f"no code was run before the first edit ({where})")
    if ran:
        return Check("reproduced", True, 0.0, f"ran `{ran.text}`; no edit of the code")
    return Check("reproduced", False, 0.0, "no code was run, and no edit of the code made")


# -- one run, read from its source -----------------------------------------------------------------

@dataclass
class Run:
    """One agent run on one SWE-bench instance, as read from its source file."""

    instance_id: str
    """The SWE-bench instance."""
    source: str
    """Where it was read (a file, with its line for a JSONL row)."""
    agent: str
    """The agent ("swe-agent", "openhands/CodeActAgent")."""
    model: str | None
    """The model, from the source's metadata."""
    messages: list[dict[str, Any]]
    """The conversation in the OpenAI wire format."""
    actions: list[Action]
    """What the agent did, in order."""
    patch: str | None
    """The agent's patch (its submission)."""
    gold_patch: str | None = None
    """The reference fix, when the source carries it."""
    instructions: str = ""
    """The issue text the agent was given."""
    termination_reason: str | None = None
    """Why the run ended."""
    total_s: float | None = None
    """Seconds the run took, when the source says."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else of the source worth keeping in the record."""


def _text(content: Any) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text")
    return "" if content is None else str(content)


def _arguments(value: Any) -> str:
    """Tool-call arguments as a JSON object's text (text that is no object is kept under 'input')."""
    if isinstance(value, dict):
        return json.dumps(value)
    if isinstance(value, str):
        try:
            if isinstance(loads(value), dict):
                return value
        except ValueError:
            pass
    return json.dumps({"input": value})


def _wire_call(call: Any, fallback_id: str) -> dict[str, Any] | None:
    if not isinstance(call, dict):
        return None
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    name = fn.get("name")
    if not isinstance(name, str):
        return None
    call_id = call.get("id") if isinstance(call.get("id"), str) else fallback_id
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": _arguments(fn.get("arguments"))}}


def _swe_agent_tool(action: str) -> str:
    word = action.strip().split(maxsplit=1)[0] if action.strip() else ""
    return word if word in SWE_AGENT_TOOLS else "bash"


def _state(step: dict[str, Any]) -> dict[str, Any]:
    state = step.get("state")
    if isinstance(state, str):
        try:
            state = loads(state)
        except ValueError:
            return {}
    return state if isinstance(state, dict) else {}


def _swe_agent_actions(steps: list[dict[str, Any]]) -> list[Action]:
    actions: list[Action] = []
    open_file = ""
    for step in steps:
        text = (step.get("action") or "").strip()
        if not text:
            continue
        state_file = _state(step).get("open_file")
        word, _, rest = text.partition(" ")
        word = word.split("\n")[0]
        args = rest.split()
        if word in ("open", "create") and args:
            target = args[0].strip("'\"")
            actions.append(Action(word, path=target, edit="create") if word == "create" else Action(word))
            open_file = target
        elif word in ("edit", "insert", "append"):
            target = state_file if isinstance(state_file, str) and state_file not in ("", "n/a") else open_file
            actions.append(Action(word, path=target, edit="modify"))
        elif word == "str_replace_editor" and len(args) >= 2:
            sub, target = args[0], args[1].strip("'\"")
            edit = "create" if sub in CREATES else "modify" if sub in MODIFIES - {""} else ""
            actions.append(Action(word, path=target if edit else "", edit=edit))
        elif word in SWE_AGENT_TOOLS:
            actions.append(Action(word))
        else:
            actions.append(Action("bash", command=text))
    return actions


def _swe_agent_model(data: dict[str, Any]) -> str | None:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads(config)
        except ValueError:
            return None
    agent = (config or {}).get("agent") if isinstance(config, dict) else None
    if not isinstance(agent, dict):
        return None
    models = [agent.get("model")] + [c.get("model") for c in agent.get("agent_configs") or [] if isinstance(c, dict)]
    return next((m["name"] for m in models if isinstance(m, dict) and isinstance(m.get("name"), str)), None)


def _swe_agent_instructions(data: dict[str, Any], history: list[dict[str, Any]]) -> str:
    config = data.get("replay_config")
    if isinstance(config, str):
        try:
            config = loads(config)
        except ValueError:
            config = None
    statement = (config or {}).get("problem_statement") if isinstance(config, dict) else None
    if isinstance(statement, dict) and isinstance(statement.get("text"), str):
        return statement["text"]
    return next((_text(m.get("content")) for m in history if m.get("role") == "user" and not m.get("is_demo")), "")


def _swe_agent_messages(history: list[dict[str, Any]], steps: list[dict[str, Any]],
                        instructions: str) -> list[dict[str, Any]]:
    """The chat: SWE-agent's history as it is where it has function calls; else its head
    (system prompt, the issue) and one tool call per trajectory step."""
    live = [m for m in history if not m.get("is_demo")]
    if any(m.get("role") == "assistant" and m.get("tool_calls") for m in live):
        out: list[dict[str, Any]] = []
        for i, m in enumerate(live):
            role = m.get("role")
            if role == "assistant":
                calls = [c for j, tc in enumerate(m.get("tool_calls") or [])
                         if (c := _wire_call(tc, f"call_{i}_{j}")) is not None]
                msg: dict[str, Any] = {"role": "assistant", "content": _text(m.get("content"))}
                if calls:
                    msg["tool_calls"] = calls
                out.append(msg)
            elif role == "tool":
                ids = m.get("tool_call_ids") or [m.get("tool_call_id")]
                call_id = ids[0] if ids and isinstance(ids[0], str) else ""
                out.append({"role": "tool", "tool_call_id": call_id, "content": _text(m.get("content"))})
            elif role in ("system", "user"):
                out.append({"role": role, "content": _text(m.get("content"))})
        return out
    head: list[dict[str, Any]] = []
    for m in live:
        if m.get("role") not in ("system", "user"):
            break
        head.append({"role": m["role"], "content": _text(m.get("content"))})
    if not head and instructions:
        head = [{"role": "user", "content": instructions}]
    out = head
    for i, step in enumerate(steps):
        action = step.get("action") or ""
        thought = _text(step.get("thought") or step.get("response") or "")
        if not action.strip():
            out.append({"role": "assistant", "content": _text(step.get("response")) or thought})
            continue
        call_id = f"call_{i}_0"
        out.append({"role": "assistant", "content": thought, "tool_calls": [{
            "id": call_id, "type": "function",
            "function": {"name": _swe_agent_tool(action), "arguments": json.dumps({"command": action})}}]})
        out.append({"role": "tool", "tool_call_id": call_id, "content": _text(step.get("observation"))})
    return out


def read_swe_agent(path: str | Path) -> Run:
    """One SWE-agent `.traj` file (the instance id is its name)."""
    path = Path(path)
    data = _read_json(path, "a SWE-agent trajectory (.traj)")
    if not isinstance(data, dict):
        raise MalformedFile(f"{path}: not a SWE-agent trajectory (expected a JSON object)")
    steps = data.get("trajectory")
    if not isinstance(steps, list):
        raise MalformedFile(f"{path}: not a SWE-agent trajectory: no 'trajectory' list of steps")
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise MalformedFile(f"{path}: trajectory[{i}] is not a step object")
        for key in ("action", "observation", "thought", "response"):
            if step.get(key) is not None and not isinstance(step[key], str):
                raise MalformedFile(f"{path}: trajectory[{i}].{key} must be a string")
    history = data.get("history", [])
    if history is None:
        history = []
    if not isinstance(history, list) or not all(isinstance(m, dict) for m in history):
        raise MalformedFile(f"{path}: 'history' must be a list of message objects")
    info = data.get("info", {}) or {}
    if not isinstance(info, dict):
        raise MalformedFile(f"{path}: 'info' must be an object")
    submission = info.get("submission")
    if submission is not None and not isinstance(submission, str):
        raise MalformedFile(f"{path}: info.submission must be the patch text or null")
    instructions = _swe_agent_instructions(data, history)
    times = [s.get("execution_time") for s in steps]
    total = sum(t for t in times if isinstance(t, (int, float))) if any(isinstance(t, (int, float)) for t in times) \
        else None
    exit_status = info.get("exit_status")
    return Run(
        instance_id=path.stem, source=str(path), agent="swe-agent", model=_swe_agent_model(data),
        messages=_swe_agent_messages(history, steps, instructions), actions=_swe_agent_actions(steps),
        patch=submission, instructions=instructions,
        termination_reason=str(exit_status) if exit_status is not None else None, total_s=total)


# OpenHands

_BOOKKEEPING = frozenset({"thought", "is_input", "blocking", "is_static", "cwd", "hidden", "confirmation_state",
                          "security_risk", "impl_source", "kernel_init_code", "include_extra", "wait_for_response",
                          "image_urls", "file_urls", "start", "end", "view_range", "content"})
_DEFAULT_TOOL = {"run": "execute_bash", "run_ipython": "execute_ipython_cell", "edit": "str_replace_editor",
                 "read": "str_replace_editor", "write": "str_replace_editor", "think": "think", "finish": "finish",
                 "browse": "browser", "browse_interactive": "browser", "call_tool_mcp": "mcp"}
_SKIPPED_ACTIONS = frozenset({"recall", "condensation", "condensation_request", "change_agent_state", "null",
                              "pause", "resume", "stop", "push", "send_pr", "task_tracking", "loop_recovery"})
_SKIPPED_OBSERVATIONS = frozenset({"recall", "agent_state_changed", "null", "condense", "user_rejected"})


def _model_arguments(metadata: dict[str, Any], call_id: str) -> str | None:
    """A tool call's arguments as the model wrote them (the metadata's model_response), when
    they are a JSON object."""
    response = metadata.get("model_response")
    choices = response.get("choices") if isinstance(response, dict) else None
    for choice in choices if isinstance(choices, list) else []:
        message = choice.get("message") if isinstance(choice, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and call.get("id") == call_id and isinstance(fn.get("arguments"), str):
                try:
                    return fn["arguments"] if isinstance(loads(fn["arguments"]), dict) else None
                except ValueError:
                    return None
    return None


def _openhands_arguments(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    if kind == "run":
        return {"command": args.get("command", "")}
    if kind == "run_ipython":
        return {"code": args.get("code", "")}
    if kind == "read":
        return {"command": "view", "path": args.get("path", "")}
    if kind == "finish":
        return {"message": args.get("final_thought") or args.get("outputs") or ""}
    if kind == "think":
        return {"thought": args.get("thought", "")}
    out = {k: v for k, v in args.items() if k not in _BOOKKEEPING and v is not None}
    if kind in ("edit", "write") and args.get("content"):
        out["content"] = args["content"]
    return out


def _openhands_action(kind: str, args: dict[str, Any], tool: str) -> Action | None:
    if kind == "run":
        return Action(tool, command=str(args.get("command") or ""))
    if kind == "edit":
        sub = str(args.get("command") or "")
        edit = "create" if sub in CREATES else "modify" if sub in MODIFIES else ""
        return Action(tool, path=str(args.get("path") or ""), edit=edit)
    if kind == "write":
        return Action(tool, path=str(args.get("path") or ""), edit="create")
    if kind in ("message", "system", "finish", "think", "read"):
        return None
    return Action(tool)


def _events(path: Path, number: int, history: list[Any]) -> list[dict[str, Any]]:
    """The events of a history, the older [action, observation] pairs flattened (the
    observation's cause set to its action where it has none)."""
    events: list[dict[str, Any]] = []
    for i, item in enumerate(history):
        pair = item if isinstance(item, list) else [item]
        if isinstance(item, list) and (len(item) != 2 or not all(isinstance(e, dict) for e in item)):
            raise MalformedFile(f"{path}: line {number}: history[{i}] is neither an event nor an "
                                "[action, observation] pair")
        for j, event in enumerate(pair):
            if not isinstance(event, dict) or not ("action" in event or "observation" in event):
                raise MalformedFile(f"{path}: line {number}: history[{i}] is not an event (an object with "
                                    "'action' or 'observation')")
            if isinstance(item, list):
                event = {**event, "_pair": i}
                if j == 1 and "cause" not in event:
                    event["_pair_cause"] = True
            events.append(event)
    return events


def _openhands_conversation(path: Path, number: int, history: list[Any]) -> tuple[list[dict[str, Any]], list[Action]]:
    messages: list[dict[str, Any]] = []
    actions: list[Action] = []
    call_of: dict[Any, str] = {}
    last_call: dict[int, str] = {}
    for k, event in enumerate(_events(path, number, history)):
        if "action" in event:
            kind = event.get("action")
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            if kind in _SKIPPED_ACTIONS:
                continue
            source = event.get("source")
            if kind == "system":
                messages.append({"role": "system", "content": _text(args.get("content") or event.get("message"))})
                continue
            if kind == "message":
                role = "user" if source == "user" else "assistant"
                messages.append({"role": role, "content": _text(args.get("content") or event.get("message"))})
                continue
            metadata = event.get("tool_call_metadata") if isinstance(event.get("tool_call_metadata"), dict) else {}
            tool = metadata.get("function_name") if isinstance(metadata.get("function_name"), str) else \
                _DEFAULT_TOOL.get(kind, str(kind))
            call_id = metadata.get("tool_call_id") if isinstance(metadata.get("tool_call_id"), str) else \
                f"call_{event.get('id', k)}"
            if kind in ("finish", "think") and not metadata:
                text = args.get("final_thought") or args.get("thought") or event.get("message") or ""
                messages.append({"role": "assistant", "content": _text(text)})
                continue
            arguments = _model_arguments(metadata, call_id) or json.dumps(_openhands_arguments(kind, args))
            thought = args.get("thought")
            messages.append({"role": "assistant", "content": _text(thought) if thought else None, "tool_calls": [{
                "id": call_id, "type": "function", "function": {"name": tool, "arguments": arguments}}]})
            if "id" in event:
                call_of[event["id"]] = call_id
            if "_pair" in event:
                last_call[event["_pair"]] = call_id
            action = _openhands_action(str(kind), args, tool)
            if action is not None:
                actions.append(action)
        else:
            if event.get("observation") in _SKIPPED_OBSERVATIONS:
                continue
            call_id = call_of.get(event.get("cause"))
            if call_id is None and event.get("_pair_cause"):
                call_id = last_call.get(event["_pair"])
            if call_id is None:
                metadata = event.get("tool_call_metadata")
                call_id = metadata.get("tool_call_id") if isinstance(metadata, dict) else None
            if not isinstance(call_id, str):
                continue  # an observation that answers no call the agent made
            messages.append({"role": "tool", "tool_call_id": call_id, "content": _text(event.get("content"))})
    return messages, actions


def _openhands_termination(history_events: list[Any], error: Any) -> str | None:
    finished = any(isinstance(e, dict) and e.get("action") == "finish"
                   for item in history_events for e in (item if isinstance(item, list) else [item]))
    if finished:
        return "submitted"
    if isinstance(error, str) and error:
        return "max_steps" if "maximum iteration" in error else "error"
    return None


def read_openhands(path: str | Path) -> Iterator[Run]:
    """The runs of an OpenHands SWE-bench `output.jsonl` (one EvalOutput a line)."""
    path = Path(path)
    for number, row in _json_lines(path, "an OpenHands output.jsonl", "a JSON object (an OpenHands EvalOutput)"):
        instance_id = row.get("instance_id")
        if not isinstance(instance_id, str) or not instance_id:
            raise MalformedFile(f"{path}: line {number}: no 'instance_id'")
        history = row.get("history")
        if not isinstance(history, list):
            raise MalformedFile(f"{path}: line {number}: 'history' must be a list of events")
        test_result = row.get("test_result") or {}
        if not isinstance(test_result, dict):
            raise MalformedFile(f"{path}: line {number}: 'test_result' must be an object")
        patch = test_result.get("git_patch")
        if patch is not None and not isinstance(patch, str):
            raise MalformedFile(f"{path}: line {number}: test_result.git_patch must be the patch text or null")
        instance = row.get("instance") if isinstance(row.get("instance"), dict) else {}
        metadata = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        llm = metadata.get("llm_config") if isinstance(metadata.get("llm_config"), dict) else {}
        messages, actions = _openhands_conversation(path, number, history)
        gold = instance.get("patch")
        instructions = instance.get("problem_statement") or row.get("instruction") or ""
        agent_class = metadata.get("agent_class")
        extra = {"agent_error": row["error"]} if isinstance(row.get("error"), str) and row["error"] else {}
        yield Run(
            instance_id=instance_id, source=f"{path}:{number}",
            agent=f"openhands/{agent_class}" if isinstance(agent_class, str) else "openhands",
            model=llm.get("model") if isinstance(llm.get("model"), str) else None,
            messages=messages, actions=actions, patch=patch, gold_patch=gold if isinstance(gold, str) else None,
            instructions=_text(instructions), termination_reason=_openhands_termination(history, row.get("error")),
            extra=extra)


# -- records -----------------------------------------------------------------------------------------

def record_id(instance_id: str) -> str:
    """The record id of an instance's run: `swebench/verified/<instance_id>/0`."""
    return f"{ENV_ID}/{instance_id}/0"


def _test_checks(tests: dict[str, dict[str, list[str]]] | None) -> list[Check]:
    if not tests:
        return []
    named = [(prefix, test, ok) for group, prefix in (("FAIL_TO_PASS", "f2p"), ("PASS_TO_PASS", "p2p"))
             for key, ok in (("success", True), ("failure", False)) for test in (tests.get(group) or {}).get(key, [])]
    return [Check(f"{prefix}:{test}", ok, 1.0 / len(named) if ok else 0.0, "" if ok else "fails after the patch")
            for prefix, test, ok in named]


def record(run: Run, outcome: Outcome, gold_patch: str | None = None) -> dict[str, Any]:
    """The trajectory record of one run graded by the report (the module docstring's fields)."""
    reward = 1.0 if outcome.resolved else 0.0
    checks = _test_checks(outcome.tests) or [
        Check("resolved", outcome.resolved, reward, "the harness says resolved" if outcome.resolved
              else f"not resolved ({outcome.source.get('listed_in', 'report.json')})")]
    gold = run.gold_patch if run.gold_patch is not None else gold_patch
    localized = localized_check(run.patch, gold)
    if localized is not None:
        checks.append(localized)
    repo_files = set(patch_files(gold)) | {p for p, s in patch_files(run.patch).items() if s != "added"}
    checks.append(reproduced_check(run.actions, repo_files))
    policy = "/".join(x for x in (run.agent, run.model) if x)
    out = {
        "schema_version": SCHEMA_VERSION,
        "id": record_id(run.instance_id),
        "env_id": ENV_ID,
        "env_sha256": None,
        "seed": None,
        "sample": 0,
        "split": TASK_KIND,
        "policy": policy,
        "model": run.model,
        "domain": DOMAIN,
        "task_id": run.instance_id,
        "hint": False,
        "messages": run.messages,
        "reward": reward,
        "passed": passed(reward),
        "verdict": {"score": reward, "checks": [c._asdict() for c in checks], "source": outcome.source},
        "task_kind": TASK_KIND,
        "capabilities_needed": list(cap.CODING),
        "termination_reason": run.termination_reason,
        "instructions": run.instructions,
        "timings": {"total_s": run.total_s},
    }
    return out | run.extra


# -- files -------------------------------------------------------------------------------------------

def source_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files to read: .traj files and output.jsonl files as given, and every .traj under
    a directory (a RetryAgent's `attempt_<n>/` copies left out: the chosen attempt is the
    instance's own .traj)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = [p for p in sorted(path.rglob("*.traj"))
                     if not any(re.fullmatch(r"attempt_\d+", part) for part in p.relative_to(path).parts[:-1])]
            if not found:
                raise TraceGymError(f"{path}: no .traj files under this directory")
            out.extend(found)
        elif not path.exists():
            raise TraceGymError(f"{path}: no such file or directory")
        elif path.suffix in (".traj", ".jsonl"):
            out.append(path)
        else:
            raise TraceGymError(f"{path}: expected a SWE-agent .traj file, a directory of them, or an OpenHands "
                                "output.jsonl")
    return out


def read_runs(path: Path) -> Iterator[Run]:
    """The runs of one source file (.traj: SWE-agent; .jsonl: OpenHands)."""
    if path.suffix == ".traj":
        yield read_swe_agent(path)
    else:
        yield from read_openhands(path)


@dataclass
class Imported:
    """What an import gives: the records, and the instances left out for want of a grade."""

    records: list[dict[str, Any]]
    """One trajectory record per run."""
    skipped: list[str]
    """Instance ids the report does not grade (left out under `skip_missing`)."""


def import_runs(paths: Iterable[str | Path], report: str | Path, dataset: str | Path | None = None,
                skip_missing: bool = False) -> Imported:
    """The records of every run in `paths` (SWE-agent .traj files or directories of them,
    OpenHands output.jsonl files), graded by the report at `report`; `dataset` gives gold
    patches. An instance the report does not grade is refused by name, or left out under
    `skip_missing`; one instance read twice is refused."""
    graded = read_report(report)
    gold = read_dataset(dataset) if dataset is not None else {}
    records: list[dict[str, Any]] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    for path in source_files(paths):
        for run in read_runs(path):
            if run.instance_id in seen:
                raise TraceGymError(f"{run.source}: instance {run.instance_id!r} was read from {seen[run.instance_id]} "
                                    "too (one run per instance per import)")
            seen[run.instance_id] = run.source
            outcome = graded.outcomes.get(run.instance_id)
            if outcome is None:
                if skip_missing:
                    skipped.append(run.instance_id)
                    continue
                why = ("lists it as not evaluated (incomplete_ids)" if run.instance_id in graded.not_evaluated
                       else "does not grade it")
                raise TraceGymError(f"{run.source}: instance {run.instance_id!r}: the report {graded.path} {why} "
                                    "(--skip-missing leaves such instances out)")
            records.append(record(run, outcome, gold.get(run.instance_id)))
    return Imported(records, skipped)


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write the records as JSON Lines through a temporary file and a rename: `path` holds the
    old file or the whole new one, never part of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide it from other users (a sandbox's)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
