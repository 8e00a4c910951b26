"""Issue reproduction: write a test that fails on the buggy package and passes once it is fixed.

Task. The coding target's generator (`trace_gym.coding.repo`): a small Python package with
one injected bug and a user's issue about it. The agent writes a test file under tests/
(test_*.py, plain asserts; `tests/run.py` runs it) that reproduces the issue, then submits.

Tools. The coding target's tools (list_files, open_file, search, edit_file, create_file,
run_command, run_tests, submit); commands run in the sandbox.

Reward. The agent's test files (files under tests/ named test_*.py that it created or
changed) are copied beside trace-gym's versions of the package, never the agent's: the
correct one, the buggy one the episode started from, and a decoy: a wrong fix made where the
fix is (`trace_gym.coding.repo.second_bug`): the buggy package with one of its bug's two
slips put right, or with an edit on the lines the fix replaces, that passes every visible
test and on which the issue's call returns a value that is neither the expected outcome nor
the reported one (where no such package exists, about 2% of seeds, the correct one with a
bug of its own in the reported function; where no edit does, the correct one whose reported
and buggy functions return a value equal to nothing). Each version runs them in a fresh
sandbox. 1.0 when on the correct package they define at least one test and every test
passes, and on the buggy package and on the decoy at least one test fails; else 0. The
decoy changes the package where the fix does and passes the visible tests, so a test that
checks how the package changed (in one place, the visible tests passing) scores 0, and so
does one that only recognises the agent's copy (a hash of its text or AST, comments
dropped or not) or only asserts that the reported wrong output is gone. So a test that
always fails, one that always passes, or a change to the package itself earns nothing. Both
versions' modules start with a line the agent's copy lacks, so a test that recognises the
buggy package by its text (a hash, a line count) fails on both; one that reads the source
for the fixed line's exact text is not ruled out (it has to know the fix to do so).

Episode end. submit, a reply without a tool call, or the step limit (12).

Transfer rationale. On SWE-bench, runs that first reproduce the issue fix it far more
often: a failing test pins the symptom, tells whether an edit helped, and catches a fix of
the wrong place. Here the reward is for exactly that test, checked against a known fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trace_gym import capabilities as cap
from trace_gym import messages as msg
from trace_gym.coding.env import CodingConfig, CodingEpisodeEnv
from trace_gym.coding.repo import CodingTask, second_bug
from trace_gym.coding.tools import tool_names
from trace_gym.coding.verify import marked_lines
from trace_gym.coding.workspace import Repo
from trace_gym.jsondata import dumps
from trace_gym.sandbox.workspace import run, runner_argv
from trace_gym.verdict import Check, Verdict

CAPABILITY = cap.REPRODUCTION
TEST_FILE = "tests/test_issue.py"
"""Where the oracle writes its test (any tests/test_*.py of the agent's counts)."""
INSTRUCTIONS = ("Do not fix the bug. Write a test file under tests/ (for example tests/test_issue.py, plain "
                "assert statements in test_ functions) that fails now because of the reported bug and will pass "
                "once it is fixed; check it with run_tests, then call submit.")
HINT = ("Call the function from the issue in a test function and assert the result the issue expects, not "
        "the one it gets; run the tests to see that your test fails for the reported reason.")


@dataclass(frozen=True)
class ReproductionConfig(CodingConfig):
    """The env's knobs: the coding target's, with a shorter step limit."""

    max_steps: int = 12


def agent_tests(initial: Repo, final: Repo) -> dict[str, str]:
    """The test files the agent created or changed: tests/test_*.py."""
    return {p: t for p, t in final.files.items()
            if p.startswith("tests/") and p.rsplit("/", 1)[-1].startswith("test_") and p.endswith(".py")
            and p.count("/") == 1 and initial.files.get(p) != t}


VARIANT_HEADER = "# The package as the reproduction verifier builds it: the same code, another text.\n"
"""Put at the top of each package module the verifier runs the agent's tests against, so
that the two versions' text differs from the copy the agent saw (`run_tests_on`)."""


def run_tests_on(files: dict[str, str], tests: dict[str, str]) -> list[dict[str, Any]]:
    """The runner's per-test records for `tests` beside the package in `files`, each module
    of which starts with VARIANT_HEADER: a test that recognises the buggy package by its text
    (a hash, a line count) rather than by calling it fails on both versions."""
    package = {p: (VARIANT_HEADER + t if p.endswith(".py") else t) for p, t in files.items()
               if not p.startswith("tests/")}
    result, _, _ = run({**package, **tests}, runner_argv("tests"), stdin=dumps({"files": sorted(tests)}).encode(),
                       keep=False)
    return [r for r in marked_lines(result.stdout) if r.get("file") in tests]


DECOY_CLASS = '''


class _Decoy:
    """What the decoy version's reported functions return: a value equal to nothing."""

    def __eq__(self, other):
        return False

    __hash__ = None
'''
"""Appended to a module of the decoy version, before the functions it redefines."""


def decoy_function(name: str) -> str:
    """The redefinition of `name` appended to a module of the decoy version."""
    return f"\n\ndef {name}(*args, **kwargs):\n    return _Decoy()\n"


def decoy_files(task: CodingTask) -> dict[str, str]:
    """The decoy version: the correct package whose reported function and buggy function
    (the same one, or a helper it calls) return a value equal to nothing. A test that calls
    them and checks the result fails on it; a test that only tells the agent's copy from any
    other text (a hash, an AST, a line count), or asserts only that the reported wrong output
    is gone, passes on it, and so earns nothing."""
    files = task.fixed_files
    redefined: dict[str, list[str]] = {}
    for module_path, name in ((f"{task.package}/{task.api_module}.py", task.api_function),
                              (task.bug_file, task.bug_function)):
        if name not in redefined.setdefault(module_path, []):
            redefined[module_path].append(name)
    for module_path, names in redefined.items():
        files[module_path] += DECOY_CLASS + "".join(decoy_function(n) for n in names)
    return files


def verify(task: CodingTask, initial: Repo, final: Repo) -> Verdict:
    """1.0 when the agent's tests pass on the correct package, and one fails on the buggy one
    and one on the decoy (each run stops once the verdict is known)."""
    tests = agent_tests(initial, final)
    if not tests:
        return Verdict(0.0, (Check("tests_written", False, 0.0, "no new or changed tests/test_*.py"),))
    on_fixed = run_tests_on(task.fixed_files, tests)
    fixed_ok = bool(on_fixed) and all(r.get("passed") is True and r.get("test") for r in on_fixed)
    failing = [f"{r.get('file')}::{r.get('test')}: {r.get('error')}" for r in on_fixed if r.get("passed") is not True]
    buggy_fails = decoy_fails = False
    if fixed_ok:
        on_buggy = run_tests_on(task.files, tests)
        buggy_fails = any(r.get("passed") is not True for r in on_buggy) or not on_buggy
    if fixed_ok and buggy_fails:
        on_decoy = run_tests_on(second_bug(task) or decoy_files(task), tests)
        decoy_fails = any(r.get("passed") is not True for r in on_decoy) or not on_decoy
    return Verdict(1.0 if fixed_ok and buggy_fails and decoy_fails else 0.0, (
        Check("tests_written", True, 0.0, ", ".join(sorted(tests))),
        Check("pass_on_fixed", fixed_ok, 0.4, "; ".join(failing)[:300] or f"{len(on_fixed)} test(s) ran"),
        Check("fail_on_buggy", buggy_fails, 0.3, "" if buggy_fails else "not shown to fail on the buggy package"),
        Check("fail_on_decoy", decoy_fails, 0.3, "" if decoy_fails else
              "not shown to fail on a wrong version other than the buggy one"),
    ))


def oracle(task: CodingTask, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Write a test asserting the issue's expectation on the snippet's call, run it, submit."""
    names = tool_names(messages)
    if "create_file" not in names:
        expected = task.snippet_expected
        args = ", ".join(repr(a) for a in task.snippet_args)
        call = f"{task.api_module}.{task.api_function}({args})"
        if "raises" in expected:
            body = (f"    try:\n        {call}\n    except {expected['raises']}:\n        return\n"
                    f"    raise AssertionError('expected {expected['raises']}')\n")
        else:
            body = f"    assert {call} == {expected['value']!r}\n"
        text = f"from {task.package} import {task.api_module}\n\n\ndef test_issue():\n{body}"
        return {"name": "create_file", "arguments": {"path": TEST_FILE, "content": text}}
    if "run_tests" not in names:
        return {"name": "run_tests", "arguments": {}}
    return {"name": "submit", "arguments": {}}


class IssueReproductionEnv(CodingEpisodeEnv):
    """trace/issue_reproduction-v0 (see the module docstring)."""

    CAPABILITY = CAPABILITY
    CAPABILITIES = (CAPABILITY,)
    CONFIG = ReproductionConfig
    INSTRUCTIONS = INSTRUCTIONS
    HINT = HINT

    def verify(self, task: Any, initial_world: Any, final_world: Any, messages: list[msg.Message]) -> Verdict:
        """The verdict of the runs (the agent's tests against trace-gym's package versions)."""
        return verify(task, initial_world, final_world)

    def oracle_action(self, messages: list[msg.Message]) -> Any:
        """The oracle's next turn."""
        return oracle(self.episode.task, messages)
