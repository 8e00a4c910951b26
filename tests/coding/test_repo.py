"""The coding task generator: determinism, a bug that shows, an issue that names no location."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import re
from collections import Counter

from trace_gym.coding.mutate import BUG_KINDS, sites
from trace_gym.coding.repo import (
    F2P_TESTS,
    Layout,
    apply_edit,
    body,
    generate,
    layout,
    load,
    module_source,
    module_sources,
    outcome,
    same_outcome,
)
from trace_gym.coding.templates import (
    CONSTANTS,
    FUNCTIONS,
    KNOBS,
    MODULES,
    NAMES,
    canonical,
    fill,
    knob_text,
    knobs_in,
    pools_are_disjoint,
    rename_prose,
)
from trace_gym.rng import Rng

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
_ANY = {**{n: v[0] for n, v in CONSTANTS.items()}, **knob_text({k: 0 for k in KNOBS})}


def _task(seed, held_out=False):
    return generate(Rng.from_seed(seed), held_out=held_out)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.booleans())
def test_the_fix_restores_the_correct_package_and_the_bug_shows_on_every_f2p_input(seed, held_out):
    task = _task(seed, held_out)
    fixed = task.fixed_files
    assert fixed[task.bug_file] != task.files[task.bug_file]
    assert [p for p in fixed if fixed[p] != task.files[p]] == [task.bug_file]
    correct = load(task.package, module_sources(task.package, fixed))
    buggy = load(task.package, module_sources(task.package, task.files))
    f2p = [t for t in task.hidden_tests if t.group == "f2p"]
    assert len(f2p) == F2P_TESTS
    for test in task.hidden_tests:
        want = outcome(getattr(correct[test.module], test.function), test.args)
        got = outcome(getattr(buggy[test.module], test.function), test.args)
        assert same_outcome(want, test.expected)
        assert same_outcome(got, test.expected) == (test.group == "p2p"), test
        assert test.args != task.snippet_args or test.function != task.api_function  # not the snippet's input
    assert task.bug_kind in BUG_KINDS
    assert re.search(rf"^def {task.bug_function}\(", task.files[task.bug_file], re.MULTILINE)


@settings(max_examples=40, deadline=None)
@given(SEEDS, st.booleans())
def test_the_issue_names_no_file_module_or_line(seed, held_out):
    task = _task(seed, held_out)
    text = task.issue.replace(task.package, "")
    for module in module_sources(task.package, task.files):
        assert not re.search(rf"\b{module}\b", text), module
    assert ".py" not in text and "line " not in text.lower() and task.bug_file not in task.issue
    assert f"{task.package}.{task.api_function}(" in task.snippet  # the public call, not its module


def test_a_seed_gives_the_same_task_in_another_process():
    here = json.dumps(_task(12345, True).to_json(), sort_keys=True)
    code = ("import json; from trace_gym.coding.repo import generate; from trace_gym.rng import Rng; "
            "print(json.dumps(generate(Rng.from_seed(12345), held_out=True).to_json(), sort_keys=True))")
    there = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "77", "PATH": "/usr/bin:/bin"}).stdout.strip()
    assert here == there
    assert _task(12345).files == _task(12345).files


def _canonical(seed: int, held_out: bool) -> Layout:
    """The seed's layout with every name canonical and no restyling: the templates as written."""
    drawn = layout(Rng.from_seed(seed), held_out)
    return Layout(drawn.package, drawn.constants, {name: name for name in NAMES}, drawn.orders,
                  {f.name: fill(f.source, drawn.constants) for f in drawn.functions}, drawn.knobs, drawn.styles)


