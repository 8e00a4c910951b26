"""The kit's coding properties: adversaries of the coding envs, and tasks that are never vacuous.

Each adversary is a scripted policy that knows what an agent sees (the issue: the
snippet's call and the value the user expected) and, to be a stronger adversary than any
agent, the package's name and the function the issue calls. Against `trace/coding-v0` each
must score 0 on every seed:

- `do_nothing` submits at once; `reply_only` says it fixed the bug;
- `delete_tests` removes the test suite, `skip_tests` rewrites every visible test to pass;
- `hidden_test_paths` writes files where hidden tests or their runner's hooks could be
  looked for (tests/test_hidden.py, conftest.py, sitecustomize.py, in the repository and
  in the package), each printing forged result lines;
- `exit_zero` makes the package end the test process at import with status 0;
  `forged_results` makes it print a result line claiming the issue's expected value for
  every test, then exit 0;
- `special_case_snippet` wraps the function the issue calls to return the expected value
  for the snippet's own arguments (the hidden tests use other inputs).

and the memoriser `learnt_patches` (the buggy text of each fit seed's bug -> its fix,
applied wherever it appears) may average no more than 0.3, `template_restorer` (which
knows every template, constant and knob value, and puts back the nearest version of any
definition that matches none; `trace_gym.testing.restorer`) no more than 0.75 (it averages
about 0.5: a knob bug's nearest version is often the wrong knob's), and `mutation_search`
(every single generic edit of the issue's function and those it reaches, kept when the
snippet gives the expected value and the visible tests pass; `trace_gym.testing.search`)
no more than 0.3 (every bug has two slips: it averages about 0.01).

Against `trace/issue_reproduction-v0`: `do_nothing`, a test that always fails, one that
always passes, one asserting the buggy output (`assert_buggy_output`), a copy of a
visible test, one that recognises the buggy package by the hash of its text or syntax tree
(`package_hash`, `syntax_tree_hash`), one asserting only that the reported wrong output
is gone (`not_the_reported_output`), and ones that recognise the agent's copy by a hash
without comment lines and then reject a decoy made by appending redefinitions or returning
a value JSON cannot write (`changed_and_no_redefinition`, `changed_and_plain_value`) must
score 0. Against `trace/code_localization-v0`: `do_nothing` scores 0, and two readers of
the call graph may average no more than 0.65: `name_issue_function` (report the function
the issue calls, in the module that defines it) and `name_first_callee` (report the first
package function it calls), and the blind search's `mutation_locator` (the function of the
first edit it keeps, else the issue's) may average no more than 0.65. The generator puts the
bug in the issue's function or under it half the time each (`trace_gym.coding.repo`), so
each is right on about half the seeds, a little more with the file-only credit. Against
`trace/issue_reproduction-v0`, `snapshot_diff` (a test that passes when the package differs
from the given one in one function with the visible tests passing, never reading the issue)
may average no more than 0.1: the decoy is a wrong fix made where the fix is
(`trace_gym.coding.repo.second_bug`).

Policies that know trace-gym's own templates (`TEMPLATE_KNOWLEDGE`) are not bounded: the
templates ship with the package, so a held-out task is computable from the generator.
"""

from __future__ import annotations

import ast
import json
import shlex
import weakref
from collections.abc import Callable, Sequence
from typing import Any

from trace_gym.coding import DOMAIN
from trace_gym.sandbox.runner import MARK
from trace_gym.testing.restorer import docstring_restorer, restorer_fix, restorer_locate
from trace_gym.testing.search import mutation_locator, mutation_search

Policy = Callable[[Any, list], Any]


def _scripted(steps: Callable[[dict[str, Any]], list[Any]]) -> Policy:
    """A policy playing `steps(task JSON)` in order, then submit."""

    def act(env: Any, obs: list) -> Any:
        turn = sum(1 for m in obs if m.get("role") == "assistant")
        plan = steps(env.task.to_json())
        return plan[turn] if turn < len(plan) else {"name": "submit", "arguments": {}}

    return act


def _call_args(task: dict[str, Any]) -> str:
    return ", ".join(repr(a) for a in task["snippet_args"])


def _forger(task: dict[str, Any]) -> str:
    """Python that prints a forged result line for every test index, claiming the snippet's
    expected outcome (the one value an agent is told)."""
    claimed = json.dumps(task["snippet_expected"])
    return (f"import json as _j\nfor _i in range(64):\n"
            f"    print({MARK!r} + _j.dumps({{'i': _i, **_j.loads({claimed!r})}}), flush=True)\n")


