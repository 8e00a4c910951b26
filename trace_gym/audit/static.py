"""Static audit rules: read a generated module's source, never import it, and refuse what
it could reach, not only what it names.

- Imports: trace_gym's env-building modules (`TRACE_GYM_MODULES`), and from them only their
  own public names (what they define or export, never what they import, such as a module's
  own `os`); numpy; a small standard-library allowlist. A name imported from an allowed
  module that is itself a module (`from dataclasses import sys`, `typing.sys`) is refused.
- Module objects are namespaces, never values: `np.array` is fine, `f(np)`, `m = np` and
  `[json]` are refused.
- Builtins that evaluate code, reach attributes or state by name, open files or vary between
  runs are refused in any form: called, aliased (`g = getattr`), in a container
  (`[open][0]`), passed along (`map(open, ...)`), as a default argument.
- Attribute access by string is refused: `operator.attrgetter` / `methodcaller`,
  `string.Formatter`, a format string that reaches attributes or items (`"{0.__class__}"`)
  or is computed (use an f-string), frame, traceback and code attributes, dunders.
- numpy: file IO (`save*`, `load*`, `fromfile`, `tofile`, `memmap`, `genfromtxt`, ...),
  module-level random functions, and generators or bit generators without a seed
  (`default_rng()`, `default_rng(None)`, `PCG64()`) are refused.
- Annotations are plain types: names, attributes, subscripts, `|` unions and constants (a
  string only inside `typing.Literal[...]`). `typing.get_type_hints` evaluates an annotation's
  text, and a string in it, as code; `functools.singledispatch` / `singledispatchmethod`
  (whose `register` calls it) and a ForwardRef's `_evaluate` are refused.
- Class namespaces the interpreter reads as data: `__annotations__` (whose keys dataclasses
  pastes into the code it generates) in any form, any other dunder bound by assignment but
  `__doc__`, `__slots__`, `__hash__` and `__all__`, and a method named after one of
  `DATA_DUNDERS` (`__match_args__`, `__prepare__`, ...).
- Class patterns (`case C(attr=...)`) obey the attribute rules: `case object(__globals__=g)`
  is refused as `f.__globals__` is.
- `.format` / `.format_map` only called at once on a constant string, each replacement field
  (nested ones in a format spec too) a plain position or name; taken as a value
  (`f = "{0.x}".format`, `map(str.format, ...)`) it is refused.
- A PEP 263 coding declaration other than utf-8 in the first two lines (the worker decodes
  the bytes as it says, so `# -*- coding: unicode_escape -*-` turns a comment into code);
  `check_bytes` also refuses bytes that are not UTF-8 (a BOM is allowed).
- `global`/`nonlocal`, relative imports, star imports.
- Pathological input (larger than `MAX_SOURCE_CHARS`, nested deeper than `MAX_NESTING`, or
  more than the parser can hold) is rejected with a finding, never an exception.

Each finding carries its line. The rules are a first layer: the module still runs only in
the sandboxed env worker (trace_gym.sandbox).
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
import string
import types
from collections import Counter
from dataclasses import dataclass
from typing import Any

MAX_SOURCE_CHARS = 200_000
MAX_NESTING = 100

ALLOWED_MODULES = frozenset({
    "numpy", "numpy.random", "__future__", "dataclasses", "typing", "collections", "collections.abc", "math",
    "itertools", "functools", "enum", "json", "re", "string", "textwrap", "copy", "abc", "statistics",
    "fractions", "decimal", "operator", "bisect", "heapq",
})
"""Third-party and standard-library modules a generated env may import."""

TRACE_GYM_MODULES = (
    "trace_gym.capability_env", "trace_gym.capabilities", "trace_gym.env", "trace_gym.errors", "trace_gym.rng",
    "trace_gym.verdict", "trace_gym.messages", "trace_gym.tools", "trace_gym.targets.user",
    "trace_gym.statements", "trace_gym.jsondata",
    "trace_gym.worlds", "trace_gym.worlds.world", "trace_gym.worlds.people",
    "trace_gym.worlds.airline", "trace_gym.worlds.airline.data",
    "trace_gym.worlds.retail", "trace_gym.worlds.retail.data", "trace_gym.schema",
    "trace_gym.coding", "trace_gym.coding.env", "trace_gym.coding.repo", "trace_gym.coding.templates",
    "trace_gym.coding.tools", "trace_gym.coding.verify", "trace_gym.coding.workspace", "trace_gym.sandbox.workspace",
)
"""The trace_gym modules a generated env may import names from (and their packages, as
namespaces: `trace_gym`, `trace_gym.targets`)."""
DEPRECATED_MODULES = {"trace_gym.capability": "trace_gym.capability_env"}
"""Old names of those modules, kept importable for one release (a shim that warns): a generated
env written against one still passes, with the names of the module it now names. The
synthesis prompt lists only `TRACE_GYM_MODULES`."""
_IMPORTABLE = frozenset(TRACE_GYM_MODULES) | frozenset(DEPRECATED_MODULES)
DEPRECATED_NAMES = {"trace_gym.env": frozenset({"Episode"})}
"""Old names of classes of those modules, served for one release by the module's `__getattr__`
(with a warning), that a generated env written against them may still import."""
TRACE_GYM_REFUSED = {
    "trace_gym.jsondata": {"write_json_atomic": "writes files"},
    # A workspace runs code only in the command jail, over a fresh temporary copy of its
    # files (`run`); these two take any directory of this machine.
    "trace_gym.sandbox.workspace": {"materialize": "writes files", "read_back": "reads files"},
}
"""Names of those modules that are refused all the same."""
_NAMESPACES = frozenset({"trace_gym", "trace_gym.targets"})

REFUSED_MODULES = {
    "os": "operating-system access", "sys": "interpreter access", "subprocess": "runs programs",
    "_posixsubprocess": "runs programs", "socket": "network access", "ssl": "network access",
    "urllib": "network access", "http": "network access", "requests": "network access",
    "pathlib": "file-system access", "shutil": "file-system access", "tempfile": "file-system access",
    "glob": "file-system access", "io": "file access", "importlib": "imports code at run time",
    "ctypes": "native memory access", "pickle": "runs code from data", "marshal": "runs code from data",
    "shelve": "runs code from data", "random": "the global random module (draw from an Rng derived from the env's seed)",
    "time": "clock reads (randomness must come from the seed)",
    "datetime": "clock reads (randomness must come from the seed)",
    "secrets": "operating-system randomness", "uuid": "operating-system randomness",
    "threading": "threads", "multiprocessing": "processes", "asyncio": "event loops",
    "signal": "signal handlers", "resource": "resource limits", "builtins": "the builtins",
    "inspect": "interpreter introspection", "gc": "interpreter internals", "code": "runs code",
    "runpy": "runs code", "sqlite3": "files", "platform": "host information",
}
REFUSED_BUILTINS = {
    "eval": "evaluates code", "exec": "executes code", "compile": "compiles code",
    "__import__": "imports code at run time", "open": "file access", "globals": "reaches module state",
    "locals": "reaches frame state", "vars": "reaches object internals", "breakpoint": "debugger",
    "input": "reads the terminal", "hash": "hash() of strings varies with PYTHONHASHSEED",
    "getattr": "attribute access by name (a way to reach the builtins)",
    "setattr": "attribute access by name", "delattr": "attribute access by name",
    "id": "object addresses vary between runs", "memoryview": "raw memory access",
    "help": "starts a pager", "license": "reads files and starts a pager",
}
"""Builtins refused wherever they appear (called, aliased, stored or passed along)."""
REFUSED_CALLS = REFUSED_BUILTINS  # the name the synthesis prompt and older callers use
REFUSED_NAMES = {"__builtins__", "__loader__", "__spec__", "__file__", "__dict__"}
ALLOWED_DUNDERS = {"__init__", "__post_init__", "__name__", "__doc__"}
REFUSED_ATTRIBUTES = {
    **{a: "frame, traceback and code objects reach the interpreter's state" for a in (
        "f_globals", "f_locals", "f_builtins", "f_back", "f_code", "f_trace", "gi_frame", "gi_code",
        "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame", "ag_code", "ag_await", "tb_frame",
        "tb_next", "co_code", "co_consts", "co_names")},
    "tofile": "writes a file", "dump": "writes a file", "ctypes": "raw memory access",
    "get_field": "attribute access by string", "format_field": "attribute access by string",
    "_evaluate": "evaluates a ForwardRef's string as code",
}
"""Attribute names refused on any object."""
MODULE_REFUSED = {
    "operator": {"attrgetter": "attribute access by string", "methodcaller": "method access by string"},
    "string": {"Formatter": "attribute access by string"},
    "typing": {"get_type_hints": "evaluates strings as code", "ForwardRef": "evaluates strings as code"},
    "functools": {n: "its register() evaluates string annotations as code (through typing.get_type_hints)"
                  for n in ("singledispatch", "singledispatchmethod")},
    "dataclasses": {"make_dataclass": "generates and executes code"},
    "json": {"load": "reads a file", "dump": "writes a file"},
    "numpy": {n: "numpy file IO" for n in (
        "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt", "fromfile",
        "fromregex", "memmap", "DataSource", "tofile", "recfromtxt", "recfromcsv")},
}
"""Names of allowed modules that are refused (file IO, access by string, code from strings)."""
NUMPY_RANDOM_ALLOWED = {"Generator", "default_rng", "SeedSequence", "PCG64", "PCG64DXSM", "Philox",
                        "SFC64", "MT19937", "BitGenerator"}
_NEEDS_SEED = NUMPY_RANDOM_ALLOWED - {"Generator"}

ANNOTATIONS_NAMES = {"__annotations__", "__annotate__"}
"""Refused as a name in any form: dataclasses pastes the keys of a class's annotations into
the code it generates (`__annotations__ = {"x=__import__('os')...": int}`)."""
BINDABLE_DUNDERS = {"__doc__", "__slots__", "__hash__", "__all__"}
"""The dunder names a module may bind by assignment (in a class body or anywhere)."""
DATA_DUNDERS = ANNOTATIONS_NAMES | {
    "__match_args__", "__prepare__", "__dataclass_fields__", "__dataclass_params__", "__dict__", "__class__",
    "__module__", "__qualname__", "__builtins__"}
"""Dunder names the interpreter or dataclasses read as data (attribute or field names, a class's
namespace): refused as the name of a method too (`@property def __match_args__` in a
metaclass names the attributes `case C(x)` reads)."""
_CODING = re.compile(r"coding[:=][ \t]*([-\w.]+)", re.ASCII)
_COMMENT_LINE = re.compile(r"[ \t\f]*#")
_UTF8_NAMES = {"utf-8", "utf8"}


@dataclass(frozen=True)
class Finding:
    """One static rule that fired: the rule, the source line and what is wrong."""

    rule: str
    line: int
    message: str

    def to_json(self) -> dict:
        """The finding as a JSON object."""
        return {"rule": self.rule, "line": self.line, "message": self.message}


@functools.cache
def _module_value(module: str) -> types.ModuleType | None:
    """An allowed module, imported in this (trusted) process to see what its names are."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


