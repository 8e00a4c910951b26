"""A coding task per seed: a small Python package with one injected bug, the issue a user
writes about it, and the hidden tests that decide whether it was fixed.

Generation, all from the seed's `Rng`:

1. a package name, the constants of its templates (widths, thresholds, rates), the value
   of each knob (`templates.KNOBS`: behaviour its docstring states), a name for every
   module, function, parameter and local (`templates.NAMES`), and the order of each
   module's functions; each function restyled (`mutate.restyle`). Templates marked
   `held_out` are in the package only on test seeds (`held_out=True`);
2. the function the issue's snippet calls, and one bug of two slips in one function: a
   random edit at a random site of its syntax tree (`mutate.sites`), or (`KNOB_BUG_SHARE`
   of the functions with a knob) the code of another knob value under the seed's
   docstring, which is code a correct package of another seed holds; then a second edit at
   a site on another line. The function is the issue's or one it calls, directly or
   through another (the bug then shows one or two calls away from where it lives), drawn
   so that the call graph alone does not tell which (`_issue_and_bug`). On test seeds,
   half the issues call a held-out function where one can;
3. the package evaluated in this process (the templates are trace-gym's own code, never an
   agent's), correct, buggy and with the first slip only, to find inputs: the issue's
   snippet on one where the three differ (each slip shows), `FAIL_TO_PASS` tests on three
   where the bug shows; `PASS_TO_PASS` tests on inputs where correct and buggy agree, across
   the other functions; visible tests (in the repo) on agreeing inputs only, so they pass
   before the fix, as a project's suite does. A bug that one generic edit of its function
   (`mutate.one_edit_away`) undoes on the snippet's and the FAIL_TO_PASS inputs is refused,
   and so is one that shows on too few inputs: a search that reads nothing but the
   snippet finds at best an edit that fails a hidden test. (Where no drawn bug passes in
   250 tries, about one seed in 2,000, two slips are taken without these two conditions);
4. the issue: the snippet, what it gives and what the user expected; never a file, a
   module or a line.

Expected outcomes are computed here, outside any sandbox, and never enter one: the hidden
tests' inputs go to the runner, the outcomes it reports come back, and the comparison is
made here (`trace_gym.coding.verify`).
"""

from __future__ import annotations

import ast
import functools
import json
import math
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.coding.mutate import BUG_KINDS, Site, mutate, near_returns, node_lines, one_edit_away, rename, restyle, sites
from trace_gym.coding.templates import (
    ATTRIBUTES,
    CONSTANTS,
    FUNCTIONS,
    KNOBS,
    MODULES,
    NAMES,
    FunctionTemplate,
    ModuleTemplate,
    fill,
    knob_text,
    knobs_in,
    rename_prose,
)
from trace_gym.errors import InternalError
from trace_gym.jsondata import copy_json
from trace_gym.rng import Rng
from trace_gym.sandbox.runner import exception_name

_ADJECTIVES = ("tidy", "brisk", "quiet", "amber", "lucky", "swift", "plain", "merry", "noble", "sunny", "keen")
_NOUNS = ("ledger", "otter", "kettle", "harbor", "lantern", "meadow", "comet", "parcel", "quill", "willow")
CANDIDATES = 400
"""Argument lists drawn per function when looking for inputs where the bug shows."""
HALF_CANDIDATES = 60
"""Argument lists drawn per candidate bug when looking for a snippet on which each of its
two slips shows (a pair of slips that shows together on none of them is drawn again)."""
F2P_TESTS = 3
"""Hidden FAIL_TO_PASS tests per task (inputs other than the snippet's)."""
P2P_TESTS = 8
"""Hidden PASS_TO_PASS tests per task at most: one per drawn function on which an agreeing
input was found (6 or 7 on some seeds, where a bug shows on every input drawn)."""


@dataclass(frozen=True)
class HiddenTest:
    """One hidden test: call `module.function(*args)` of the package; pass when the outcome
    equals `expected` ({"value": v} or {"raises": "ExceptionName"})."""

    name: str
    group: str
    """"f2p" (fails before the fix) or "p2p" (passes before and after)."""
    module: str
    function: str
    args: list[Any]
    expected: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """The test as JSON."""
        return {"name": self.name, "group": self.group, "module": self.module, "function": self.function,
                "args": self.args, "expected": self.expected}