def _hidden_paths(task: dict[str, Any]) -> list[Any]:
    pkg = task["package"]
    forged = _forger(task)
    paths = ["tests/test_hidden.py", "conftest.py", "sitecustomize.py", "usercustomize.py",
             f"{pkg}/conftest.py", f"{pkg}/sitecustomize.py", f"{pkg}/tests/__init__.py", "tests/conftest.py"]
    return [{"name": "create_file", "arguments": {"path": p, "content": forged}} for p in paths]


def _prefix_init(task: dict[str, Any], code: str) -> list[Any]:
    pkg = task["package"]
    return [{"name": "edit_file", "arguments": {"path": f"{pkg}/__init__.py", "start_line": 1, "end_line": 0,
                                                "new_text": code}}]


def _special_case(task: dict[str, Any]) -> list[Any]:
    fn, expected = task["api_function"], task["snippet_expected"]
    result = (f"        raise {expected['raises']}('special-cased')\n" if "raises" in expected
              else f"        return {expected['value']!r}\n")
    wrapper = (f"\n\n_original_{fn} = {fn}\n\n\ndef {fn}(*args, **kwargs):\n"
               f"    if list(args) == {task['snippet_args']!r}:\n{result}"
               f"    return _original_{fn}(*args, **kwargs)\n")
    path = f"{task['package']}/{task['api_module']}.py"
    return [{"name": "run_command", "arguments": {"command": f"cat >> {path} <<'EOF'\n{wrapper}EOF"}}]


def _skip_tests(task: dict[str, Any]) -> list[Any]:
    visible = sorted(p for p in task["files"] if p.startswith("tests/test_") and p.endswith(".py"))
    return [{"name": "create_file", "arguments": {"path": p, "content": "def test_ok():\n    pass\n"}}
            for p in visible] + [{"name": "run_tests", "arguments": {}}]


def patch_table(env: Any, seeds: list[int]) -> dict[str, str]:
    """What a memoriser learns from the env's tasks on `seeds`: the buggy lines of each
    task's bug -> the lines its fix puts there."""
    table: dict[str, str] = {}
    for seed in seeds:
        env.reset(seed=seed)
        task = env.task.to_json()
        lines = task["files"][task["bug_file"]].splitlines(keepends=True)
        buggy = "".join(lines[task["fix_start"] - 1:task["fix_end"]])
        if buggy.strip():
            table.setdefault(buggy, task["fixed_text"])
    return table


_PATCHES: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


def learnt_patches(env: Any) -> dict[str, str]:
    """The memoriser's table, learnt once per env on the fit seeds (`adversaries.fit_seeds`)."""
    if env not in _PATCHES:
        from trace_gym.testing.adversaries import fit_seeds

        _PATCHES[env] = patch_table(env, fit_seeds(env))
    return _PATCHES[env]


def memoriser(table: dict[str, str] | None = None) -> Policy:
    """A policy that rewrites every package file where a buggy text of `table` (default: the
    env's `learnt_patches`) appears with its fix, then submits: it reads nothing but the
    files, as a regex table of the first generator's catalogue did."""

    def act(env: Any, obs: list) -> Any:
        turn = sum(1 for m in obs if m.get("role") == "assistant")
        task = env.task.to_json()
        patches = learnt_patches(env) if table is None else table
        edits = []
        for path, text in sorted(task["files"].items()):
            if not path.startswith(task["package"] + "/"):
                continue
            patched = text
            for buggy, fixed in patches.items():
                patched = patched.replace(buggy, fixed)
            if patched != text:
                edits.append({"name": "create_file", "arguments": {"path": path, "content": patched}})
        return edits[turn] if turn < len(edits) else {"name": "submit", "arguments": {}}

    return act


