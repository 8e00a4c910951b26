"""The coding verifiers: the hidden tests of a fix, and the two versions of the package that
a reproduction test must tell apart.

`hidden_outcomes` copies the agent's package (its .py files only: nothing else of the
repository, so no file the agent placed where tests might go is read) into a fresh
sandbox, adds nothing of the hidden tests but their inputs (sent on stdin), and reads back
one outcome per call through the runner's marked lines (`trace_gym.sandbox.runner`). The
verdict is made here, comparing each with the expected outcome computed from trace-gym's own
correct package, which never enters the sandbox. A missing, repeated or malformed result
line fails its test.

`verify_fix` is coding-v0's verifier: reward 1.0 when every hidden test (FAIL_TO_PASS and
PASS_TO_PASS) passes, else 0; two checks of credit 0 record what the labeller reads
(`localized`: the agent changed the file holding the bug; `reproduced`: it ran the package's
code before its first edit).
"""

from __future__ import annotations

import json
import re
from typing import Any

from trace_gym import messages as msg
from trace_gym.coding.repo import CodingTask, HiddenTest, same_outcome
from trace_gym.coding.tools import EDITS
from trace_gym.coding.workspace import Repo
from trace_gym.sandbox.runner import MARK
from trace_gym.sandbox.workspace import run, runner_argv
from trace_gym.verdict import Check, Verdict


def package_files(task: CodingTask, files: dict[str, str]) -> dict[str, str]:
    """The package's own .py files of a repository (what a verifier copies)."""
    prefix = task.package + "/"
    return {p: t for p, t in files.items() if p.startswith(prefix) and p.endswith(".py")}


MAX_DEPTH = 64
"""How deeply a result record may nest; a deeper one is unreadable (so its test fails)."""


def _nesting(text: str) -> int:
    """How deeply the JSON in `text` nests, counted on its brackets (strings skipped), so
    that a line nested 30,000 deep is refused before a recursive parser meets it."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def marked_lines(stdout: str) -> list[dict[str, Any]]:
    """The runner's result records in `stdout` (lines starting with its mark); others, and
    records that are not JSON objects nested at most MAX_DEPTH deep, are ignored."""
    records = []
    for line in stdout.split("\n"):  # not splitlines(): it splits at the mark (\x1e) too
        if line.startswith(MARK):
            body = line[len(MARK):]
            if ("[" in body or "{" in body) and _nesting(body) > MAX_DEPTH:
                continue
            try:
                record = json.loads(body)
            except (ValueError, RecursionError):
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def hidden_outcomes(task: CodingTask, files: dict[str, str],
                    tests: tuple[HiddenTest, ...] | None = None) -> tuple[list[dict[str, Any] | None], str]:
    """The outcome of each hidden test's call on the package in `files` (None: no single
    well-formed result came back), and the runner's one-line status."""
    tests = task.hidden_tests if tests is None else tests
    request = {"package": task.package, "calls": [[t.module, t.function, t.args] for t in tests]}
    result, _, _ = run(package_files(task, files), runner_argv("calls"), stdin=json.dumps(request).encode(),
                       keep=False)
    by_index: dict[int, list[dict[str, Any]]] = {}
    for record in marked_lines(result.stdout):
        i = record.get("i")
        if type(i) is int and 0 <= i < len(tests) and ("value" in record) != ("raises" in record):
            by_index.setdefault(i, []).append(
                {"value": record["value"]} if "value" in record else {"raises": str(record["raises"])})
    outcomes = [found[0] if len(found) == 1 else None for found in (by_index.get(i, []) for i in range(len(tests)))]
    return outcomes, result.describe().splitlines()[0]


