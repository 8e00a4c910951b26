"""Edits of a function's syntax tree: restyling that keeps its meaning, and the injected bug.

A coding task's functions come from a few templates, so their text alone would let a
program memorise one patch per catalogue entry. Per seed, the generator therefore
restyles each function (`restyle`: a comparison written the other way round, `x += y`
spelt `x = x + y`, `not xs` spelt `len(xs) == 0`) and injects the bug at a random site of
the target function's tree (`sites`, `mutate`) rather than as a fixed text.

Bug kinds and the edits that make them (each site is one node and one edit):

- off_by_one: an integer constant plus or minus 1; `len(x)` becomes `len(x) - 1` or `+ 1`.
- wrong_comparison: `<` and `<=` (or `>` and `>=`) swapped; `==` and `!=` swapped.
- wrong_operator: `+` and `-` swapped, `*` made `+`, `/` and `//` swapped, `and` and `or`
  swapped.
- swapped_arguments: a call's two neighbouring positional arguments swapped.
- missing_edge_case: a guard clause (`if ...:` ending in return, raise or continue, without
  else) removed; `x.lower()` (or strip, upper) becoming `x`; `max(a, b)` or `min(a, b)`
  becoming `b`.
- wrong_default: a parameter's constant default changed.
- mutated_constant: an integer constant of 2 or more multiplied or divided by 10.

Inside a `while` loop only a comparison made strict is allowed (`<=` to `<`): any other
edit there could make the loop endless, and the generator runs the buggy package in
process. Whether an edit is a bug at all (it changes what the function gives on some
input) is checked by the generator on drawn inputs, not here.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from trace_gym.rng import Rng

BUG_KINDS = ("off_by_one", "wrong_comparison", "swapped_arguments", "missing_edge_case",
             "wrong_default", "mutated_constant", "wrong_operator")
"""Every kind of bug a site can make."""

_STRICT: dict[type[ast.cmpop], type[ast.cmpop]] = {ast.LtE: ast.Lt, ast.GtE: ast.Gt}
_COMPARISON_SWAPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq}
_MIRRORED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
_OPERATOR_SWAPS: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Add, ast.Div: ast.FloorDiv, ast.FloorDiv: ast.Div}
_DROPPED_METHODS = frozenset({"lower", "strip", "upper"})
_GUARD_ENDS = (ast.Return, ast.Raise, ast.Continue)


@dataclass(frozen=True)
class Site:
    """One place a bug can be injected: the node's index in `_nodes` order and the edit."""

    kind: str
    node: int
    edit: str


def _nodes(tree: ast.AST) -> list[tuple[ast.AST, bool]]:
    """Every node of `tree` in a fixed order, each with whether it lies inside a while loop."""
    out: list[tuple[ast.AST, bool]] = []

    def visit(node: ast.AST, in_loop: bool) -> None:
        out.append((node, in_loop))
        inside = in_loop or isinstance(node, ast.While)
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return out


