"""A coding task per seed: a small Python package with one injected bug, the issue a user
writes about it, and the hidden tests that decide whether it was fixed.

Generation, all from the seed's `Rng`:

1. a package name, the constants of its templates (widths, thresholds, rates) and the
   order of each module's functions;
2. one bug of the catalogue (`trace_gym.coding.templates`) in one function, and the
   function the issue's snippet calls: the buggy one, or a function of `report` that calls
   it (the bug then shows one call away from where it lives);
3. the package evaluated in this process twice, correct and buggy (the templates are
   trace-gym's own code, never an agent's), to find inputs where the two differ: one for
   the issue's snippet and `FAIL_TO_PASS` tests on three others; `PASS_TO_PASS` tests on
   inputs where they agree, across the other functions; visible tests (in the repo) on
   agreeing inputs only, so they pass before the fix, as a project's suite does;
4. the issue: the snippet, what it gives and what the user expected; never a file, a
   module or a line.

Expected outcomes are computed here, outside any sandbox, and never enter one: the hidden
tests' inputs go to the runner, the outcomes it reports come back, and the comparison is
made here (`trace_gym.coding.verify`).
"""

from __future__ import annotations

import json
import math
import types
from dataclasses import dataclass, field
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.coding.runner import exception_name
from trace_gym.coding.templates import CONSTANTS, FUNCTIONS, MODULES, Bug, FunctionTemplate, ModuleTemplate, fill
from trace_gym.errors import InternalError
from trace_gym.rng import Rng

_ADJECTIVES = ("tidy", "brisk", "quiet", "amber", "lucky", "swift", "plain", "merry", "noble", "sunny", "keen")
_NOUNS = ("ledger", "otter", "kettle", "harbor", "lantern", "meadow", "comet", "parcel", "quill", "willow")
CANDIDATES = 400
"""Argument lists drawn per function when looking for inputs where the bug shows."""
F2P_TESTS = 3
"""Hidden FAIL_TO_PASS tests per task (inputs other than the snippet's)."""
P2P_TESTS = 8
"""Hidden PASS_TO_PASS tests per task."""


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


def module_source(module: ModuleTemplate, order: list[FunctionTemplate], constants: dict[str, Any],
                  bug: tuple[str, Bug] | None) -> str:
    """The text of one module: docstring, imports, its functions in `order`, the bug
    injected when it is in this module (`bug`: function name and bug)."""
    uses = sorted({FUNCTIONS[name][0].name for f in module.functions for name in f.uses})
    parts = [f'"""{module.doc}"""\n\n']
    header = module.header + (f"from . import {', '.join(uses)}\n" if uses else "")
    if header:
        parts.append(header + "\n\n")
    bodies = []
    for f in order:
        body = fill(f.source, constants)
        if bug is not None and bug[0] == f.name:
            old, new = fill(bug[1].old, constants), fill(bug[1].new, constants)
            if body.count(old) != 1:
                raise InternalError(f"bug of {f.name} does not match its source once: {old!r}")
            body = body.replace(old, new)
        bodies.append(body)
    parts.append("\n\n".join(bodies))
    return "".join(parts)


def init_source(package: str, orders: dict[str, list[FunctionTemplate]]) -> str:
    """The package's __init__.py: re-exports every function (the public API the issue uses)."""
    lines = [f'"""{package}: small utilities."""\n\n']
    for module in MODULES:
        names = ", ".join(f.name for f in orders[module.name])
        lines.append(f"from .{module.name} import {names}\n")
    return "".join(lines)


def load(package: str, sources: dict[str, str]) -> dict[str, types.ModuleType]:
    """The package's modules run in this process as module objects of their own (nothing
    enters sys.modules); `from . import x` lines are resolved from the modules made before.
    Only for trace-gym's own template code."""
    modules: dict[str, types.ModuleType] = {}
    for module in MODULES:
        mod = types.ModuleType(f"{package}.{module.name}")
        code = "\n".join("" if line.startswith("from . import") else line
                         for line in sources[module.name].splitlines())
        for dep in {FUNCTIONS[n][0].name for f in module.functions for n in f.uses}:
            setattr(mod, dep, modules[dep])
        exec(compile(code, mod.__name__, "exec"), mod.__dict__)  # noqa: S102 - trace-gym's own templates
        modules[module.name] = mod
    return modules