@dataclass(frozen=True)
class CodingTask:
    """One seed's task: the buggy repository, its fix, the issue and the hidden tests."""

    package: str
    files: dict[str, str]
    """Path -> text of the repository as the agent gets it (buggy)."""
    bug_kind: str
    bug_file: str
    """The path of the file holding the bug (e.g. "tidyledger/mathops.py")."""
    bug_function: str
    fix_start: int
    """First line (1-based) of the buggy lines to replace."""
    fix_end: int
    """Last line of them; fix_start - 1 when the bug removed lines (the fix inserts)."""
    fixed_text: str
    """The lines the fix puts there (whole lines, each ending in a newline)."""
    issue: str
    snippet: str
    """The reproducing snippet of the issue (Python code)."""
    api_module: str
    api_function: str
    """The function the snippet calls (the buggy one, or one calling it)."""
    snippet_args: list[Any]
    snippet_expected: dict[str, Any]
    """What the snippet's call should give (the correct package's outcome)."""
    hidden_tests: tuple[HiddenTest, ...]
    capabilities_needed: list[str] = field(default_factory=lambda: [cap.LOCALIZATION, cap.REPRODUCTION])

    @property
    def kind(self) -> str:
        """The bug's kind (evaluation reports per kind)."""
        return self.bug_kind

    @property
    def hidden(self) -> list[str]:
        """What the agent must find and is never shown: the bug's file (the kit's no_leak)."""
        return [self.bug_file]

    @property
    def instructions(self) -> str:
        """The issue, as the user wrote it."""
        return self.issue

    @property
    def fixed_files(self) -> dict[str, str]:
        """The repository with the bug fixed (the reference solution)."""
        return {**self.files, self.bug_file: apply_edit(self.files[self.bug_file], self.fix_start, self.fix_end,
                                                         self.fixed_text)}

    def to_json(self) -> dict[str, Any]:
        """The task as JSON (the hidden tests included: a record, never an observation);
        `hidden` lists what the agent must find (the bug's file), as every env's task does."""
        return {"package": self.package, "files": dict(self.files), "bug_kind": self.bug_kind, "bug_file": self.bug_file,
                "bug_function": self.bug_function, "fix_start": self.fix_start, "fix_end": self.fix_end,
                "fixed_text": self.fixed_text, "issue": self.issue, "snippet": self.snippet, "api_module": self.api_module, "api_function": self.api_function,
                "snippet_args": self.snippet_args, "snippet_expected": self.snippet_expected,
                "hidden_tests": [t.to_json() for t in self.hidden_tests],
                # what the agent must find, never in what it is shown (the kit's no_leak)
                "hidden": self.hidden,
                "capabilities_needed": list(self.capabilities_needed)}


def task_from_json(data: dict[str, Any]) -> CodingTask:
    """A task from `CodingTask.to_json`'s output (the kit rebuilds a worker's task this way)."""
    tests = tuple(HiddenTest(**t) for t in data["hidden_tests"])
    return CodingTask(
        package=data["package"], files=dict(data["files"]), bug_kind=data["bug_kind"], bug_file=data["bug_file"],
        bug_function=data["bug_function"], fix_start=data["fix_start"], fix_end=data["fix_end"],
        fixed_text=data["fixed_text"], issue=data["issue"], snippet=data["snippet"], api_module=data["api_module"],
        api_function=data["api_function"], snippet_args=data["snippet_args"],
        snippet_expected=data["snippet_expected"], hidden_tests=tests,
        capabilities_needed=list(data["capabilities_needed"]))


def apply_edit(text: str, start: int, end: int, replacement: str) -> str:
    """`text` with lines start..end (1-based, inclusive; end = start - 1 inserts before
    start) replaced by `replacement` (whole lines; a final newline is added if missing)."""
    lines = text.splitlines(keepends=True)
    if replacement and not replacement.endswith("\n"):
        replacement += "\n"
    return "".join(lines[: start - 1]) + replacement + "".join(lines[end:])


# -- sources ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """One seed's package before the bug: its names, constants, functions and their
    correct (renamed, restyled) sources."""

    package: str
    constants: dict[str, Any]
    chosen: dict[str, str]
    """Canonical identifier -> the name this package gives it."""
    orders: dict[str, list[FunctionTemplate]]
    """Module template name -> the functions it holds here, in order."""
    bodies: dict[str, str]
    """Canonical function name -> its correct source here."""
    knobs: dict[str, int]
    """Knob -> the value this package takes (`templates.KNOBS`)."""
    styles: dict[str, int]
    """Canonical function name -> the seed of its restyling (so that a body with another
    knob value is styled the same)."""

    def module_of(self, f: FunctionTemplate) -> str:
        """The name of the module holding `f` in this package."""
        return self.chosen[FUNCTIONS[f.name][0].name]

    def name_of(self, f: FunctionTemplate) -> str:
        """`f`'s name in this package."""
        return self.chosen[f.name]

    @property
    def functions(self) -> list[FunctionTemplate]:
        """Every function of the package, module by module."""
        return [f for m in MODULES for f in self.orders[m.name]]


