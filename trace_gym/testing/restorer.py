"""A template-aware restorer: the strongest adversary that reads code only.

It knows every template of `trace_gym.coding.templates` (held-out ones included: they ship
with the package), every constant and every knob value, and it reads the package's code,
never a docstring, the issue or a test. For each top-level definition it maps the seed's
names back through the pools, undoes the restyling (`trace_gym.coding.mutate.restyle`) and
compares the result with every filled-in version of its template. A definition that
matches none is the bug: the restorer puts the nearest version back (coding-v0) or names
it (code_localization).

Before knobs, this fixed every seed. A knob bug (`trace_gym.coding.repo.KNOB_BUG_SHARE`)
is the code of another knob value: it matches a correct version, so the restorer finds
nothing to fix, and only what the docstring or the issue says tells the two apart.
"""

from __future__ import annotations

import ast
import copy
import difflib
import itertools
from functools import cache
from typing import Any

from trace_gym.coding.templates import (
    ATTRIBUTES,
    CONSTANTS,
    FUNCTIONS,
    KNOBS,
    canonical,
    fill,
    knob_text,
    knobs_in,
    rename_prose,
)

Policy = Any


class _Canonical(ast.NodeTransformer):
    """Names mapped back to their canonical identifiers, docstrings dropped, restyling undone."""

    def __init__(self, seen: dict[str, str]) -> None:
        self.seen = seen
        """Canonical identifier -> the name this package gives it (filled in as it reads)."""

    def _back(self, name: str) -> str:
        key = canonical(name)
        if key is None:
            return name
        self.seen.setdefault(key, name)
        return key

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._back(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._back(node.arg)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        key = canonical(node.attr)
        if key in ATTRIBUTES:
            self.seen.setdefault(key, node.attr)
            node.attr = key
        return node

    def _defined(self, node: ast.FunctionDef | ast.ClassDef) -> ast.AST:
        node.name = self._back(node.name)
        if node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
                and isinstance(node.body[0].value.value, str):
            node.body = node.body[1:] or [ast.Pass()]
        return self.generic_visit(node)

    visit_FunctionDef = _defined
    visit_ClassDef = _defined

    def visit_Assign(self, node: ast.Assign) -> ast.AST:  # x = x + y -> x += y
        self.generic_visit(node)
        target, value = node.targets[0], node.value
        if (len(node.targets) == 1 and isinstance(target, ast.Name) and isinstance(value, ast.BinOp)
                and isinstance(value.left, ast.Name) and value.left.id == target.id):
            return ast.AugAssign(target=ast.Name(target.id, ast.Store()), op=value.op, value=value.right)
        return node

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        left = node.left
        if (len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq) and isinstance(left, ast.Call)
                and isinstance(left.func, ast.Name) and left.func.id == "len" and len(left.args) == 1
                and isinstance(left.args[0], ast.Name) and isinstance(node.comparators[0], ast.Constant)
                and node.comparators[0].value == 0):  # len(xs) == 0 -> not xs
            return ast.UnaryOp(ast.Not(), left.args[0])
        if len(node.ops) == 1 and type(node.ops[0]) in _MIRROR:
            flipped = ast.Compare(left=node.comparators[0], ops=[_MIRROR[type(node.ops[0])]()], comparators=[left])
            return min(node, flipped, key=ast.dump)
        return node


_MIRROR = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}


def _normal(node: ast.AST, seen: dict[str, str] | None = None) -> str:
    return ast.dump(_Canonical({} if seen is None else seen).visit(copy.deepcopy(node)))


def _top_level(source: str) -> dict[str, ast.stmt]:
    """Canonical name -> each top-level definition (function, class, constant) of a source."""
    out: dict[str, ast.stmt] = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[canonical(node.name) or node.name] = node
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out[canonical(node.targets[0].id) or node.targets[0].id] = node
    return out


@cache
def versions(held_out: bool = True) -> dict[str, dict[str, str]]:
    """Canonical definition name -> (normal form -> canonical source) of every version a seed
    can make of it: each value of the constants and knobs its template uses. `held_out`:
    the held-out templates too (else what train seeds show)."""
    out: dict[str, dict[str, str]] = {}
    for _, template in FUNCTIONS.values():
        if template.held_out and not held_out:
            continue
        constants = [n for n in CONSTANTS if f"@{n}@" in template.source]
        knobs = knobs_in(template.source)
        for values in itertools.product(*(CONSTANTS[n] for n in constants), *(range(len(KNOBS[n])) for n in knobs)):
            filled = fill(template.source, {**dict(zip(constants, values)),
                                            **knob_text(dict(zip(knobs, values[len(constants):])))})
            for name, node in _top_level(filled).items():
                out.setdefault(name, {})[_normal(node)] = ast.unparse(node)
    return out


