"""A search for a fix that reads nothing: the snippet-driven mutation search.

It knows what the issue says (the snippet's call and the value the user expected) and the
package's files, and no template. It tries every single generic edit
(`trace_gym.coding.mutate.one_edit_away`) of the issue's function and then of each package
function it reaches, in that order, running the snippet and the visible tests on each in
this process, and keeps the first edit that gives the expected value with every visible
test passing. On coding-v0 it writes that file back and submits; on code_localization it
names the function it edited, else the issue's own. Before every bug had two slips, it
fixed most seeds this way (0.78 of train and 0.84 of test seeds, as an outside red team
measured it); the generator now refuses any bug that one such edit undoes on the issue's
inputs (`trace_gym.coding.repo`), so an edit it finds passes the snippet and fails a
hidden test.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from trace_gym.coding.mutate import one_edit_away

Policy = Callable[[Any, list], Any]


def _package_functions(task: dict[str, Any]) -> dict[str, tuple[str, ast.FunctionDef]]:
    """Function name -> (its module's name, its definition), over the package's modules."""
    out: dict[str, tuple[str, ast.FunctionDef]] = {}
    prefix = task["package"] + "/"
    for path, text in sorted(task["files"].items()):
        if path.startswith(prefix) and path.endswith(".py") and path.count("/") == 1 and not path.endswith("__init__.py"):
            for node in ast.parse(text).body:
                if isinstance(node, ast.FunctionDef):
                    out.setdefault(node.name, (path[len(prefix):-3], node))
    return out


def reached(task: dict[str, Any]) -> list[str]:
    """The issue's function, then every package function it reaches through its calls, in
    the order a reader following the calls meets them."""
    functions = _package_functions(task)
    order, queue = [], [task["api_function"]]
    while queue:
        name = queue.pop(0)
        if name in order or name not in functions:
            continue
        order.append(name)
        for node in ast.walk(functions[name][1]):
            if isinstance(node, ast.Call):
                func = node.func
                queue.append(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
    return order


def search_fix(task: dict[str, Any]) -> tuple[str, str, str] | None:
    """(the edited file's path, its new text, the function edited) of the first single
    generic edit that makes the issue's call give the expected value with every visible test
    passing; None when none does."""
    from trace_gym.coding.repo import load, module_sources, outcome, same_outcome, task_from_json, visible_tests_pass

    coding_task = task_from_json(task)
    modules = load(task["package"], module_sources(task["package"], task["files"]))
    functions = _package_functions(task)
    for name in reached(task):
        module_name, node = functions[name]
        path = f"{task['package']}/{module_name}.py"
        lines = task["files"][path].splitlines(keepends=True)
        source = "".join(lines[node.lineno - 1:node.end_lineno])
        namespace = modules[module_name].__dict__
        original = namespace[name]
        try:
            for tree in one_edit_away(source):
                try:
                    exec(compile(tree, path, "exec"), namespace)  # noqa: S102 - trace-gym's generated package
                except Exception:  # noqa: BLE001, S112 - an edit whose definition fails is no fix
                    continue
                got = outcome(getattr(modules[task["api_module"]], task["api_function"]), task["snippet_args"])
                if same_outcome(got, task["snippet_expected"]) and visible_tests_pass(coding_task, modules):
                    text = "".join(lines[:node.lineno - 1]) + ast.unparse(tree) + "\n" + "".join(lines[node.end_lineno:])
                    return path, text, name
        finally:
            namespace[name] = original
    return None


def mutation_search() -> Policy:
    """coding-v0: write the first edit `search_fix` finds, then submit."""

    def act(env: Any, obs: list) -> Any:
        turn = sum(1 for m in obs if m.get("role") == "assistant")
        found = search_fix(env.task.to_json()) if turn == 0 else None
        if found is not None:
            return {"name": "create_file", "arguments": {"path": found[0], "content": found[1]}}
        return {"name": "submit", "arguments": {}}

    return act


def mutation_locator() -> Policy:
    """code_localization: name the function of the first edit `search_fix` finds, else the
    function the issue calls."""

    def act(env: Any, obs: list) -> Any:
        task = env.task.to_json()
        found = search_fix(task)
        path, name = ((found[0], found[2]) if found is not None
                      else (f"{task['package']}/{task['api_module']}.py", task["api_function"]))
        return {"name": "report_location", "arguments": {"file": path, "function": name}}

    return act