def outcome(fn: Any, args: list[Any]) -> dict[str, Any]:
    """What a call gives, as the runner reports it: {"value": JSON} or {"raises": name}."""
    try:
        value = fn(*json.loads(json.dumps(args)))
    except Exception as exc:  # the outcome of a call is data here
        return {"raises": exception_name(exc)}
    return {"value": json.loads(json.dumps(value))}


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

_PAIRS = [(f, b) for m in MODULES for f in m.functions for b in f.bugs]
"""Every (function, bug) of the catalogue, in a fixed order."""
_CALLERS = {f.name: [g for m in MODULES for g in m.functions if f.name in g.uses] for _, f in FUNCTIONS.values()}
_CALLED_PAIRS = [(f, b) for f, b in _PAIRS if _CALLERS[f.name]]
"""The pairs whose function other functions call (the bug can show one call away)."""


AWAY_SHARE = 0.3
"""The share of tasks whose snippet calls a function that calls the buggy one (the bug one
call away from the symptom); the rest call the buggy function itself."""


def generate(rng: Rng, away_share: float = AWAY_SHARE) -> CodingTask:
    """One seed's task (see the module docstring). Deterministic in the rng's draws;
    `away_share` of the tasks have the bug one call away from the function the issue calls."""
    package = rng.choice(_ADJECTIVES) + rng.choice(_NOUNS)
    constants = {name: rng.choice(values) for name, values in CONSTANTS.items()}
    orders = {}
    for module in MODULES:
        order = list(module.functions)
        rng.shuffle(order)
        orders[module.name] = order
    correct_src = {m.name: module_source(m, orders[m.name], constants, None) for m in MODULES}
    correct = load(package, correct_src)
    away = rng.chance(away_share)
    for _ in range(50):
        target, bug = rng.choice(_CALLED_PAIRS if away else _PAIRS)
        task = _with_bug(rng, package, constants, orders, correct_src, correct, target, bug, away)
        if task is not None:
            return task
    raise InternalError("no bug of the catalogue showed on its drawn inputs in 50 tries")


def _with_bug(rng: Rng, package: str, constants: dict[str, Any], orders: dict[str, list[FunctionTemplate]],
              correct_src: dict[str, str], correct: dict[str, types.ModuleType], target: FunctionTemplate,
              bug: Bug, away: bool) -> CodingTask | None:
    module = FUNCTIONS[target.name][0]
    buggy_src = dict(correct_src)
    buggy_src[module.name] = module_source(module, orders[module.name], constants, (target.name, bug))
    buggy = load(package, buggy_src)
    api = rng.choice(_CALLERS[target.name]) if away else target
    api_module = FUNCTIONS[api.name][0].name
    showing = _inputs(rng, api, constants, correct[api_module], buggy[api_module], differ=True)
    if len(showing) < 1 + F2P_TESTS:
        return None
    snippet_args, f2p_args = showing[0], showing[1:1 + F2P_TESTS]
    hidden = [HiddenTest(f"test_{api.name}_reported_{i}", "f2p", api_module, api.name, args,
                         outcome(getattr(correct[api_module], api.name), args)) for i, args in enumerate(f2p_args)]
    # PASS_TO_PASS: other functions (and the reported one where the bug does not show)
    others = [f for m in MODULES for f in m.functions]
    picked = rng.sample(others, min(P2P_TESTS, len(others)))
    for i, f in enumerate(picked):
        m = FUNCTIONS[f.name][0].name
        agreeing = _inputs(rng, f, constants, correct[m], buggy[m], differ=False, want=1)
        if agreeing:
            hidden.append(HiddenTest(f"test_{f.name}_{i}", "p2p", m, f.name, agreeing[0],
                                     outcome(getattr(correct[m], f.name), agreeing[0])))
    files = {f"{package}/{m}.py": src for m, src in buggy_src.items()}
    files[f"{package}/__init__.py"] = init_source(package, orders)
    files.update(_visible_tests(rng, package, constants, correct, buggy))
    files["README.md"] = (f"# {package}\n\nSmall utilities. Run the tests with `python tests/run.py`.\n")
    files["tests/run.py"] = _RUN_TESTS
    fixed_lines, start, end = _fix_span(correct_src[module.name], buggy_src[module.name])
    got = outcome(getattr(buggy[api_module], api.name), snippet_args)
    want = outcome(getattr(correct[api_module], api.name), snippet_args)
    snippet = f"import {package}\nprint({package}.{api.name}({', '.join(_py(a) for a in snippet_args)}))\n"
    return CodingTask(
        package=package, files=files, bug_kind=bug.kind, bug_file=f"{package}/{module.name}.py",
        bug_function=target.name, fix_start=start, fix_end=end, fixed_text=fixed_lines,
        issue=_issue(rng, package, api, snippet, got, want), snippet=snippet, api_module=api_module,
        api_function=api.name, snippet_args=snippet_args, snippet_expected=want, hidden_tests=tuple(hidden))