@settings(max_examples=15, deadline=None)
@given(SEEDS, st.booleans())
def test_renaming_and_restyling_keep_what_every_function_computes(seed, held_out):
    drawn, plain = layout(Rng.from_seed(seed), held_out), _canonical(seed, held_out)
    mods = [load(lay.package, {lay.chosen[m.name]: module_source(lay, m) for m in MODULES}) for lay in (drawn, plain)]
    rng = Rng.from_seed(seed)
    for f in drawn.functions:
        for _ in range(20):
            args = f.draw(rng, drawn.constants)
            a = outcome(getattr(mods[0][drawn.module_of(f)], drawn.name_of(f)), args)
            b = outcome(getattr(mods[1][plain.module_of(f)], f.name), args)
            assert same_outcome(a, b), (f.name, args, a, b)


def test_every_kind_every_function_and_the_held_out_ones_only_on_test_seeds():
    train = [_task(s) for s in range(300)]
    test = [_task(s, held_out=True) for s in range(300)]
    held = [name for name, (_, f) in FUNCTIONS.items() if f.held_out]
    assert held
    held_names = {n for name in held for n in NAMES[name]}
    for task in train:
        defined = set(re.findall(r"^def (\w+)\(", "".join(task.files.values()), re.MULTILINE))
        assert not defined & held_names
    assert {t.bug_kind for t in train} == set(BUG_KINDS)
    targets = Counter(next(c for c, pool in NAMES.items() if t.bug_function in pool) for t in train + test)
    # A function with one site and no knob can hold neither two slips nor one no generic edit undoes.
    one_site = {name for name, (_, f) in FUNCTIONS.items()
                if len(sites(ast.parse(fill(f.source, _ANY)))) < 2 and not knobs_in(f.source)}
    assert one_site == {"window_means"}
    assert set(targets) == set(FUNCTIONS) - one_site
    assert sum(t.bug_function in held_names for t in test) >= 0.3 * len(test)
    assert sum(t.api_function != t.bug_function for t in train) >= 0.2 * len(train)


def test_no_patch_text_repeats_often_enough_to_memorise():
    """A memoriser of the first generator kept one patch per catalogue entry; here the most common
    (buggy lines, fixed lines) pair must cover under 3% of seeds, and the most common fixed
    text under 5%."""
    pairs, fixes = Counter(), Counter()
    for seed in range(300):
        task = _task(seed)
        buggy = "".join(task.files[task.bug_file].splitlines(keepends=True)[task.fix_start - 1:task.fix_end])
        pairs[(buggy.strip(), task.fixed_text.strip())] += 1
        fixes[task.fixed_text.strip()] += 1
    assert pairs.most_common(1)[0][1] < 0.03 * 300, pairs.most_common(3)
    assert fixes.most_common(1)[0][1] < 0.05 * 300, fixes.most_common(3)


def test_name_pools_never_collide():
    assert pools_are_disjoint()
    assert all(pool[0] == name for name, pool in NAMES.items())


def test_apply_edit_replaces_inserts_and_deletes():
    text = "a\nb\nc\n"
    assert apply_edit(text, 2, 2, "B") == "a\nB\nc\n"
    assert apply_edit(text, 2, 1, "x\n") == "a\nx\nb\nc\n"
    assert apply_edit(text, 1, 3, "") == ""


def test_every_knob_value_is_code_of_its_own_stated_in_its_own_words():
    """Each knob's values give code that parses, computes something else on some drawn input,
    and is said in other words: knowing a template does not tell which value a seed took."""
    rng = Rng.from_seed(5)
    for name, values in KNOBS.items():
        users = [f for _, f in FUNCTIONS.values() if name in knobs_in(f.source)]
        assert users, name
        assert len({v.code for v in values}) == len({v.doc for v in values}) == len(values) >= 2
        for f in users:
            lay = layout(Rng.from_seed(11), held_out=True)
            sources = [body(lay, f, {name: i}) for i in range(len(values))]
            assert len(set(sources)) == len(values)
            module = FUNCTIONS[f.name][0]
            loaded = [load(lay.package, {lay.chosen[m.name]: module_source(lay, m, (f.name, src) if m is module else None)
                                         for m in MODULES}) for src in sources]
            fns = [getattr(mods[lay.module_of(f)], lay.name_of(f)) for mods in loaded]
            inputs = [f.draw(rng, lay.constants) for _ in range(300)]
            assert any(not same_outcome(outcome(fns[0], a), outcome(fns[1], a)) for a in inputs), (name, f.name)
            words = rename_prose(knob_text(lay.knobs)[f"{name}_DOC"], lay.chosen)
            assert all(words in src for src in sources)  # the code changes, the docstring does not