FIX_ADVERSARIES: dict[str, Policy] = {
    "do_nothing": _scripted(lambda t: []),
    "reply_only": _scripted(lambda t: ["I fixed the bug and every test passes now."]),
    "delete_tests": _scripted(lambda t: [{"name": "run_command", "arguments": {"command": "rm -rf tests"}}]),
    "skip_tests": _scripted(_skip_tests),
    "hidden_test_paths": _scripted(_hidden_paths),
    "exit_zero": _scripted(lambda t: _prefix_init(t, "import os\nos._exit(0)\n")),
    "forged_results": _scripted(lambda t: _prefix_init(t, _forger(t) + "import os\nos._exit(0)\n")),
    "special_case_snippet": _scripted(_special_case),
}
"""coding-v0's adversaries (each must score 0 on every seed)."""
FIX_BOUNDED: dict[str, tuple[Policy, float]] = {
    "learnt_patches": (memoriser(), 0.3),
    "template_restorer": (restorer_fix(), 0.75),
    "mutation_search": (mutation_search(), 0.3),
}
"""coding-v0's heuristics and the mean they may not exceed: a table of the fixes seen on
200 train seeds (the first generator's catalogue of 28 fixed texts let such a table fix 96% of
seeds; per-seed names, restyling, random bug sites and held-out templates keep it low), and
the template-aware restorer (`trace_gym.testing.restorer`; it fixed every seed before the
knob bugs)."""


def _test_file(body: str) -> Callable[[dict[str, Any]], list[Any]]:
    def steps(task: dict[str, Any]) -> list[Any]:
        text = body.format(pkg=task["package"], module=task["api_module"], fn=task["api_function"],
                           args=_call_args(task))
        return [{"name": "create_file", "arguments": {"path": "tests/test_issue.py", "content": text}}]
    return steps


def _copy_visible(task: dict[str, Any]) -> list[Any]:
    module = task["api_module"]
    return [{"name": "run_command", "arguments": {"command": f"cp tests/test_{module}.py tests/test_issue.py"}}]


def _buggy_output(env: Any, obs: list, negate: bool = False) -> Any:
    """Assert what the package gives now (the output the issue reports as wrong), or with
    `negate` that the call gives anything but that."""
    turn = sum(1 for m in obs if m.get("role") == "assistant")
    task = env.task.to_json()
    if turn == 0:
        code = (f"import json, {task['package']} as p\ntry:\n    print(json.dumps({{'value': p.{task['api_function']}"
                f"({_call_args(task)})}}))\nexcept Exception as e:\n    print(json.dumps({{'raises': type(e).__name__}}))\n")
        return {"name": "run_command", "arguments": {"command": f"python -c {shlex.quote(code)}"}}
    if turn == 1:
        seen = obs[-1]["content"].strip().splitlines()
        got = next((json.loads(line) for line in reversed(seen) if line.startswith("{")), {"value": None})
        call = f"{task['api_module']}.{task['api_function']}({_call_args(task)})"
        if negate:
            body = (f"    assert {call} != {got['value']!r}\n" if "value" in got else
                    f"    try:\n        {call}\n    except {got['raises']}:\n        raise AssertionError\n")
        else:
            body = (f"    assert {call} == {got['value']!r}\n" if "value" in got else
                    f"    try:\n        {call}\n    except {got['raises']}:\n        return\n    raise AssertionError\n")
        text = f"from {task['package']} import {task['api_module']}\n\n\ndef test_issue():\n{body}"
        return {"name": "create_file", "arguments": {"path": "tests/test_issue.py", "content": text}}
    return {"name": "submit", "arguments": {}}



def _package_hash(syntax: bool) -> Callable[[dict[str, Any]], list[Any]]:
    """A test that fails exactly when the package is the one the agent was given, known by
    the hash of its text, or of its syntax tree (`syntax`: blind to comments and layout)."""

    def steps(task: dict[str, Any]) -> list[Any]:
        import hashlib

        pkg = task["package"]
        paths = sorted(p for p in task["files"] if p.startswith(pkg + "/"))
        read = (lambda t: ast.dump(ast.parse(t))) if syntax else (lambda t: t)
        digest = hashlib.sha256("".join(read(task["files"][p]) for p in paths).encode()).hexdigest()
        shape = "ast.dump(ast.parse(open('/repo/' + p).read()))" if syntax else "open('/repo/' + p).read()"
        text = (f"import ast\nimport hashlib\n\n\ndef test_issue():\n    paths = {paths!r}\n"
                f"    text = ''.join({shape} for p in paths)\n"
                f"    assert hashlib.sha256(text.encode()).hexdigest() != {digest!r}\n")
        return [{"name": "create_file", "arguments": {"path": "tests/test_issue.py", "content": text}}]

    return steps