@functools.cache
def trace_gym_names(module: str) -> frozenset[str]:
    """The public names a generated env may take from an allowlisted trace_gym module: what
    the module defines itself or lists in `__all__`, never a module it imported (unless that
    module is allowlisted too), and the old names it still serves (`DEPRECATED_NAMES`); an old
    module name has the names of the module it now names."""
    from trace_gym.provenance import module_file

    old_names = DEPRECATED_NAMES.get(module, frozenset())
    module = DEPRECATED_MODULES.get(module, module)
    path = module_file(module)
    if path is None:
        return frozenset()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                if isinstance(node.value, (ast.List, ast.Tuple)):
                    names.update(e.value for e in node.value.elts if isinstance(e, ast.Constant)
                                 and isinstance(e.value, str))
    value = _module_value(module)
    out = set()
    for name in names:
        if name.startswith("_"):
            continue
        obj = getattr(value, name, None) if value is not None else None
        if isinstance(obj, types.ModuleType) and f"{module}.{name}" not in _IMPORTABLE:
            continue
        out.add(name)
    return frozenset(out) | old_names


def _is_allowed_module(name: str) -> bool:
    return name in ALLOWED_MODULES or name in _IMPORTABLE or name in _NAMESPACES


def _top_refusal(name: str) -> str | None:
    top = name.split(".")[0]
    if top in REFUSED_MODULES:
        return f"import of {name!r} is refused: {REFUSED_MODULES[top]}"
    if not _is_allowed_module(name):
        return (f"import of {name!r} is not allowed; allowed: {', '.join(sorted(ALLOWED_MODULES))} and "
                f"{', '.join(TRACE_GYM_MODULES)}")
    return None