def test_some_bugs_are_another_knob_values_code_under_the_seeds_words():
    """A knob bug: the buggy function is what another seed's correct package could hold, wrong
    only by what its docstring and the issue say."""
    flips = 0
    for seed in range(150):
        task, lay = _task(seed), layout(Rng.from_seed(seed), False)
        f = FUNCTIONS[canonical(task.bug_function)][1]
        for name in knobs_in(f.source):
            others = [{name: i} for i in range(len(KNOBS[name])) if i != lay.knobs[name]]
            # another value's code, and a second slip on another line (a site slip on the knob's
            # own line can look the same: the kind tells them apart)
            if (any(_one_line_from(body(lay, f, other), task.files[task.bug_file]) for other in others)
                    and task.bug_kind == KNOBS[name][lay.knobs[name]].kind):
                flips += 1
                assert lay.bodies[f.name] in task.fixed_files[task.bug_file]
                assert rename_prose(KNOBS[name][lay.knobs[name]].doc, lay.chosen) in task.files[task.bug_file]
    assert 0.2 * 150 <= flips <= 0.6 * 150, flips


def _one_line_from(function, text):
    """True when `text` holds `function` with at most one of its lines changed."""
    lines = function.splitlines()
    return any(sum(a != b for a, b in zip(lines, text.splitlines()[i:i + len(lines)])) <= 1
               for i, line in enumerate(text.splitlines()) if line == lines[0])


def _bug_function(task):
    """(module name, the buggy function's source) of a task."""
    lines = task.files[task.bug_file].splitlines(keepends=True)
    node = next(n for n in ast.parse(task.files[task.bug_file]).body
                if isinstance(n, ast.FunctionDef) and n.name == task.bug_function)
    return task.bug_file.split("/")[1][:-3], "".join(lines[node.lineno - 1:node.end_lineno])


@pytest.mark.parametrize("held_out", [False, True])
def test_no_single_generic_edit_fixes_a_generated_bug_on_the_reported_inputs(held_out):
    """The red team's blind search fixed 0.78 of seeds with one generic edit found from the
    snippet; every bug now takes more than one (two slips, or one no generic edit undoes)."""
    from trace_gym.coding.mutate import one_edit_away

    for seed in range(25):
        task = _task(seed, held_out)
        modules = load(task.package, module_sources(task.package, task.files))
        cases = [(task.snippet_args, task.snippet_expected)] + [
            (t.args, t.expected) for t in task.hidden_tests if t.group == "f2p"]
        module_name, source = _bug_function(task)
        namespace = modules[module_name].__dict__
        for tree in one_edit_away(source):
            try:
                exec(compile(tree, "x", "exec"), namespace)
            except Exception:
                continue
            fn = getattr(modules[task.api_module], task.api_function)
            assert not all(same_outcome(outcome(fn, args), want) for args, want in cases), (seed, ast.unparse(tree))


def test_visible_tests_run_in_process_tell_a_package_that_breaks_them():
    from trace_gym.coding.repo import visible_tests_pass

    task = _task(3)
    assert visible_tests_pass(task, load(task.package, module_sources(task.package, task.fixed_files)))
    assert visible_tests_pass(task, load(task.package, module_sources(task.package, task.files)))
    modules = load(task.package, module_sources(task.package, task.fixed_files))
    module_name, source = _bug_function(task)
    broken = {**task.fixed_files, task.bug_file: task.fixed_files[task.bug_file].replace(
        f"def {task.bug_function}(", f"def {task.bug_function}(*_a, **_k):\n    raise KeyError\n\n\ndef _unused(")}
    assert not visible_tests_pass(task, load(task.package, module_sources(task.package, broken)))