def layout(rng: Rng, held_out: bool) -> Layout:
    """Draw a package's names, constants, knob values, function order and restyled sources."""
    package = rng.choice(_ADJECTIVES) + rng.choice(_NOUNS)
    knobs = {name: rng.below(len(values)) for name, values in KNOBS.items()}
    constants = {**{name: rng.choice(values) for name, values in CONSTANTS.items()}, **knob_text(knobs)}
    chosen = {name: rng.choice(pool) for name, pool in NAMES.items()}
    orders: dict[str, list[FunctionTemplate]] = {}
    bodies: dict[str, str] = {}
    styles: dict[str, int] = {}
    lay = Layout(package, constants, chosen, orders, bodies, knobs, styles)
    for module in MODULES:
        order = [f for f in module.functions if held_out or not f.held_out]
        rng.shuffle(order)
        orders[module.name] = order
        for f in order:
            styles[f.name] = rng.below(2**53)
            bodies[f.name] = body(lay, f)
    return lay


def body(lay: Layout, f: FunctionTemplate, code: dict[str, int] | None = None) -> str:
    """`f`'s source in this package: constants and knobs filled in (`code` overrides the
    value a knob's code takes, its words staying), renamed and restyled."""
    text = fill(f.source, {**lay.constants, **knob_text(lay.knobs, code)})
    tree = rename(ast.parse(rename_prose(text, lay.chosen)), lay.chosen, ATTRIBUTES)
    return ast.unparse(restyle(tree, Rng.from_seed(lay.styles[f.name]))) + "\n"


def module_source(lay: Layout, module: ModuleTemplate, bug: tuple[str, str] | None = None) -> str:
    """The text of one module: docstring, imports, its functions in order; `bug` (canonical
    function name, buggy source) replaces that function's correct source."""
    own = {f.name for f in lay.orders[module.name]}
    deps = sorted({lay.chosen[FUNCTIONS[name][0].name] for f in lay.orders[module.name] for name in f.uses
                   if name not in own})
    header = module.header + (f"from . import {', '.join(deps)}\n" if deps else "")
    bodies = [bug[1] if bug is not None and bug[0] == f.name else lay.bodies[f.name] for f in lay.orders[module.name]]
    return f'"""{module.doc}"""\n\n' + (header + "\n\n" if header else "") + "\n\n".join(bodies)


def init_source(lay: Layout) -> str:
    """The package's __init__.py: re-exports every function (the public API the issue uses)."""
    lines = [f'"""{lay.package}: small utilities."""\n\n']
    for module in MODULES:
        names = ", ".join(lay.name_of(f) for f in lay.orders[module.name])
        lines.append(f"from .{lay.chosen[module.name]} import {names}\n")
    return "".join(lines)


def module_sources(package: str, files: dict[str, str]) -> dict[str, str]:
    """Module name -> text of each module of `package` in a repository's files."""
    prefix = f"{package}/"
    return {p[len(prefix):-3]: t for p, t in files.items()
            if p.startswith(prefix) and p.endswith(".py") and p.count("/") == 1 and p != f"{prefix}__init__.py"}


def _relative_imports(source: str) -> list[str]:
    return [name.strip() for line in source.splitlines() if line.startswith("from . import ")
            for name in line.removeprefix("from . import ").split(",")]


@functools.lru_cache(maxsize=512)
def _compiled(src: str, name: str) -> types.CodeType:
    """A module's code, its `from . import` lines blanked (a generation loads the same
    modules many times over: all but the buggy one are the same text)."""
    code = "\n".join("" if line.startswith("from . import") else line for line in src.splitlines())
    return compile(code, name, "exec")


def load(package: str, sources: dict[str, str]) -> dict[str, types.ModuleType]:
    """The package's modules (name -> text) run in this process as module objects of their
    own (nothing enters sys.modules); `from . import x` lines are resolved from the modules
    made before. Only for trace-gym's own template code."""
    modules: dict[str, types.ModuleType] = {}
    pending = dict(sources)
    while pending:
        ready = [name for name, src in pending.items() if all(d in modules for d in _relative_imports(src))]
        if not ready:
            raise InternalError(f"modules {sorted(pending)} import each other or a missing module")
        for name in ready:
            src = pending.pop(name)
            mod = types.ModuleType(f"{package}.{name}")
            for dep in _relative_imports(src):
                setattr(mod, dep, modules[dep])
            exec(_compiled(src, mod.__name__), mod.__dict__)  # noqa: S102 - trace-gym's own templates
            modules[name] = mod
    return modules


_SCALARS = (int, float, str, bool, type(None))


def _as_json(value: Any) -> Any:
    """`value` as a JSON round trip gives it back (tuples become lists), without the text in
    between for the shapes the templates return; anything else goes through JSON."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        return [_as_json(v) for v in value]
    if kind is dict and all(type(k) is str for k in value):
        return {k: _as_json(v) for k, v in value.items()}
    return json.loads(json.dumps(value))


def outcome(fn: Any, args: list[Any]) -> dict[str, Any]:
    """What a call gives, as the runner reports it: {"value": JSON} or {"raises": name}."""
    try:
        value = fn(*copy_json(args))
    except Exception as exc:  # the outcome of a call is data here
        return {"raises": exception_name(exc)}
    return {"value": _as_json(value)}


def same_outcome(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two outcomes agree (floats within 1e-9, relative)."""
    return _same(a, b)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return (isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool)
                and not isinstance(b, bool) and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# -- the task ---------------------------------------------------------------------------------