def restore(files: dict[str, str], package: str, held_out: bool = True) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(the package's files with every definition that matches no version (`versions`) put
    back to the nearest one, the (file, name) of each such definition)."""
    known = versions(held_out)
    fixed: dict[str, str] = {}
    found: list[tuple[str, str]] = []
    for path, text in sorted(files.items()):
        if not (path.startswith(package + "/") and path.endswith(".py")):
            continue
        lines = text.splitlines(keepends=True)
        for name, node in sorted(_top_level(text).items(), key=lambda kv: -kv[1].lineno):
            if name not in known:
                continue
            seen: dict[str, str] = {}
            form = _normal(node, seen)
            if form in known[name]:
                continue
            nearest = max(known[name], key=lambda k: difflib.SequenceMatcher(None, form, k, autojunk=False).ratio())
            renamed = _Renamed(seen).visit(ast.parse(known[name][nearest]))
            lines[node.lineno - 1:node.end_lineno] = [ast.unparse(renamed) + "\n"]
            found.append((path, getattr(node, "name", name)))
        if "".join(lines) != text:
            fixed[path] = "".join(lines)
    return fixed, found


class _Renamed(ast.NodeTransformer):
    """Canonical names given back the package's own (those it was seen to use)."""

    def __init__(self, seen: dict[str, str]) -> None:
        self.seen = seen

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.seen.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.seen.get(node.arg, node.arg)
        return node

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        node.attr = self.seen.get(node.attr, node.attr) if node.attr in ATTRIBUTES else node.attr
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.ClassDef) -> ast.AST:
        node.name = self.seen.get(node.name, node.name)
        return self.generic_visit(node)

    visit_ClassDef = visit_FunctionDef


def restorer_fix(held_out: bool = True) -> Policy:
    """coding-v0: write back every file the restorer changed, then submit (`held_out`: it
    knows the held-out templates too)."""

    def act(env: Any, obs: list) -> Any:
        turn = sum(1 for m in obs if m.get("role") == "assistant")
        task = env.task.to_json()
        fixed, _ = restore(task["files"], task["package"], held_out)
        edits = [{"name": "create_file", "arguments": {"path": p, "content": t}} for p, t in sorted(fixed.items())]
        return edits[turn] if turn < len(edits) else {"name": "submit", "arguments": {}}

    return act


def restorer_locate(held_out: bool = True) -> Policy:
    """code_localization: name the first definition that matches no version (else the
    function the issue calls; `held_out` as for `restorer_fix`)."""

    def act(env: Any, obs: list) -> Any:
        task = env.task.to_json()
        _, found = restore(task["files"], task["package"], held_out)
        path, name = found[0] if found else (f"{task['package']}/{task['api_module']}.py", task["api_function"])
        return {"name": "report_location", "arguments": {"file": path, "function": name}}

    return act


# -- reading the docstring's behaviour words ---------------------------------------------------


def _template_of(name: str) -> Any:
    """The function template whose canonical name is `name`, or None."""
    entry = FUNCTIONS.get(name)
    return entry[1] if entry is not None else None


def _stated_knobs(template: Any, docstring: str, seen: dict[str, str]) -> dict[str, int]:
    """Knob -> the value whose words the docstring holds (the longest that appears; a knob
    whose words appear for no value is left out)."""
    stated = {}
    for knob in knobs_in(template.source):
        found = [(len(k.doc), i) for i, k in enumerate(KNOBS[knob]) if rename_prose(k.doc, seen) in docstring]
        if found:
            stated[knob] = max(found)[1]
    return stated


@cache
def _versions_with(name: str, stated: tuple[tuple[str, int], ...]) -> dict[str, str]:
    """Normal form -> canonical source of every version of `name`'s template with the knob
    values `stated` (every constant, and every value of the knobs not stated)."""
    template = _template_of(name)
    fixed = dict(stated)
    constants = [n for n in CONSTANTS if f"@{n}@" in template.source]
    knobs = knobs_in(template.source)
    out: dict[str, str] = {}
    for values in itertools.product(*(CONSTANTS[n] for n in constants),
                                    *((fixed[k],) if k in fixed else range(len(KNOBS[k])) for k in knobs)):
        filled = fill(template.source, {**dict(zip(constants, values)),
                                        **knob_text(dict(zip(knobs, values[len(constants):])))})
        node = _top_level(filled).get(name)
        if node is not None:
            out[_normal(node)] = ast.unparse(node)
    return out


def restore_stated(files: dict[str, str], package: str) -> dict[str, str]:
    """The package's files with every function put back to the nearest version its
    docstring states (its knob values read from the behaviour words), where it matches none
    of those: a knob bug is restored too, and two slips with it."""
    fixed: dict[str, str] = {}
    for path, text in sorted(files.items()):
        if not (path.startswith(package + "/") and path.endswith(".py")):
            continue
        lines = text.splitlines(keepends=True)
        for name, node in sorted(_top_level(text).items(), key=lambda kv: -kv[1].lineno):
            if not isinstance(node, ast.FunctionDef) or _template_of(name) is None:
                continue
            seen: dict[str, str] = {}
            form = _normal(node, seen)
            stated = _stated_knobs(_template_of(name), ast.get_docstring(node) or "", seen)
            known = _versions_with(name, tuple(sorted(stated.items())))
            if not known or form in known:
                continue
            nearest = max(known, key=lambda k: difflib.SequenceMatcher(None, form, k, autojunk=False).ratio())
            restored = _Renamed(seen).visit(ast.parse(known[nearest]))
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:  # the version's docstring is the template's; keep the package's own
                restored.body[0].body[0] = ast.Expr(ast.Constant(docstring))
            lines[node.lineno - 1:node.end_lineno] = [ast.unparse(restored) + "\n"]
        if "".join(lines) != text:
            fixed[path] = "".join(lines)
    return fixed


def docstring_restorer() -> Policy:
    """coding-v0: write back every file `restore_stated` changed, then submit: template
    knowledge and the docstring's behaviour words, no reading of what the code does."""

    def act(env: Any, obs: list) -> Any:
        turn = sum(1 for m in obs if m.get("role") == "assistant")
        task = env.task.to_json()
        edits = [{"name": "create_file", "arguments": {"path": p, "content": t}}
                 for p, t in sorted(restore_stated(task["files"], task["package"]).items())]
        return edits[turn] if turn < len(edits) else {"name": "submit", "arguments": {}}

    return act
