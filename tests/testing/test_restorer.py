"""The template-aware restorer: it reads a correct package as correct, and finds every bug
(two slips, which no version of a template holds), undoing some of them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.coding.repo import body, generate, layout, load, module_sources, outcome, same_outcome
from trace_gym.coding.templates import FUNCTIONS, KNOBS, canonical, knobs_in
from trace_gym.rng import Rng
from trace_gym.testing.restorer import restore


def _is_knob_bug(seed: int, held_out: bool = False) -> bool:
    """The bug's first slip is another knob value's code: one line from it (the second slip)."""
    task, lay = generate(Rng.from_seed(seed), held_out=held_out), layout(Rng.from_seed(seed), held_out)
    f = FUNCTIONS[canonical(task.bug_function)][1]
    return any(_one_line_from(body(lay, f, {name: i}), task.files[task.bug_file])
               for name in knobs_in(f.source) for i in range(len(KNOBS[name])) if i != lay.knobs[name])


def _one_line_from(function: str, text: str) -> bool:
    """True when `text` holds `function` with at most one of its lines changed."""
    lines = function.splitlines()
    return any(sum(a != b for a, b in zip(lines, text.splitlines()[i:i + len(lines)])) <= 1
               for i, line in enumerate(text.splitlines()) if line == lines[0])


@settings(max_examples=12, deadline=None)
@given(st.integers(min_value=0, max_value=2**31 - 1), st.booleans())
def test_a_correct_package_has_nothing_to_restore(seed, held_out):
    task = generate(Rng.from_seed(seed), held_out=held_out)
    assert restore(task.fixed_files, task.package) == ({}, [])


def test_every_bug_is_found_and_some_are_undone():
    found_edits = undone = knob_bugs = 0
    for seed in range(40):
        task = generate(Rng.from_seed(seed))
        fixed, found = restore(task.files, task.package)
        assert (task.bug_file, task.bug_function) in found, seed  # a knob bug too: its second slip shows
        knob_bugs += _is_knob_bug(seed)
        found_edits += 1
        modules = load(task.package, module_sources(task.package, {**task.files, **fixed}))
        got = outcome(getattr(modules[task.api_module], task.api_function), task.snippet_args)
        undone += same_outcome(got, task.snippet_expected)  # the nearest version may be another knob's
    assert undone >= 0.15 * found_edits and knob_bugs >= 5, (found_edits, undone, knob_bugs)