def test_checks(task: CodingTask, files: dict[str, str]) -> list[Check]:
    """One check per hidden test, named 'f2p:<test>' or 'p2p:<test>'."""
    outcomes, status = hidden_outcomes(task, files)
    checks = []
    for test, got in zip(task.hidden_tests, outcomes):
        passed = got is not None and same_outcome(got, test.expected)
        detail = ("" if passed else
                  f"expected {json.dumps(test.expected)}, got {json.dumps(got) if got else 'no result (' + status + ')'}")
        checks.append(Check(f"{test.group}:{test.name}", passed, 1.0 / len(task.hidden_tests), detail[:300]))
    return checks


_RUNS_CODE = re.compile(r"(^|[;&|(]|&&|\|\|)\s*(python3?|pytest|tox|nosetests|\./)")
"""A command word that runs code: at the start of the command or after ; & | ( (not "echo python")."""
_RUNS_TESTS = re.compile(r"(^|[;&|(]|&&|\|\||-m\s)\s*(pytest|tox|nosetests)\b")
_SCRIPT = re.compile(r"[\w./-]+\.(?:py|sh)\b")


def _runs_package(package: str, name: str, arguments: Any, files: dict[str, str]) -> bool:
    """A call that runs the package's code: run_tests; a command running the test tools
    (pytest, tox, nose: the repository's tests import the package); or a command running
    Python or a ./script whose text, or that of a script it names (as `files` holds it then),
    names the package (`python -c pass` runs no code of the package; `ls` or `cat` is
    reading, not reproducing)."""
    if name == "run_tests":
        return True
    command = arguments.get("command") if isinstance(arguments, dict) else None
    if name != "run_command" or not isinstance(command, str) or not _RUNS_CODE.search(command):
        return False
    if _RUNS_TESTS.search(command):
        return True
    mentions = re.compile(rf"\b{re.escape(package)}\b")
    if mentions.search(command):
        return True
    for path in _SCRIPT.findall(command):
        text = files.get(path.removeprefix("./").removeprefix("/repo/"))
        if isinstance(text, str) and mentions.search(text):
            return True
    return False


def _edits_code(task: CodingTask, name: str, arguments: Any) -> bool:
    """A call that changes the package's code (an agent's own scratch or test file is not one)."""
    path = arguments.get("path") if isinstance(arguments, dict) else None
    return name in EDITS and isinstance(path, str) and path.lstrip("./").startswith(task.package + "/")


def process_checks(task: CodingTask, initial: Repo, final: Repo, messages: list[dict[str, Any]]) -> list[Check]:
    """The two informational checks (credit 0) the programmatic labeller reads, with the
    meaning `trace_gym.swebench` gives them for imported runs: `localized`, the file holding
    the bug changed; `reproduced`, the package's code ran before its first edit."""
    changed = initial.files.get(task.bug_file) != final.files.get(task.bug_file)
    calls = [(name, args) for m in messages if m.get("role") == "assistant" for name, args in msg.tool_calls_of(m)]
    first_edit = next((i for i, (n, a) in enumerate(calls) if _edits_code(task, n, a)), len(calls))
    files, ran_first = dict(initial.files), False
    for name, args in calls[:first_edit]:
        # a create_file whose content is no text is refused by the tool: the file keeps what it held
        if (name == "create_file" and isinstance(args, dict) and isinstance(args.get("path"), str)
                and isinstance(args.get("content"), str)):
            files[args["path"].removeprefix("./")] = args["content"]
        elif _runs_package(task.package, name, args, files):
            ran_first = True
            break
    return [Check("localized", changed, 0.0, f"the bug is in {task.bug_file}"),
            Check("reproduced", ran_first, 0.0, "the code ran before its first edit" if ran_first
                  else "the code did not run before its first edit")]


def verify_fix(task: CodingTask, initial: Repo, final: Repo, messages: list[dict[str, Any]]) -> Verdict:
    """coding-v0's verdict: 1.0 when every hidden test passes, else 0."""
    tests = test_checks(task, final.files)
    score = 1.0 if all(c.passed for c in tests) else 0.0
    return Verdict(score, tuple(tests + process_checks(task, initial, final, messages)))