class _Checker:
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.modules: dict[str, str] = {}
        """local name -> the module it is bound to"""
        self.values: dict[str, tuple[str, str]] = {}
        """local name -> (module, name) it was imported from"""

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.findings.append(Finding(rule, getattr(node, "lineno", 0), message))

    # -- what a name or an attribute of a module is -------------------------------------------

    def member(self, node: ast.AST, module: str, name: str) -> str | None:
        """Check `module.name` (an attribute or a from-import); return the module it is, if
        it is one that may be used as a namespace, else None."""
        full = f"{module}.{name}"
        if name.startswith("__") and name.endswith("__"):
            if name not in ALLOWED_DUNDERS:
                self.add(node, "attribute", f"access to {name!r} is refused (a way to reach interpreter internals)")
            return None
        if name.startswith("_"):
            self.add(node, "private", f"{full} is private; use the module's public names")
            return None
        if module in _NAMESPACES or module in _IMPORTABLE:
            if full in _IMPORTABLE or full in _NAMESPACES:
                return full
            if name in TRACE_GYM_REFUSED.get(module, {}):
                self.add(node, "reach", f"{full} is refused: {TRACE_GYM_REFUSED[module][name]}")
                return None
            if module in _NAMESPACES or name not in trace_gym_names(module):
                self.add(node, "reach", f"{full} is not among the trace_gym names a generated env may use "
                         "(only what the env-building modules define themselves)")
            return None
        if module == "numpy.random":
            if name not in NUMPY_RANDOM_ALLOWED:
                self.add(node, "numpy_random", f"numpy.random.{name} draws from numpy's global state; use a "
                         "Generator derived from the env's seed")
            return None
        refused = MODULE_REFUSED.get(module, {}).get(name) or MODULE_REFUSED.get(module.split(".")[0], {}).get(name)
        if refused:
            self.add(node, "reach", f"{full} is refused: {refused}")
            return None
        value = _module_value(module)
        if value is None or not hasattr(value, name):
            self.add(node, "reach", f"{full} does not exist")
            return None
        obj = getattr(value, name)
        if isinstance(obj, types.ModuleType):
            if full in ALLOWED_MODULES:
                return full
            self.add(node, "reach", f"{full} is the module {obj.__name__!r}, reached through {module!r}: refused "
                     "(import only the allowed modules themselves)")
        return None

    def resolve(self, node: ast.AST) -> str | None:
        """The module an expression is, when it is a bound module or a chain of them."""
        if isinstance(node, ast.Name):
            return self.modules.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            if base is not None:
                full = f"{base}.{node.attr}"
                if full in ALLOWED_MODULES or full in _IMPORTABLE or full in _NAMESPACES:
                    return full
        return None

    def numpy_random_name(self, func: ast.AST) -> str | None:
        """`X` when `func` is numpy.random.X (by attribute or from-import)."""
        if isinstance(func, ast.Attribute) and self.resolve(func.value) == "numpy.random":
            return func.attr
        if isinstance(func, ast.Name) and self.values.get(func.id, ("", ""))[0] == "numpy.random":
            return self.values[func.id][1]
        return None

    # -- the rules ------------------------------------------------------------------------

    def imports(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    problem = _top_refusal(alias.name)
                    if problem:
                        self.add(node, "import", problem)
                        continue
                    if alias.asname:
                        self.modules[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        self.modules[top] = top if _is_allowed_module(top) or top == "trace_gym" else alias.name
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    self.add(node, "import", "relative imports are not allowed in a generated env")
                    continue
                problem = _top_refusal(module)
                if problem:
                    self.add(node, "import", problem)
                    continue
                for alias in node.names:
                    if alias.name == "*":
                        self.add(node, "import", f"'from {module} import *' hides what is imported; name each")
                        continue
                    if module == "__future__":
                        continue
                    local = alias.asname or alias.name
                    bound = self.member(node, module, alias.name)
                    if bound is not None:
                        self.modules[local] = bound
                    else:
                        self.values[local] = (module, alias.name)

    def check(self, tree: ast.AST) -> None:
        self.imports(tree)
        nodes = list(ast.walk(tree))
        bases = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}
        called = {id(n.func) for n in nodes if isinstance(n, ast.Call)}
        self.bound = _bound_names(nodes)
        checked_chains: set[int] = set()
        for node in nodes:
            if isinstance(node, ast.Name):
                self.name(node, id(node) in bases)
            elif isinstance(node, ast.Attribute):
                self.attribute(node, checked_chains, id(node) in bases)
                if node.attr in ("format", "format_map") and id(node) not in called and not self.resolve(node.value):
                    self.add(node, "format", f".{node.attr} taken as a value (not called at once on a constant "
                             "string) formats any string, which can reach attributes by name; use an f-string")
            elif isinstance(node, ast.Call):
                self.call(node)
            elif isinstance(node, (ast.Global, ast.Nonlocal)):
                self.add(node, "global", "global state: an episode must be a function of its seed and actions")
            elif isinstance(node, ast.MatchClass):
                for attr in node.kwd_attrs:
                    self.pattern_attribute(node, attr)
            elif isinstance(node, ast.AnnAssign):
                self.annotation(node.annotation)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name in DATA_DUNDERS:
                self.add(node, "dunder", f"defining {node.name!r} is refused: the interpreter reads it as data "
                         "(attribute or field names, a class's namespace)")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                    if arg is not None and arg.arg in REFUSED_BUILTINS:
                        self.add(arg, "builtin", f"{arg.arg!r} shadows a refused builtin: {REFUSED_BUILTINS[arg.arg]}")
                    if arg is not None and arg.annotation is not None:
                        self.annotation(arg.annotation)
                if not isinstance(node, ast.Lambda) and node.returns is not None:
                    self.annotation(node.returns)
            for name in _binding_names(node):
                if name in ANNOTATIONS_NAMES:
                    if not isinstance(node, ast.Name):  # a Name is refused in any form by name()
                        self.add(node, "dunder", _annotations_refused(name))
                elif name.startswith("__") and name.endswith("__") and name not in BINDABLE_DUNDERS:
                    self.add(node, "dunder", f"binding {name!r} is refused: the interpreter reads dunder names as "
                             f"data (only {', '.join(sorted(BINDABLE_DUNDERS))} may be assigned)")

    def name(self, node: ast.Name, is_base: bool) -> None:
        if node.id in ANNOTATIONS_NAMES:
            self.add(node, "dunder", _annotations_refused(node.id))
        elif node.id in REFUSED_NAMES:
            self.add(node, "name", f"use of {node.id!r} is refused (interpreter internals)")
        elif node.id in REFUSED_BUILTINS:
            self.add(node, "builtin", f"{node.id} is refused in any form (called, aliased, stored or passed "
                     f"along): {REFUSED_BUILTINS[node.id]}")
        elif node.id in self.modules and not is_base and isinstance(node.ctx, ast.Load):
            self.add(node, "module_value", f"the module {self.modules[node.id]!r} is used as a value; only its "
                     "attributes may be used")

    def attribute(self, node: ast.Attribute, checked: set[int], is_base: bool) -> None:
        attr = node.attr
        if attr in REFUSED_ATTRIBUTES:
            self.add(node, "attribute", f".{attr} is refused: {REFUSED_ATTRIBUTES[attr]}")
            return
        base = self.resolve(node.value)
        if base is not None:
            bound = self.member(node, base, attr)
            if bound is not None and not is_base and isinstance(node.ctx, ast.Load):
                self.add(node, "module_value", f"the module {bound!r} is used as a value; only its attributes "
                         "may be used")
            if isinstance(node.ctx, (ast.Store, ast.Del)):
                self.add(node, "reach", f"assigning to {base}.{attr} changes a shared module")
            return
        if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self.add(node, "attribute", f"access to {attr!r} is refused (a way to reach interpreter internals)")

    def pattern_attribute(self, node: ast.MatchClass, attr: str) -> None:
        """`case C(attr=...)` reads `subject.attr`: the attribute rules apply."""
        if attr in REFUSED_ATTRIBUTES:
            self.add(node, "attribute", f"the class pattern reads .{attr}, which is refused: "
                     f"{REFUSED_ATTRIBUTES[attr]}")
        elif attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self.add(node, "attribute", f"the class pattern reads {attr!r}: access to {attr!r} is refused (a way "
                     "to reach interpreter internals)")

    def annotation(self, node: ast.AST) -> None:
        """An annotation is a plain type: `typing.get_type_hints` (which singledispatch's
        register calls) evaluates its text, and any string in it, as code."""
        stack = [(node, False)]
        while stack:
            part, in_literal = stack.pop()
            if isinstance(part, ast.Constant):
                if isinstance(part.value, str) and not in_literal:
                    self.add(part, "annotation", f"the string annotation {part.value[:60]!r} is evaluated as code by "
                             "typing.get_type_hints; write the type itself (with `from __future__ import "
                             "annotations` no annotation needs quotes)")
                continue
            if isinstance(part, ast.Subscript):
                literal = self.is_typing_literal(part.value)
                stack.append((part.value, False))
                stack.append((part.slice, literal))
            elif isinstance(part, (ast.Tuple, ast.List)):
                stack.extend((e, in_literal) for e in part.elts)
            elif isinstance(part, ast.BinOp) and isinstance(part.op, ast.BitOr):
                stack.extend(((part.left, False), (part.right, False)))
            elif isinstance(part, ast.Attribute):
                stack.append((part.value, False))
            elif not isinstance(part, ast.Name):
                self.add(part, "annotation", f"an annotation may only name a type (names, attributes, subscripts, "
                         f"| unions, constants); {ast.unparse(part)[:60]!r} is evaluated as code by "
                         "typing.get_type_hints")

    def is_typing_literal(self, node: ast.AST) -> bool:
        """`Literal` imported from typing and never bound again, or `typing.Literal`: its
        strings are values, never evaluated."""
        if isinstance(node, ast.Name):
            return self.values.get(node.id) == ("typing", "Literal") and self.bound[node.id] == 1
        return (isinstance(node, ast.Attribute) and node.attr == "Literal" and self.resolve(node.value) == "typing"
                and isinstance(node.value, ast.Name) and self.bound[node.value.id] == 1)

    def call(self, node: ast.Call) -> None:
        func = node.func
        name = self.numpy_random_name(func)
        if name in _NEEDS_SEED:
            seed = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("seed", "entropy")), None)
            if seed is None or (isinstance(seed, ast.Constant) and seed.value is None):
                self.add(node, "numpy_random", f"numpy.random.{name}() without a seed draws from the operating "
                         "system; derive it from the env's seed")
        if isinstance(func, ast.Attribute) and func.attr in ("format", "format_map"):
            self.format_call(node, func)

    def format_call(self, node: ast.Call, func: ast.Attribute) -> None:
        template = func.value
        if not (isinstance(template, ast.Constant) and isinstance(template.value, str)):
            if self.resolve(template) is None:  # a module's own format() (none is allowed) is checked as a name
                self.add(node, "format", f".{func.attr}() on a computed format string can reach attributes by "
                         "name; use an f-string")
            return
        try:
            fields = _format_fields(template.value)
        except ValueError:
            return  # str.format raises on it at run time
        for field in fields:
            if "." in field or "[" in field:
                self.add(node, "format", f"format field {{{field}}} reaches an attribute or item by name; use an "
                         "f-string")