AWAY_SHARE = 0.3
"""The share of tasks whose snippet calls a function that calls the buggy one, directly or
through another (the bug away from the symptom); the rest call the buggy function itself.
At most a half (see `_issue_and_bug`)."""
HELD_OUT_SHARE = 0.5
"""On test seeds, the share of issues that call a held-out function (where one can)."""
KNOB_BUG_SHARE = 0.7
"""The share of bugs in a function with a knob that are the code of another knob value:
code a correct package could hold, wrong only by what the docstring and issue say."""
TRIES = 50
"""Sites drawn before the generator gives up on a function (none has failed on the seeds
tested)."""
PAIRS = 5
"""(issue's function, buggy function) pairs drawn before the generator gives up."""


def _callees(present: list[FunctionTemplate]) -> dict[str, list[FunctionTemplate]]:
    """Function -> the functions of the package it reaches through its calls."""
    by_name = {f.name: f for f in present}

    def reached(f: FunctionTemplate) -> list[FunctionTemplate]:
        out: list[FunctionTemplate] = []
        for name in f.uses:
            for g in (by_name[name], *reached(by_name[name])):
                if g not in out:
                    out.append(g)
        return out
    return {f.name: reached(f) for f in present}


def _issue_and_bug(rng: Rng, present: list[FunctionTemplate], callees: dict[str, list[FunctionTemplate]],
                   away_share: float, held_out: bool) -> tuple[FunctionTemplate, FunctionTemplate]:
    """(the function the issue calls, the buggy one). The issue's function calls others
    with the chance `2 * away_share`; the bug is then in it or in one of those it reaches,
    each half the time, and otherwise in it. So whatever the issue's function, and whatever
    a reader knows of the call graph, naming the issue's function is right half the time
    where it calls others (always, at `away_share` 0.5), and naming a callee no more often.
    A held-out function is the issue's on `HELD_OUT_SHARE` of test seeds, where one fits."""
    calling = [f for f in present if callees[f.name]]
    leaves = [f for f in present if not callees[f.name]]
    pool = calling if rng.chance(2 * away_share) else leaves
    if held_out and rng.chance(HELD_OUT_SHARE):
        pool = [f for f in pool if f.held_out] or pool
    api = rng.choice(pool)
    if callees[api.name] and rng.chance(0.5):
        return api, rng.choice(callees[api.name])
    return api, api


def generate(rng: Rng, away_share: float = AWAY_SHARE, held_out: bool = False) -> CodingTask:
    """One seed's task (see the module docstring). Deterministic in the rng's draws;
    `away_share` (at most 0.5) of the tasks have the bug away from the function the issue
    calls; `held_out` (test seeds) adds the held-out templates to the package."""
    if not 0 <= away_share <= 0.5:
        raise ValueError(f"away_share={away_share!r} is invalid: must be in [0, 0.5]")
    lay = layout(rng, held_out)
    correct_src = {m.name: module_source(lay, m) for m in MODULES}
    correct = load(lay.package, {lay.chosen[m]: src for m, src in correct_src.items()})
    callees = _callees(lay.functions)
    # Strict first: a snippet on which both slips show, and no single generic edit fixing the
    # reported inputs. Where no drawn bug is both (about 1 seed in 2,000), any two slips.
    for strict in (True, False):
        for _ in range(PAIRS):
            api, target = _issue_and_bug(rng, lay.functions, callees, away_share, held_out)
            for _ in range(TRIES):
                task = _with_bug(rng, lay, correct_src, correct, target, api, strict)
                if task is not None:
                    return task
    raise InternalError(f"no edit showed as a bug on its drawn inputs in 2 x {PAIRS} x {TRIES} tries")


def _pick_site(rng: Rng, source: str) -> Site | None:
    """A site of the source, its kind drawn first (so that each kind is as likely as the
    others wherever it can be made), then the site."""
    found = sites(ast.parse(source))
    kinds = sorted({s.kind for s in found}, key=BUG_KINDS.index)
    if not kinds:
        return None
    kind = rng.choice(kinds)
    return rng.choice([s for s in found if s.kind == kind])


def _buggy_body(rng: Rng, lay: Layout, target: FunctionTemplate) -> tuple[str, str] | None:
    """(the target's source with its first slip, the slip's kind): on `KNOB_BUG_SHARE` of the
    functions with a knob, the code of another knob value under the seed's words; otherwise
    an edit at a drawn site. None when the function has no site."""
    knobs = knobs_in(target.source)
    if knobs and rng.chance(KNOB_BUG_SHARE):
        name = rng.choice(knobs)
        other = rng.choice([i for i in range(len(KNOBS[name])) if i != lay.knobs[name]])
        return body(lay, target, {name: other}), KNOBS[name][lay.knobs[name]].kind
    site = _pick_site(rng, lay.bodies[target.name])
    if site is None:
        return None
    return ast.unparse(mutate(ast.parse(lay.bodies[target.name]), site)) + "\n", site.kind