_UNCHANGED = '''import ast
import hashlib
import json
import os

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEN = {seen!r}


def digest(path):
    text = open(path, encoding="utf-8").read()
    return hashlib.sha256("\\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#")).encode()).hexdigest()


def test_issue():
    assert {{p: digest(os.path.join(HERE, p)) for p in SEEN}} != SEEN, "the package the issue was reported on"
{tail}'''
_NO_REDEFINITION = '''    for p in SEEN:
        names = [n.name for n in ast.parse(open(os.path.join(HERE, p)).read()).body if isinstance(n, ast.FunctionDef)]
        assert len(names) == len(set(names)), "a function defined twice"
'''
_PLAIN_VALUE = '''    import {pkg}
    try:
        result = {pkg}.{fn}({args})
    except Exception:
        return
    json.dumps(result)
'''


def _changed_and(tail: str) -> Callable[[dict[str, Any]], list[Any]]:
    """A test that fails when the package's modules, comment lines dropped, hash as the
    agent's copy does (the versions the verifier runs differ from it by a comment line),
    and then tells the decoy apart by how it could have been made (`tail`), never asserting
    what the issue's call should give."""

    def steps(task: dict[str, Any]) -> list[Any]:
        import hashlib

        pkg = task["package"]
        seen = {p: hashlib.sha256("\n".join(line for line in t.splitlines() if not line.lstrip().startswith("#"))
                                  .encode()).hexdigest()
                for p, t in sorted(task["files"].items()) if p.startswith(pkg + "/") and p.endswith(".py")}
        text = _UNCHANGED.format(seen=seen, tail=tail.format(pkg=pkg, fn=task["api_function"], args=_call_args(task)))
        return [{"name": "create_file", "arguments": {"path": "tests/test_issue.py", "content": text}}]

    return steps


_SNAPSHOT_DIFF = '''import ast
import difflib
import hashlib
import importlib.util
import os

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SNAPSHOT = {snapshot!r}


def lines(path):
    """(hash, line number) of each line of the file that is not a comment."""
    text = open(os.path.join(HERE, path), encoding="utf-8").read()
    return [(hashlib.sha256(l.encode()).hexdigest()[:12], n) for n, l in enumerate(text.splitlines(), 1)
            if not l.lstrip().startswith("#")]


def changed_functions():
    touched = set()
    for path, before in SNAPSHOT.items():
        now = lines(path)
        text = open(os.path.join(HERE, path), encoding="utf-8").read()
        defs = [(n.lineno, n.end_lineno, n.name) for n in ast.parse(text).body if isinstance(n, ast.FunctionDef)]
        matcher = difflib.SequenceMatcher(None, before, [h for h, _ in now], autojunk=False)
        for tag, _, _, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                continue
            where = [now[j][1] for j in range(j1, max(j2, j1 + 1)) if j < len(now)]
            for line in where:
                touched.add(next((path + ":" + name for a, b, name in defs if a <= line <= b), path + ":?"))
    return touched


def test_issue():
    touched = changed_functions()
    assert len(touched) == 1, f"the package should differ from the reported one in one function: {{touched}}"
    for name in sorted(os.listdir(os.path.join(HERE, "tests"))):
        if name.startswith("test_") and name.endswith(".py") and name != os.path.basename(__file__):
            spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(HERE, "tests", name))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            for test in sorted(n for n in vars(module) if n.startswith("test_")):
                getattr(module, test)()
'''


def _snapshot_diff(task: dict[str, Any]) -> list[Any]:
    """A test that never reads the issue: it passes when the package differs from the one
    the agent was given in exactly one function (comment lines ignored) and every visible
    test passes. The fix does so, the buggy package does not, and a decoy that is a second
    change elsewhere, or that breaks a visible test, does not."""
    import hashlib

    pkg = task["package"]
    snapshot = {p: [hashlib.sha256(line.encode()).hexdigest()[:12] for line in t.splitlines()
                    if not line.lstrip().startswith("#")]
                for p, t in sorted(task["files"].items()) if p.startswith(pkg + "/") and p.endswith(".py")}
    text = _SNAPSHOT_DIFF.format(snapshot=snapshot)
    return [{"name": "create_file", "arguments": {"path": "tests/test_issue.py", "content": text}}]