def _inputs(rng: Rng, f: FunctionTemplate, constants: dict[str, Any], correct: types.ModuleType,
            buggy: types.ModuleType, differ: bool, want: int = 1 + F2P_TESTS) -> list[list[Any]]:
    """Distinct argument lists on which the correct and the buggy function differ (or agree)."""
    found: list[list[Any]] = []
    seen: set[str] = set()
    for _ in range(CANDIDATES):
        args = f.draw(rng, constants)
        key = json.dumps(args)
        if key in seen:
            continue
        seen.add(key)
        a, b = outcome(getattr(correct, f.name), args), outcome(getattr(buggy, f.name), args)
        if same_outcome(a, b) != differ:
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


def _issue(rng: Rng, package: str, api: FunctionTemplate, snippet: str, got: dict[str, Any],
           want: dict[str, Any]) -> str:
    title = rng.choice((f"`{api.name}` gives a wrong result", f"Unexpected result from `{package}.{api.name}`",
                        f"Bug in `{api.name}`?"))
    opener = rng.choice(("I ran into this while using", "Found a problem in", "Something looks off in"))
    expected = (f"I expected it to raise {want['raises']}" if "raises" in want
                else f"I expected `{want['value']!r}`")
    return (f"{title}\n\n{opener} {package}:\n\n```python\n{snippet}```\n\nThis {_show(got)}, but "
            f"{expected}: {api.expectation}.\n")


def _visible_tests(rng: Rng, package: str, constants: dict[str, Any], correct: dict[str, types.ModuleType],
                   buggy: dict[str, types.ModuleType]) -> dict[str, str]:
    """tests/test_<module>.py for each module: plain asserts on inputs where the bug does not show."""
    files = {}
    for module in MODULES:
        lines = [f'"""Tests of {package}.{module.name}."""\n\nfrom {package} import {module.name}\n']
        for f in module.functions:
            for i, args in enumerate(_inputs(rng, f, constants, correct[module.name], buggy[module.name],
                                             differ=False, want=2)):
                result = outcome(getattr(correct[module.name], f.name), args)
                call = f"{module.name}.{f.name}({', '.join(_py(a) for a in args)})"
                if "raises" in result:
                    body = (f"    try:\n        {call}\n    except {result['raises']}:\n        return\n"
                            f"    raise AssertionError('expected {result['raises']}')\n")
                else:
                    body = f"    assert {call} == {_py(result['value'])}\n"
                lines.append(f"\n\ndef test_{f.name}_{i}():\n{body}")
        files[f"tests/test_{module.name}.py"] = "".join(lines)
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