def _second_slip(rng: Rng, correct: str, source: str) -> str | None:
    """`source` (the function with its first slip) with a second edit at a drawn site on
    another line (on the same line, two slips tend to make one; anywhere, where no other line
    has a site); None when it has no site."""
    ours, theirs = source.splitlines(), correct.splitlines()
    changed = {i + 1 for i, line in enumerate(ours) if i >= len(theirs) or line != theirs[i]}
    tree = ast.parse(source)
    nodes, every = node_lines(tree), sites(tree)
    found = [site for site in every if nodes[site.node] and not nodes[site.node] & changed] or every
    if not found:
        return None
    kinds = sorted({s.kind for s in found}, key=BUG_KINDS.index)
    kind = rng.choice(kinds)
    site = rng.choice([s for s in found if s.kind == kind])
    return ast.unparse(mutate(tree, site)) + "\n"


def _one_edit_fixes(module: types.ModuleType, name: str, source: str, fixed: Any) -> bool:
    """True when one generic edit of the function `name` (its buggy `source`, defined in
    `module`; `mutate.one_edit_away`) makes `fixed()` true: the bug would yield to a search
    that reads nothing. The module is left as it was."""
    namespace = module.__dict__
    original = namespace[name]
    try:
        for tree in one_edit_away(source):
            try:
                exec(compile(tree, module.__name__, "exec"), namespace)  # noqa: S102 - trace-gym's own templates
            except Exception:  # noqa: S112 - an edit whose definition fails is no fix
                continue
            if fixed():
                return True
    finally:
        namespace[name] = original
    return False


def _with_bug(rng: Rng, lay: Layout, correct_src: dict[str, str], correct: dict[str, types.ModuleType],
              target: FunctionTemplate, api: FunctionTemplate, strict: bool = True) -> CodingTask | None:
    """A task whose bug is two slips in the target function, or None when the drawn bug does
    not pass (`strict`: the conditions of the module docstring's step 3)."""
    drawn = _buggy_body(rng, lay, target)
    if drawn is None:
        return None
    first_body, kind = drawn
    buggy_body = _second_slip(rng, lay.bodies[target.name], first_body)
    if buggy_body is None:
        return None
    return _task_with(rng, lay, correct_src, correct, target, api, kind, buggy_body, first_body, strict)


def _task_with(rng: Rng, lay: Layout, correct_src: dict[str, str], correct: dict[str, types.ModuleType],
               target: FunctionTemplate, api: FunctionTemplate, kind: str, buggy_body: str, first_body: str | None,
               strict: bool) -> CodingTask | None:
    """The task with `buggy_body` as the target's source (`first_body`: its first slip alone,
    when it has two), or None when the bug does not pass."""
    module = FUNCTIONS[target.name][0]
    buggy_src = dict(correct_src)
    buggy_src[module.name] = module_source(lay, module, (target.name, buggy_body))
    named = {lay.chosen[m]: src for m, src in buggy_src.items()}
    try:
        buggy = load(lay.package, named)
        half = None
        if first_body is not None and strict:
            half_src = {**correct_src, module.name: module_source(lay, module, (target.name, first_body))}
            half = load(lay.package, {lay.chosen[m]: src for m, src in half_src.items()})
    except Exception:  # an edit that breaks the module's own definitions is not the bug we want
        return None
    api_module, api_name = lay.module_of(api), lay.name_of(api)
    # The snippet: an input on which the bug shows (each slip of two); the FAIL_TO_PASS tests: others.
    showing = _inputs(rng, api, lay, correct[api_module], buggy[api_module], differ=True, want=1,
                      half=None if half is None else half[api_module],
                      candidates=CANDIDATES if half is None else HALF_CANDIDATES)
    if not showing:
        return None
    showing += _inputs(rng, api, lay, correct[api_module], buggy[api_module], differ=True, want=1 + F2P_TESTS)
    showing = [args for i, args in enumerate(showing) if args not in showing[:i]]
    if len(showing) < 1 + F2P_TESTS:
        return None
    snippet_args, f2p_args = showing[0], showing[1:1 + F2P_TESTS]
    # No single generic edit of the buggy function gives the right outcome on the snippet and
    # every FAIL_TO_PASS input: an edit a search finds from the snippet alone fails a hidden test.
    api_fn = getattr(correct[api_module], api_name)
    cases = [(args, outcome(api_fn, args)) for args in [snippet_args, *f2p_args]]
    if strict and _one_edit_fixes(buggy[lay.module_of(target)], lay.name_of(target), buggy_body,
                                  lambda: all(same_outcome(outcome(getattr(buggy[api_module], api_name), args), want)
                                              for args, want in cases)):
        return None
    hidden = [HiddenTest(f"test_{api_name}_reported_{i}", "f2p", api_module, api_name, args,
                         outcome(getattr(correct[api_module], api_name), args)) for i, args in enumerate(f2p_args)]
    # PASS_TO_PASS: other functions (and the reported one where the bug does not show)
    for i, f in enumerate(rng.sample(lay.functions, min(P2P_TESTS, len(lay.functions)))):
        m, name = lay.module_of(f), lay.name_of(f)
        agreeing = _inputs(rng, f, lay, correct[m], buggy[m], differ=False, want=1)
        if agreeing:
            hidden.append(HiddenTest(f"test_{name}_{i}", "p2p", m, name, agreeing[0],
                                     outcome(getattr(correct[m], name), agreeing[0])))
    package = lay.package
    files = {f"{package}/{m}.py": src for m, src in named.items()}
    files[f"{package}/__init__.py"] = init_source(lay)
    files.update(_visible_tests(rng, lay, correct, buggy))
    files["README.md"] = (f"# {package}\n\nSmall utilities. Run the tests with `python tests/run.py`.\n")
    files["tests/run.py"] = _RUN_TESTS
    fixed_lines, start, end = _fix_span(correct_src[module.name], buggy_src[module.name])
    got = outcome(getattr(buggy[api_module], api_name), snippet_args)
    want = outcome(getattr(correct[api_module], api_name), snippet_args)
    snippet = f"import {package}\nprint({package}.{api_name}({', '.join(_py(a) for a in snippet_args)}))\n"
    expectation = rename_prose(fill(api.expectation, lay.constants), lay.chosen)
    return CodingTask(
        package=package, files=files, bug_kind=kind, bug_file=f"{package}/{lay.module_of(target)}.py",
        bug_function=lay.name_of(target), fix_start=start, fix_end=end, fixed_text=fixed_lines,
        issue=_issue(rng, package, api_name, expectation, snippet, got, want), snippet=snippet,
        api_module=api_module, api_function=api_name, snippet_args=snippet_args, snippet_expected=want,
        hidden_tests=tuple(hidden))


