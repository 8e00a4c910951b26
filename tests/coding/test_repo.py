"""The coding task generator: determinism, a bug that shows, an issue that names no location."""

from __future__ import annotations

import json
import subprocess
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.coding.repo import F2P_TESTS, apply_edit, generate, load, outcome, same_outcome
from trace_gym.coding.templates import BUG_KINDS, FUNCTIONS, MODULES
from trace_gym.rng import Rng

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)


def _task(seed):
    return generate(Rng.from_seed(seed))


@settings(max_examples=40, deadline=None)
@given(SEEDS)
def test_the_fix_restores_the_correct_package_and_the_bug_shows_on_every_f2p_input(seed):
    task = _task(seed)
    fixed = task.fixed_files
    assert fixed[task.bug_file] != task.files[task.bug_file]
    assert [p for p in fixed if fixed[p] != task.files[p]] == [task.bug_file]
    sources = {m.name: fixed[f"{task.package}/{m.name}.py"] for m in MODULES}
    buggy_sources = {m.name: task.files[f"{task.package}/{m.name}.py"] for m in MODULES}
    correct, buggy = load(task.package, sources), load(task.package, buggy_sources)
    f2p = [t for t in task.hidden_tests if t.group == "f2p"]
    assert len(f2p) == F2P_TESTS
    for test in task.hidden_tests:
        want = outcome(getattr(correct[test.module], test.function), test.args)
        got = outcome(getattr(buggy[test.module], test.function), test.args)
        assert same_outcome(want, test.expected)
        assert same_outcome(got, test.expected) == (test.group == "p2p"), test
        assert test.args != task.snippet_args or test.function != task.api_function  # not the snippet's input
    assert task.bug_kind in BUG_KINDS and task.bug_function in FUNCTIONS


@settings(max_examples=40, deadline=None)
@given(SEEDS)
def test_the_issue_names_no_file_module_or_line(seed):
    task = _task(seed)
    text = task.issue.lower()
    for module in MODULES:
        assert f"{module.name}" not in text.replace(task.package, "")
    assert ".py" not in text and "line " not in text and task.bug_file not in text
    assert f"{task.package}.{task.api_function}(" in task.snippet  # the public call, not its module


def test_a_seed_gives_the_same_task_in_another_process():
    here = json.dumps(_task(12345).to_json(), sort_keys=True)
    code = ("import json; from trace_gym.coding.repo import generate; from trace_gym.rng import Rng; "
            "print(json.dumps(generate(Rng.from_seed(12345)).to_json(), sort_keys=True))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "77", "PATH": "/usr/bin:/bin"}).stdout.strip()
    assert here == there
    assert _task(12345).files == _task(12345).files


def test_every_bug_of_the_catalogue_is_drawn():
    seen = {(t.bug_function, t.bug_kind) for t in (_task(s) for s in range(400))}
    catalogue = {(f.name, b.kind) for m in MODULES for f in m.functions for b in f.bugs}
    assert seen == catalogue


def test_apply_edit_replaces_inserts_and_deletes():
    text = "a\nb\nc\n"
    assert apply_edit(text, 2, 2, "B") == "a\nB\nc\n"
    assert apply_edit(text, 2, 1, "x\n") == "a\nx\nb\nc\n"
    assert apply_edit(text, 1, 3, "") == ""