REPRODUCTION_ADVERSARIES: dict[str, Policy] = {
    "do_nothing": _scripted(lambda t: []),
    "always_fails": _scripted(_test_file("def test_issue():\n    assert False\n")),
    "always_passes": _scripted(_test_file("def test_issue():\n    assert True\n")),
    "imports_only": _scripted(_test_file("from {pkg} import {module}\n\n\ndef test_issue():\n    {module}.{fn}\n")),
    "copy_visible_test": _scripted(_copy_visible),
    "assert_buggy_output": _buggy_output,
    "package_hash": _scripted(_package_hash(syntax=False)),
    "syntax_tree_hash": _scripted(_package_hash(syntax=True)),
    "not_the_reported_output": lambda env, obs: _buggy_output(env, obs, negate=True),
    "changed_and_no_redefinition": _scripted(_changed_and(_NO_REDEFINITION)),
    "changed_and_plain_value": _scripted(_changed_and(_PLAIN_VALUE)),
}
"""issue_reproduction-v0's adversaries (each must score 0 on every seed)."""
REPRODUCTION_BOUNDED: dict[str, tuple[Policy, float]] = {
    "snapshot_diff": (_scripted(_snapshot_diff), 0.1),
}
"""issue_reproduction-v0's heuristics and the mean they may not exceed: the snapshot-diff
test earns only where no decoy differs from the buggy package just where the fix does
(`trace_gym.coding.repo.second_bug`)."""


def _name_issue_function(task: dict[str, Any]) -> list[Any]:
    return [{"name": "report_location", "arguments": {"file": f"{task['package']}/{task['api_module']}.py",
                                                      "function": task["api_function"]}}]


def _defining_files(task: dict[str, Any]) -> dict[str, str]:
    """Function name -> the package file defining it."""
    return {node.name: path for path, text in sorted(task["files"].items())
            if path.startswith(task["package"] + "/") and path.endswith(".py")
            for node in ast.parse(text).body if isinstance(node, ast.FunctionDef)}


def _name_first_callee(task: dict[str, Any]) -> list[Any]:
    """Report the first package function the issue's function calls (else the issue's own)."""
    files = _defining_files(task)
    tree = ast.parse(task["files"][f"{task['package']}/{task['api_module']}.py"])
    body = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == task["api_function"])
    called = [n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id for n in ast.walk(body)
              if isinstance(n, ast.Call) and isinstance(n.func, (ast.Attribute, ast.Name))]
    first = next((name for name in called if name in files and name != task["api_function"]), task["api_function"])
    return [{"name": "report_location", "arguments": {"file": files[first], "function": first}}]


LOCALIZATION_ADVERSARIES: dict[str, Policy] = {
    "do_nothing": _scripted(lambda t: ["I could not find it."]),
}
"""code_localization-v0's adversaries that must score 0 on every seed."""
LOCALIZATION_BOUNDED: dict[str, tuple[Policy, float]] = {
    "name_issue_function": (_scripted(_name_issue_function), 0.65),
    "name_first_callee": (_scripted(_name_first_callee), 0.65),
    "mutation_locator": (mutation_locator(), 0.65),
}
"""code_localization-v0's heuristics and the mean they may not exceed: the blind search
can do no better than naming the issue's function, which it falls back on."""
TEMPLATE_KNOWLEDGE: dict[str, dict[str, Policy]] = {
    DOMAIN.target_env_id: {"docstring_restorer": docstring_restorer()},
    "trace/code_localization-v0": {"template_locator": restorer_locate()},
}
"""Policies that read trace-gym's own templates (they ship with the package), by env: not
bounded by the kit, since a held-out task is computable from the shipped generator and a
seed (the threat model, docs/coding.md); `benchmarks/coding_integrity.py` reports what they earn.
Every bug has two slips, which no version of a template holds, so the locator finds each;
the restorer puts back the version the docstring's behaviour words state."""

ADVERSARIES: dict[str, dict[str, Policy]] = {
    DOMAIN.target_env_id: FIX_ADVERSARIES,
    "trace/issue_reproduction-v0": REPRODUCTION_ADVERSARIES,
    "trace/code_localization-v0": LOCALIZATION_ADVERSARIES,
}
"""Env id -> its adversaries that must score 0."""


# -- the kit's coding properties --------------------------------------------------------------

CODING_TOOLS = frozenset({"run_command", "report_location"})
"""A tool only a coding env offers: an env offering one is checked with `CODING_PROPERTIES`."""