def node_lines(tree: ast.AST) -> list[set[int]]:
    """The lines each node spans, in `Site.node` order (empty for a node without a position)."""
    return [set(range(n.lineno, (getattr(n, "end_lineno", None) or n.lineno) + 1)) if hasattr(n, "lineno") else set()
            for n, _ in _nodes(tree)]


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the constants that are docstrings (never edited)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _int_constant(node: ast.AST) -> int | None:
    """Return the value of `node` when it is an integer constant (not a bool), else None."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


_Node = TypeVar("_Node", bound=ast.AST)


def _node_as(node: ast.AST, kind: type[_Node], edit: str) -> _Node:
    """Return `node` as the node class `edit` applies to, or raise TypeError for any other node.

    Any other node means the edit was found in another tree than the one it is made in.
    """
    if not isinstance(node, kind):
        raise TypeError(f"the edit {edit!r} applies to an ast.{kind.__name__}, not to an ast.{type(node).__name__}")
    return node


def _guard(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and not node.orelse and isinstance(node.body[-1], _GUARD_ENDS))


def _defaults(tree: ast.AST) -> set[int]:
    return {id(d) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) for d in n.args.defaults}


def sites(tree: ast.AST) -> list[Site]:
    """Every site of `tree` where an edit of a bug kind applies (see the module docstring)."""
    docs, defaults = _docstrings(tree), _defaults(tree)
    found: list[Site] = []
    for index, (node, in_loop) in enumerate(_nodes(tree)):
        if in_loop:
            if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _STRICT:
                found.append(Site("wrong_comparison", index, "swap"))
            continue
        if id(node) in defaults and isinstance(node, ast.Constant) and id(node) not in docs:
            found.append(Site("wrong_default", index, "change"))
            continue
        value = _int_constant(node)
        if value is not None:
            found += [Site("off_by_one", index, "+1"), Site("off_by_one", index, "-1")]
            if abs(value) >= 2:
                found.append(Site("mutated_constant", index, "*10"))
            if abs(value) >= 10:
                found.append(Site("mutated_constant", index, "/10"))
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARISON_SWAPS:
            found.append(Site("wrong_comparison", index, "swap"))
        elif (isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _OPERATOR_SWAPS
              or isinstance(node, ast.BoolOp)):
            found.append(Site("wrong_operator", index, "swap"))
        elif isinstance(node, ast.Call):
            found += _call_sites(node, index)
        elif _guard(node):
            found.append(Site("missing_edge_case", index, "drop"))
    return found


def _call_sites(node: ast.Call, index: int) -> list[Site]:
    found = []
    positional = [a for a in node.args if not isinstance(a, ast.Starred)]
    if len(positional) == len(node.args) >= 2:
        found += [Site("swapped_arguments", index, f"swap{i}") for i in range(len(node.args) - 1)
                  if ast.dump(node.args[i]) != ast.dump(node.args[i + 1])]
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in _DROPPED_METHODS and not node.args:
        found.append(Site("missing_edge_case", index, "receiver"))
    if isinstance(func, ast.Name) and func.id in ("max", "min") and len(node.args) == 2:
        found.append(Site("missing_edge_case", index, "second"))
    if isinstance(func, ast.Name) and func.id == "len" and len(node.args) == 1:
        found += [Site("off_by_one", index, "len-1"), Site("off_by_one", index, "len+1")]
    return found


class _Replace(ast.NodeTransformer):
    """Replace one node (by identity) with another, or drop it (None)."""

    def __init__(self, old: ast.AST, new: ast.AST | None) -> None:
        self.old, self.new = old, new

    def visit(self, node: ast.AST) -> ast.AST | None:
        if node is self.old:
            return self.new
        return super().visit(node)


def mutate(tree: ast.Module, site: Site) -> ast.Module:
    """`tree` with the site's edit made (in place; returned for chaining)."""
    node, _ = _nodes(tree)[site.node]
    new: ast.AST | None = node
    if site.kind in ("off_by_one", "mutated_constant") and isinstance(node, ast.Constant):
        value = _int_constant(node)
        if value is None:
            raise TypeError(f"the edit {site.edit!r} applies to an integer constant, not to {node.value!r}")
        node.value = {"+1": value + 1, "-1": value - 1, "*10": value * 10, "/10": value // 10}[site.edit]
    elif site.edit in ("len-1", "len+1"):
        new = ast.BinOp(left=_node_as(node, ast.Call, site.edit), op=ast.Sub() if site.edit == "len-1" else ast.Add(),
                        right=ast.Constant(1))
    elif site.kind == "wrong_default":
        constant = _node_as(node, ast.Constant, site.kind)
        default = constant.value
        constant.value = (default + 1 if type(default) is int else default * 2 if isinstance(default, float)
                          else " " if default != " " else "")
    elif site.kind == "wrong_comparison":
        compare = _node_as(node, ast.Compare, site.kind)
        compare.ops = [_COMPARISON_SWAPS[type(compare.ops[0])]()]  # inside a loop, only <= and >= are sites
    elif site.kind == "wrong_operator":
        if isinstance(node, ast.BoolOp):
            node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            node.op = _OPERATOR_SWAPS[type(node.op)]()
        else:
            raise TypeError(f"the edit {site.kind!r} applies to an operator, not to an ast.{type(node).__name__}")
    elif site.kind == "swapped_arguments":
        call = _node_as(node, ast.Call, site.kind)
        i = int(site.edit.removeprefix("swap"))
        call.args[i], call.args[i + 1] = call.args[i + 1], call.args[i]
    elif site.edit == "drop":
        new = None
    elif site.edit == "receiver":
        new = _node_as(_node_as(node, ast.Call, site.edit).func, ast.Attribute, site.edit).value
    elif site.edit == "second":
        new = _node_as(node, ast.Call, site.edit).args[1]
    if new is not node:
        _Replace(node, new).visit(tree)
        _fill_empty_bodies(tree)
    return ast.fix_missing_locations(tree)


def _fill_empty_bodies(tree: ast.AST) -> None:
    """A block left empty by a dropped guard gets `pass` (still valid Python)."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if body == []:
            body.append(ast.Pass())


# -- a decoy's edit ----------------------------------------------------------------------------


class _NearReturns(ast.NodeTransformer):
    """Every `return X` of a function made to return a near value of the kind the issue's
    call gives (a number plus one, a text with a letter more, a list with an item more, a
    dict with a key more, the other truth value, 0 in place of None: an absent item's
    index); where the issue expects an exception, the function returns None first."""

    def __init__(self, kind: type | None) -> None:
        self.kind = kind

    def visit_Return(self, node: ast.Return) -> ast.AST:
        value = node.value
        if value is None or self.kind is None:
            return node
        if self.kind is bool:
            near: ast.expr = ast.UnaryOp(ast.Not(), value)
        elif self.kind is dict:
            near = ast.Dict(keys=[None, ast.Constant("more")], values=[value, ast.Constant(0)])
        elif self.kind is list:
            near = ast.BinOp(value, ast.Add(), ast.List([ast.Constant(0)], ast.Load()))
        elif self.kind is str:
            near = ast.BinOp(value, ast.Add(), ast.Constant("s"))
        elif self.kind is type(None):  # `X if X is not None else 0`: the templates' returns are pure
            near = ast.IfExp(ast.Compare(value, [ast.IsNot()], [ast.Constant(None)]), copy.deepcopy(value),
                             ast.Constant(0))
        else:
            near = ast.BinOp(value, ast.Add(), ast.Constant(1))
        return ast.Return(near)

    def visit_Raise(self, node: ast.Raise) -> ast.AST:
        return ast.Return(ast.Constant(None))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        if self.kind is None:  # the issue expects an exception: the function returns before any can be raised
            docstring = int(bool(node.body) and isinstance(node.body[0], ast.Expr)
                            and isinstance(node.body[0].value, ast.Constant))
            node.body.insert(docstring, ast.Return(ast.Constant(None)))
        return node


def near_returns(tree: ast.Module, kind: type | None) -> ast.Module:
    """`tree` with every return made near a value of `kind` (None: an exception was
    expected, so the function returns None first); see `_NearReturns`."""
    return ast.fix_missing_locations(_NearReturns(kind).visit(tree))


# -- restyling (meaning kept) --------------------------------------------------------------


class _Restyle(ast.NodeTransformer):
    """Rewrite each eligible node one way or the other, as the rng draws."""

    def __init__(self, rng: Rng) -> None:
        self.rng = rng

    def visit_Compare(self, node: ast.Compare) -> ast.AST:
        self.generic_visit(node)
        if len(node.ops) == 1 and type(node.ops[0]) in _MIRRORED and self.rng.chance(0.5):
            return ast.Compare(left=node.comparators[0], ops=[_MIRRORED[type(node.ops[0])]()],
                               comparators=[node.left])
        return node

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.target, ast.Name) and self.rng.chance(0.5):
            return ast.Assign(targets=[ast.Name(node.target.id, ast.Store())],
                              value=ast.BinOp(ast.Name(node.target.id, ast.Load()), node.op, node.value))
        return node

    def visit_UnaryOp(self, node: ast.UnaryOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Not) and isinstance(node.operand, ast.Name) and self.rng.chance(0.5):
            size = ast.Call(ast.Name("len", ast.Load()), [node.operand], [])
            return ast.Compare(left=size, ops=[ast.Eq()], comparators=[ast.Constant(0)])
        return node


def restyle(tree: ast.Module, rng: Rng) -> ast.Module:
    """`tree` restyled without changing what it computes (every `not name` in the templates
    is on a list or a string, so `len(name) == 0` means the same)."""
    return ast.fix_missing_locations(_Restyle(rng).visit(tree))


# -- renaming ----------------------------------------------------------------------------------


class _Rename(ast.NodeTransformer):
    def __init__(self, chosen: dict[str, str], attributes: frozenset[str]) -> None:
        self.chosen, self.attributes = chosen, attributes

    def _name(self, name: str) -> str:
        return self.chosen.get(name, name)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self._name(node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self._name(node.arg)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self._name(node.name)
        return self.generic_visit(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self._name(node.name)
        return self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if node.attr in self.attributes:
            node.attr = self._name(node.attr)
        return self.generic_visit(node)


def rename(tree: ast.Module, chosen: dict[str, str], attributes: frozenset[str]) -> ast.Module:
    """`tree` with every name (variables, parameters, functions, classes, and the attributes
    in `attributes`) renamed as `chosen` maps it; other names stay."""
    return _Rename(chosen, attributes).visit(tree)


# -- what a search that knows no template tries --------------------------------------------

_COMPARE_OPS: tuple[type[ast.cmpop], ...] = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_ARITH_OPS: tuple[type[ast.operator], ...] = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)
_CONDITIONS = (ast.If, ast.IfExp, ast.While, ast.Assert)

_EditArgument = int | type[ast.cmpop] | type[ast.operator] | None
"""What a generic edit needs besides its name: the new constant, the index of the first of
two swapped arguments, the class of the new comparison or operator, or nothing."""


def _edits_at(node: ast.AST, in_loop: bool) -> list[tuple[str, _EditArgument]]:
    """The generic edits of one node, as (what, argument) pairs `_apply` makes."""
    if in_loop:  # any other edit could make the loop endless (the callers run the code in process)
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _STRICT:
            return [("compare", _STRICT[type(node.ops[0])])]
        return []
    out: list[tuple[str, _EditArgument]] = []
    value = _int_constant(node)
    if value is not None:
        out += [("constant", v) for v in dict.fromkeys((value + 1, value - 1, value + 2, value - 2, 0, -value,
                                                        value * 10, value // 10)) if v != value]
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE_OPS:
        out += [("compare", op) for op in _COMPARE_OPS if op is not type(node.ops[0])]
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in _ARITH_OPS:
        out += [("operator", op) for op in _ARITH_OPS if op is not type(node.op)]
    elif isinstance(node, ast.BoolOp):
        out.append(("boolop", None))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        out.append(("unnot", None))
    elif isinstance(node, ast.Call):
        positional = [a for a in node.args if not isinstance(a, ast.Starred)]
        if len(positional) == len(node.args) >= 2:
            out += [("swap", i) for i in range(len(node.args) - 1)]
    elif _guard(node):
        out.append(("drop", None))
    if isinstance(node, _CONDITIONS) and not isinstance(node, ast.While):
        out.append(("negate", None))
    return out


def _apply(tree: ast.Module, index: int, what: str, arg: _EditArgument) -> ast.Module:
    """`tree` with one generic edit made, in place (new nodes take the positions of those
    they replace: no pass over the whole tree, which would cost more than the edit)."""
    node, _ = _nodes(tree)[index]
    if what == "constant" and isinstance(arg, int):
        _node_as(node, ast.Constant, what).value = arg
    elif what == "compare" and isinstance(arg, type) and issubclass(arg, ast.cmpop):
        _node_as(node, ast.Compare, what).ops = [arg()]
    elif what == "operator" and isinstance(arg, type) and issubclass(arg, ast.operator):
        if not isinstance(node, (ast.BinOp, ast.AugAssign)):
            raise TypeError(f"the edit {what!r} applies to an operator, not to an ast.{type(node).__name__}")
        node.op = arg()
    elif what == "boolop":
        boolop = _node_as(node, ast.BoolOp, what)
        boolop.op = ast.Or() if isinstance(boolop.op, ast.And) else ast.And()
    elif what == "swap" and isinstance(arg, int):
        call = _node_as(node, ast.Call, what)
        call.args[arg], call.args[arg + 1] = call.args[arg + 1], call.args[arg]
    elif what == "negate":
        if not isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
            raise TypeError(f"the edit {what!r} applies to a condition, not to an ast.{type(node).__name__}")
        target = node.test
        node.test = target.operand if isinstance(target, ast.UnaryOp) and isinstance(target.op, ast.Not) \
            else ast.copy_location(ast.UnaryOp(ast.Not(), target), target)
    elif what == "unnot":  # the operand takes the `not`'s place
        _Replace(node, _node_as(node, ast.UnaryOp, what).operand).visit(tree)
    elif what == "drop":  # the guard's place is left empty
        _Replace(node, None).visit(tree)
        for parent in ast.walk(tree):
            body = getattr(parent, "body", None)
            if body == []:
                body.append(ast.copy_location(ast.Pass(), node))
    else:
        raise ValueError(f"no generic edit {what!r} with the argument {arg!r}")
    return tree


def _inside(node: ast.AST, lines: range) -> bool:
    """True when `node` has a position and lies on `lines` (1-based)."""
    start = getattr(node, "lineno", None)
    return start is not None and start in lines and (getattr(node, "end_lineno", None) or start) in lines


def one_edit_away(source: str, lines: range | None = None) -> Iterator[ast.Module]:
    """Every tree one generic edit away from `source`'s, lazily: a comparison made any other,
    an arithmetic operator any other, an integer constant plus or minus 1 or 2, 0, negated,
    times or divided by 10, `and` and `or` swapped, a `not` dropped, a condition negated,
    neighbouring call arguments swapped, a guard clause dropped (inside a while loop, only a
    comparison made strict). This is what a search for a fix that knows no template tries,
    wider than the bug kinds; the generator refuses a bug that one of these undoes on the
    issue's call, and the kit plays that search as an adversary. `lines`: only edits of
    nodes on those lines of `source`. (Each tree is parsed anew: cheaper than a deep copy.)"""
    edits = [(index, what, arg) for index, (node, in_loop) in enumerate(_nodes(ast.parse(source)))
             if lines is None or _inside(node, lines) for what, arg in _edits_at(node, in_loop)]
    for index, what, arg in edits:
        yield _apply(ast.parse(source), index, what, arg)
