"""Bug sites and restyling: every site is an edit, a loop is only ever made to stop sooner."""

from __future__ import annotations

import ast

from hypothesis import given, settings
from hypothesis import strategies as st

from trace_gym.coding.mutate import BUG_KINDS, _nodes, mutate, restyle, sites
from trace_gym.coding.templates import CONSTANTS, FUNCTIONS, KNOBS, fill, knob_text
from trace_gym.rng import Rng

SOURCES = {name: fill(f.source, {**{k: v[0] for k, v in CONSTANTS.items()}, **knob_text(dict.fromkeys(KNOBS, 0))})
           for name, (_, f) in FUNCTIONS.items()}


def test_every_site_of_every_template_is_a_real_edit_that_compiles():
    kinds = set()
    for name, source in SOURCES.items():
        before = ast.unparse(ast.parse(source))
        for site in sites(ast.parse(source)):
            after = ast.unparse(mutate(ast.parse(source), site))
            assert after != before, (name, site)
            compile(after, name, "exec")
            kinds.add(site.kind)
    assert kinds == set(BUG_KINDS)


def test_inside_a_while_loop_only_a_comparison_made_strict_is_a_site():
    source = SOURCES["binary_search"]
    tree = ast.parse(source)
    in_loop = {i for i, (_, inside) in enumerate(_nodes(tree)) if inside}
    loop_sites = [s for s in sites(tree) if s.node in in_loop]
    assert loop_sites and all(s.kind == "wrong_comparison" for s in loop_sites)
    for site in loop_sites:
        assert "while left < right" in ast.unparse(mutate(ast.parse(source), site))


def test_a_dropped_guard_leaves_a_valid_block():
    source = "def f(xs):\n    for x in xs:\n        if not x:\n            continue\n    return xs\n"
    (site,) = [s for s in sites(ast.parse(source)) if s.kind == "missing_edge_case"]
    assert "pass" in ast.unparse(mutate(ast.parse(source), site))


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=0, max_value=2**31 - 1))
def test_restyling_keeps_the_source_compiling_and_varies_it(seed):
    rng = Rng.from_seed(seed)
    for name, source in SOURCES.items():
        compile(ast.unparse(restyle(ast.parse(source), rng)), name, "exec")
    styled = {ast.unparse(restyle(ast.parse(SOURCES["clamp"]), Rng.from_seed(seed + i))) for i in range(12)}
    assert len(styled) > 1


def test_near_returns_give_a_near_value_of_the_kind_asked_and_return_before_a_raise():
    from trace_gym.coding.mutate import near_returns

    source = "def f(x):\n    '''Doc.'''\n    if x is None:\n        raise ValueError('none')\n    return x\n"
    for kind, value, near in ((int, 3, 4), (str, "a", "as"), (list, [1], [1, 0]), (dict, {"a": 1}, {"a": 1, "more": 0}),
                              (bool, True, False)):
        scope: dict = {}
        exec(ast.unparse(near_returns(ast.parse(source), kind)), scope)  # noqa: S102 - the test's own source
        assert scope["f"](value) == near
    scope = {}  # None's near value is 0 (an absent item's index), any other value stays
    exec(ast.unparse(near_returns(ast.parse("def f(x):\n    return x\n"), type(None))), scope)  # noqa: S102
    assert scope["f"](None) == 0 and scope["f"](5) == 5
    scope = {}
    exec(ast.unparse(near_returns(ast.parse(source), None)), scope)  # noqa: S102
    assert scope["f"](None) is None and scope["f"].__doc__ == "Doc."