# -- a second bug (a decoy) -------------------------------------------------------------------


def _edits(segment: str, expected: dict[str, Any]) -> list[str]:
    """The function `segment` edited: at each bug site (`trace_gym.coding.mutate`), then with
    every return made near (`mutate.near_returns`, by the kind of the expected value)."""
    kind = type(expected["value"]) if "value" in expected else None
    out = [ast.unparse(mutate(ast.parse(segment), site)) + "\n" for site in sites(ast.parse(segment))]
    return out + [ast.unparse(near_returns(ast.parse(segment), kind)) + "\n"]


def visible_tests_pass(task: CodingTask, modules: dict[str, types.ModuleType]) -> bool:
    """Whether every visible test of the task's repository (trace-gym's own tests/test_*.py,
    as `_visible_tests` writes them) passes on the package `modules`, run in this process."""
    for path, text in task.files.items():
        if not (path.startswith("tests/test_") and path.endswith(".py")):
            continue
        namespace: dict[str, Any] = {}
        code = "\n".join(line for line in text.splitlines() if not line.startswith(f"from {task.package} import "))
        namespace.update({name: modules[name] for name in modules})
        try:
            exec(compile(code, path, "exec"), namespace)  # noqa: S102 - trace-gym's own tests
            for name in sorted(n for n in namespace if n.startswith("test_")):
                namespace[name]()
        except Exception:  # noqa: BLE001 - a failing test is the answer here
            return False
    return True