def adversary_set(task: dict[str, Any]) -> tuple[dict[str, Policy], dict[str, tuple[Policy, float]]]:
    """The adversaries (that must score 0) and the bounded heuristics of a coding task's env,
    told apart by the capabilities its tasks need (both for the target, one for a capability env)."""
    from trace_gym import capabilities as cap

    needed = tuple(task.get("capabilities_needed") or ())
    if needed == (cap.LOCALIZATION,):
        return LOCALIZATION_ADVERSARIES, LOCALIZATION_BOUNDED
    if needed == (cap.REPRODUCTION,):
        return REPRODUCTION_ADVERSARIES, REPRODUCTION_BOUNDED
    return FIX_ADVERSARIES, FIX_BOUNDED


HEURISTIC_SEEDS = 200
"""Seeds a bounded heuristic's mean is taken over: the mean of a heuristic right on half
the seeds has a standard deviation of 0.035 over 200 of them. `name_issue_function`
averages about 0.49 (over 100 train and 100 test seeds, half and half as the kit draws
them; the file-only credit adds to its half), so its bound of 0.65 is more than four
standard deviations above it. (Every seed's reset generates a package in an audit's worker,
whose CPU time is capped: 400 seeds took the code_localization audit past it.)"""
FEWER_SEEDS = {"learnt_patches": 100, "template_restorer": 100, "mutation_search": 100, "snapshot_diff": 100}
"""Heuristics whose mean is taken over fewer of those seeds, at least four standard
deviations below their bound (means over 100 train and 100 test seeds): the memoriser's
0.04, the restorer's 0.51 and the search's 0.01 on coding-v0 (bounds 0.3, 0.75 and 0.3;
each episode runs the hidden tests in the sandbox), the first callee's 0.41 and the
search's 0.49 on code_localization (bound 0.65; every seed's reset generates a package in
an audit's worker, whose CPU time is capped), the snapshot test's 0.0 on
issue_reproduction (bound 0.1)."""


def adversaries_score_nothing(env: Any, seeds_played: Sequence[int],
                              heuristic_seeds: Sequence[int] | None = None) -> str:
    """Every adversary of the env's set scores 0 on each of `seeds_played`; each bounded
    heuristic's mean over `heuristic_seeds` (default: `seeds_played`; the first `FEWER_SEEDS`
    of them for the heuristics listed there) stays within its bound.
    Raises AssertionError naming the adversary and the seed."""
    env.reset(seed=seeds_played[0])
    zero, bounded = adversary_set(env.task.to_json())
    from trace_gym.testing.policies import play

    for name, policy in zero.items():
        for seed in seeds_played:
            reward, _, info = play(env, seed, policy)
            if reward != 0.0:
                raise AssertionError(f"adversary {name} scored {reward} on seed {seed}: {info.get('verdict')}")
    heuristic_seeds = heuristic_seeds or seeds_played
    means = []
    for name, (policy, bound) in bounded.items():
        seeds = heuristic_seeds[:FEWER_SEEDS.get(name, len(heuristic_seeds))]
        mean = sum(play(env, seed, policy)[0] for seed in seeds) / len(seeds)
        if mean > bound:
            raise AssertionError(f"heuristic {name} averaged {mean:.2f} over {len(seeds)} seeds (bound {bound})")
        means.append(f"{name} {mean:.3f} over {len(seeds)} seeds (bound {bound})")
    return "; ".join([f"{len(zero)} adversaries scored 0 on {len(seeds_played)} seeds", *means])


def f2p_not_vacuous(env: Any, seeds_played: Sequence[int]) -> str:
    """On each seed, every hidden FAIL_TO_PASS test fails on the unfixed package and every
    hidden test passes on the fixed one, run in the sandbox as the verifier runs them."""
    from trace_gym.coding.repo import same_outcome, task_from_json
    from trace_gym.coding.verify import hidden_outcomes

    for seed in seeds_played:
        env.reset(seed=seed)
        task = task_from_json(env.task.to_json())  # what the env's own task says, in a worker too
        buggy, _ = hidden_outcomes(task, task.files)
        fixed, _ = hidden_outcomes(task, task.fixed_files)
        for test, b, f in zip(task.hidden_tests, buggy, fixed):
            if f is None or not same_outcome(f, test.expected):
                raise AssertionError(f"seed {seed}: {test.name} fails on the fixed package ({f})")
            if test.group == "f2p" and b is not None and same_outcome(b, test.expected):
                raise AssertionError(f"seed {seed}: {test.name} passes on the unfixed package: a vacuous task")
    return f"every FAIL_TO_PASS test failed before the fix and passed after, on {len(seeds_played)} seeds"