def _format_fields(template: str) -> list[str]:
    """Every replacement field of a format string, those nested in a format spec too
    (`"{0:{1.__class__}}"` reads `.__class__` of the second argument)."""
    out = []
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is not None:
            out.append(field)
        if spec and "{" in spec:
            out += _format_fields(spec)
    return out


def _annotations_refused(name: str) -> str:
    return (f"{name!r} is refused in any form: dataclasses pastes the names in a class's annotations into the "
            "code it generates; annotate fields in the class body")


def _binding_names(node: ast.AST) -> list[str]:
    """The names a node binds by assignment (not a def's or a class's own name, not an argument)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        return [node.id]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.asname or a.name.split(".")[0] for a in node.names]
    if isinstance(node, ast.ExceptHandler) and node.name:
        return [node.name]
    if isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        return [node.name]
    if isinstance(node, ast.MatchMapping) and node.rest:
        return [node.rest]
    return []


def _bound_names(nodes: list[ast.AST]) -> Counter[str]:
    """How many times each name is bound anywhere in the module (any scope)."""
    count: Counter[str] = Counter(name for node in nodes for name in _binding_names(node))
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            count[node.name] += 1
        elif isinstance(node, ast.arg):
            count[node.arg] += 1
    return count


def _nesting(tree: ast.AST) -> int:
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > MAX_NESTING:
                return deepest
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _coding_findings(source: str) -> list[Finding]:
    """A PEP 263 coding declaration other than utf-8 in the first two lines. Python reads the
    module's bytes in the encoding it names, so under `unicode_escape` (or `utf-7`, ...) a
    comment here can be code there. Both lines are read whatever the first holds, and every
    `coding[:=]` in a comment line counts (Python takes the first)."""
    findings = []
    lines = re.split(r"\r\n|\r|\n", source.removeprefix("\ufeff"), maxsplit=2)[:2]
    for number, line in enumerate(lines, 1):
        if not _COMMENT_LINE.match(line):
            continue
        for match in _CODING.finditer(line):
            if match.group(1).lower().replace("_", "-") not in _UTF8_NAMES:
                findings.append(Finding("coding", number, f"the coding declaration {match.group(1)!r} is refused: "
                                        "Python decodes the module as it says, not as the audit reads it (UTF-8); "
                                        "write UTF-8 and declare no other coding"))
    return findings


def check_bytes(data: bytes, filename: str = "<module>") -> list[Finding]:
    """Every static finding in a module file's bytes: they must be UTF-8 (after an optional
    BOM), as the audit reads them; then `check_source` on the text (which refuses a coding
    declaration other than utf-8)."""
    try:
        source = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        return [Finding("coding", line, f"the module is not valid UTF-8 (byte {exc.start}: {exc.reason}); Python "
                        "would refuse it or, under a coding declaration, read it otherwise than the audit does")]
    return check_source(source, filename)


def check_source(source: str, filename: str = "<module>") -> list[Finding]:
    """Every static finding in a module's source, in line order (empty: the module passes).
    A coding declaration other than utf-8 is the only finding when present: Python would run
    other code than this text."""
    if len(source) > MAX_SOURCE_CHARS:
        return [Finding("size", 1, f"the module has {len(source):,} characters; at most {MAX_SOURCE_CHARS:,} "
                        "are read")]
    coding = _coding_findings(source)
    if coding:
        return coding  # the text checked here is not the code that would run
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [Finding("syntax", exc.lineno or 1, f"syntax error: {exc.msg}")]
    except (RecursionError, MemoryError):
        return [Finding("size", 1, "the module is nested too deeply for the parser (a pathological expression)")]
    except ValueError as exc:  # null bytes
        return [Finding("syntax", 1, f"syntax error: {exc}")]
    depth = _nesting(tree)
    if depth > MAX_NESTING:
        return [Finding("size", 1, f"the module nests expressions or statements deeper than {MAX_NESTING} levels")]
    checker = _Checker()
    checker.check(tree)
    unique = {(f.line, f.rule, f.message): f for f in checker.findings}
    return sorted(unique.values(), key=lambda f: (f.line, f.rule, f.message))


def describe_rules() -> dict[str, Any]:
    """The rules in brief, for the synthesis prompt."""
    return {"modules": sorted(ALLOWED_MODULES), "trace_gym": list(TRACE_GYM_MODULES),
            "builtins": sorted(REFUSED_BUILTINS)}