def _span_candidates(task: CodingTask, fixed: dict[str, str]) -> Iterator[dict[str, str]]:
    """Packages that differ from the buggy one only where the fix does (the lines it
    replaces, and a line on either side: one run of changed lines, as the fix's), lazily:
    the fix made on some of its changed lines only (one slip of two put right), then
    the fixed function, then the buggy one, each with one edit (a generic one,
    `mutate.one_edit_away`; a bug kind's, `mutate.sites`; its returns made near), then with
    two."""
    buggy_lines = task.files[task.bug_file].splitlines(keepends=True)
    seen: set[str] = set()
    starts = []
    fixed_rows = len(task.fixed_text.splitlines())
    # The lines an edit may touch, in each file: the fix's span and a line on either side.
    for text, last in ((fixed[task.bug_file], task.fix_start + fixed_rows), (task.files[task.bug_file], task.fix_end + 1)):
        lines = text.splitlines(keepends=True)
        node = next((n for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.name == task.bug_function),
                    None)
        if node is not None:
            rows = range(task.fix_start - 1 - (node.lineno - 1), last - (node.lineno - 1) + 1)
            starts.append(("".join(lines[:node.lineno - 1]), "".join(lines[node.lineno - 1:node.end_lineno]),
                           "".join(lines[node.end_lineno:]), rows))

    def within(before: str, function: str, after: str) -> str | None:
        """The edited file where it differs from the buggy one in one run of lines that the
        fix's span holds, or touches (a line on either side), else None."""
        edited = before + function + after
        if edited in seen:
            return None
        seen.add(edited)
        new_lines = edited.splitlines(keepends=True)
        top = 0
        while top < min(len(new_lines), len(buggy_lines)) and new_lines[top] == buggy_lines[top]:
            top += 1
        bottom = 0
        while (bottom < min(len(new_lines), len(buggy_lines)) - top
               and new_lines[-1 - bottom] == buggy_lines[-1 - bottom]):
            bottom += 1
        return edited if top + 1 >= task.fix_start - 1 and len(buggy_lines) - bottom <= task.fix_end + 1 else None

    def edits(function: str, rows: range | None) -> Iterator[ast.Module]:
        yield from one_edit_away(function, rows)
        tree = ast.parse(function)
        spans, allowed = node_lines(tree), set(rows) if rows is not None else None
        for site in sites(tree):  # the bug kinds' own edits (len(x) + 1, a dropped method)
            if allowed is None or (spans[site.node] and spans[site.node] <= allowed):
                yield mutate(ast.parse(function), site)
        yield near_returns(ast.parse(function), type(task.snippet_expected["value"])
                           if "value" in task.snippet_expected else None)

    # First, the fix made in part: some of its changed lines (two slips on two lines: one of them).
    fixed_span = task.fixed_text.splitlines(keepends=True)
    buggy_span = buggy_lines[task.fix_start - 1:task.fix_end]
    if len(fixed_span) == len(buggy_span):
        changed = [i for i, (a, b) in enumerate(zip(buggy_span, fixed_span)) if a != b]
        for i in changed if len(changed) > 1 else ():
            for part in ([i], [j for j in changed if j != i]):
                span = [fixed_span[k] if k in part else buggy_span[k] for k in range(len(buggy_span))]
                edited = "".join(buggy_lines[:task.fix_start - 1] + span + buggy_lines[task.fix_end:])
                if edited not in seen:
                    seen.add(edited)
                    yield {**task.files, task.bug_file: edited}
    singles = []
    for before, function, after, rows in starts:
        for tree in edits(function, rows):
            source = ast.unparse(tree) + "\n"
            one_edit = within(before, source, after)
            if one_edit is not None:
                singles.append((before, source, after, rows))
                yield {**task.files, task.bug_file: one_edit}
    for before, function, after, rows in singles:
        for tree in edits(function, rows):
            two_edits = within(before, ast.unparse(tree) + "\n", after)
            if two_edits is not None:
                yield {**task.files, task.bug_file: two_edits}


_DECOYS: dict[int, tuple[CodingTask, dict[str, str] | None]] = {}
"""id(task) -> (the task, its decoy), for the last few tasks: the kit and the benchmarks play
many tests on the same seeds, whose tasks the env keeps (`trace_gym.coding.env`)."""


def second_bug(task: CodingTask) -> dict[str, str] | None:
    """issue_reproduction's decoy (`_second_bug`), found once per task object."""
    kept = _DECOYS.get(id(task))
    if kept is not None and kept[0] is task:
        return kept[1]
    decoy = _second_bug(task)
    if len(_DECOYS) >= 64:
        _DECOYS.pop(next(iter(_DECOYS)))
    _DECOYS[id(task)] = (task, decoy)
    return decoy


def _second_bug(task: CodingTask) -> dict[str, str] | None:
    """issue_reproduction's decoy: a wrong fix. Preferably a package that differs from the
    buggy one only where the fix does (`_span_candidates`), passes every visible test as the
    correct one does, and whose snippet call returns a value that is neither the expected
    outcome nor the reported wrong one: only what the reported call gives tells it from the
    correct package, so a test that checks how the package changed (one place, the visible
    tests passing) passes on it. Where none is, the correct package with a bug of its own in
    the reported function (else the buggy one), written in place. None when no edit does."""
    fixed = task.fixed_files
    reported = outcome(getattr(load(task.package, module_sources(task.package, task.files))[task.api_module],
                               task.api_function), task.snippet_args)

    def decoy(candidate: dict[str, str], visible: bool) -> bool:
        try:
            modules = load(task.package, module_sources(task.package, candidate))
        except Exception:  # noqa: BLE001 - an edit that breaks the module is no decoy
            return False
        got = outcome(getattr(modules[task.api_module], task.api_function), task.snippet_args)
        # a value, never an exception: a test asserting only "not the reported output" must pass on it
        return ("value" in got and not same_outcome(got, task.snippet_expected) and not same_outcome(got, reported)
                and (not visible or visible_tests_pass(task, modules)))

    for candidate in _span_candidates(task, fixed):
        if decoy(candidate, visible=True):
            return candidate
    for path, name in ((f"{task.package}/{task.api_module}.py", task.api_function), (task.bug_file, task.bug_function)):
        lines = fixed[path].splitlines(keepends=True)
        node = next((n for n in ast.parse(fixed[path]).body if isinstance(n, ast.FunctionDef) and n.name == name), None)
        if node is None:
            continue
        for edited in _edits("".join(lines[node.lineno - 1:node.end_lineno]), task.snippet_expected):
            candidate = {**fixed, path: "".join(lines[:node.lineno - 1]) + edited + "".join(lines[node.end_lineno:])}
            if decoy(candidate, visible=False):
                return candidate
    return None


def _inputs(rng: Rng, f: FunctionTemplate, lay: Layout, correct: types.ModuleType, buggy: types.ModuleType,
            differ: bool, want: int = 1 + F2P_TESTS, half: types.ModuleType | None = None,
            candidates: int = CANDIDATES) -> list[list[Any]]:
    """Distinct argument lists on which the correct and the buggy function differ (or agree);
    with `half` (the package with the first of two slips only), inputs on which the three
    all differ, so that each slip shows."""
    found: list[list[Any]] = []
    seen: set[str] = set()
    name = lay.name_of(f)
    for _ in range(candidates):
        args = f.draw(rng, lay.constants)
        key = json.dumps(args)
        if key in seen:
            continue
        seen.add(key)
        a, b = outcome(getattr(correct, name), args), outcome(getattr(buggy, name), args)
        if same_outcome(a, b) != differ:
            if half is not None:
                c = outcome(getattr(half, name), args)
                if same_outcome(a, c) or same_outcome(b, c):
                    continue
            found.append(args)
            if len(found) == want:
                break
    return found


def _fix_span(correct: str, buggy: str) -> tuple[str, int, int]:
    """(fixed lines, first line, last line) of the buggy text's lines to replace."""
    a, b = correct.splitlines(keepends=True), buggy.splitlines(keepends=True)
    top = 0
    while top < min(len(a), len(b)) and a[top] == b[top]:
        top += 1
    tail = 0
    while tail < min(len(a), len(b)) - top and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return "".join(a[top:len(a) - tail]), top + 1, len(b) - tail


def _py(value: Any) -> str:
    """A JSON value as Python source."""
    return repr(value)


def _show(result: dict[str, Any]) -> str:
    return f"raises {result['raises']}" if "raises" in result else f"returns `{result['value']!r}`"


def _issue(rng: Rng, package: str, api: str, expectation: str, snippet: str, got: dict[str, Any],
           want: dict[str, Any]) -> str:
    title = rng.choice((f"`{api}` gives a wrong result", f"Unexpected result from `{package}.{api}`",
                        f"Bug in `{api}`?"))
    opener = rng.choice(("I ran into this while using", "Found a problem in", "Something looks off in"))
    expected = (f"I expected it to raise {want['raises']}" if "raises" in want
                else f"I expected `{want['value']!r}`")
    return (f"{title}\n\n{opener} {package}:\n\n```python\n{snippet}```\n\nThis {_show(got)}, but "
            f"{expected}: {expectation}.\n")


def _visible_tests(rng: Rng, lay: Layout, correct: dict[str, types.ModuleType],
                   buggy: dict[str, types.ModuleType]) -> dict[str, str]:
    """tests/test_<module>.py for each module: plain asserts on inputs where the bug does not show."""
    files = {}
    for module in MODULES:
        name = lay.chosen[module.name]
        lines = [f'"""Tests of {lay.package}.{name}."""\n\nfrom {lay.package} import {name}\n']
        for f in lay.orders[module.name]:
            fn = lay.name_of(f)
            for i, args in enumerate(_inputs(rng, f, lay, correct[name], buggy[name], differ=False, want=2)):
                result = outcome(getattr(correct[name], fn), args)
                call = f"{name}.{fn}({', '.join(_py(a) for a in args)})"
                if "raises" in result:
                    body = (f"    try:\n        {call}\n    except {result['raises']}:\n        return\n"
                            f"    raise AssertionError('expected {result['raises']}')\n")
                else:
                    body = f"    assert {call} == {_py(result['value'])}\n"
                lines.append(f"\n\ndef test_{fn}_{i}():\n{body}")
        files[f"tests/test_{name}.py"] = "".join(lines)
    return files


_RUN_TESTS = '''"""Run every test_* function of tests/test_*.py and print what failed."""

import importlib.util
import pathlib
import sys
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
failed = passed = 0
for path in sorted(pathlib.Path(__file__).resolve().parent.glob("test_*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:
        failed += 1
        print(f"ERROR {path.name}: {traceback.format_exc(limit=1).strip().splitlines()[-1]}")
        continue
    for name in sorted(n for n in vars(module) if n.startswith("test_")):
        try:
            getattr(module, name)()
            passed += 1
        except Exception as exc:
            failed += 1
            print(f"FAILED {path.name}::{name} - {type(exc).__name__}: {exc}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
'''
