"""Static audit rules: read a generated module's source, never import it.

Generated envs may import trace_gym, numpy (for Generators derived from the env's seed) and
a small standard-library allowlist. Everything that reaches outside the process (files,
network, programs), evaluates code, escapes through attributes to the builtins, or draws
randomness that is not from the seed (the global `random` module, numpy's module-level
functions, clocks, `hash()` of strings) is refused with its line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

ALLOWED_MODULES = frozenset({
    "trace_gym", "numpy", "__future__", "dataclasses", "typing", "collections", "math",
    "itertools", "functools", "enum", "json", "re", "string", "textwrap", "copy", "abc",
    "statistics", "fractions", "decimal", "operator", "bisect", "heapq",
})
REFUSED_MODULES = {
    "os": "operating-system access", "sys": "interpreter access", "subprocess": "runs programs",
    "socket": "network access", "ssl": "network access", "urllib": "network access",
    "http": "network access", "requests": "network access", "pathlib": "file-system access",
    "shutil": "file-system access", "tempfile": "file-system access", "glob": "file-system access",
    "io": "file access", "importlib": "imports code at run time", "ctypes": "native memory access",
    "pickle": "runs code from data", "marshal": "runs code from data", "shelve": "runs code from data",
    "random": "the global random module (draw from an Rng derived from the env's seed)",
    "time": "clock reads (randomness must come from the seed)",
    "datetime": "clock reads (randomness must come from the seed)",
    "secrets": "operating-system randomness", "uuid": "operating-system randomness",
    "threading": "threads", "multiprocessing": "processes", "asyncio": "event loops",
    "signal": "signal handlers", "resource": "resource limits", "builtins": "the builtins",
    "inspect": "interpreter introspection", "gc": "interpreter internals", "code": "runs code",
    "runpy": "runs code", "sqlite3": "files", "platform": "host information",
}
REFUSED_CALLS = {
    "eval": "evaluates code", "exec": "executes code", "compile": "compiles code",
    "__import__": "imports code at run time", "open": "file access", "globals": "reaches module state",
    "locals": "reaches frame state", "vars": "reaches object internals", "breakpoint": "debugger",
    "input": "reads the terminal", "hash": "hash() of strings varies with PYTHONHASHSEED",
    "getattr": "attribute access by name (a way to reach the builtins)",
    "setattr": "attribute access by name", "delattr": "attribute access by name",
    "id": "object addresses vary between runs", "memoryview": "raw memory access",
}
REFUSED_NAMES = {"__builtins__", "__loader__", "__spec__", "__file__", "__import__", "__dict__"}
ALLOWED_DUNDERS = {"__init__", "__post_init__", "__name__", "__doc__"}
NUMPY_RANDOM_ALLOWED = {"Generator", "default_rng", "SeedSequence", "PCG64", "PCG64DXSM", "Philox",
                        "SFC64", "MT19937", "BitGenerator"}


@dataclass(frozen=True)
class Finding:
    rule: str
    line: int
    message: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "line": self.line, "message": self.message}


class _Checker(ast.NodeVisitor):
    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.numpy: set[str] = set()         # names bound to numpy
        self.numpy_random: set[str] = set()  # names bound to numpy.random

    def add(self, node: ast.AST, rule: str, message: str) -> None:
        self.findings.append(Finding(rule, getattr(node, "lineno", 0), message))

    def _module(self, node: ast.AST, name: str) -> None:
        top = name.split(".")[0]
        if top in REFUSED_MODULES:
            self.add(node, "import", f"import of {name!r} is refused: {REFUSED_MODULES[top]}")
        elif top not in ALLOWED_MODULES:
            self.add(node, "import", f"import of {name!r} is not allowed; allowed: "
                     f"{', '.join(sorted(ALLOWED_MODULES))}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._module(node, alias.name)
            if alias.name == "numpy":
                self.numpy.add(alias.asname or "numpy")
            elif alias.name == "numpy.random":
                if alias.asname:
                    self.numpy_random.add(alias.asname)
                else:
                    self.numpy.add("numpy")
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            self.add(node, "import", "relative imports are not allowed in a generated env")
        else:
            self._module(node, module)
        for alias in node.names:
            if module == "numpy" and alias.name == "random":
                self.numpy_random.add(alias.asname or "random")
            if module == "numpy.random" and alias.name not in NUMPY_RANDOM_ALLOWED:
                self.add(node, "numpy_random", f"numpy.random.{alias.name} draws from numpy's global "
                         "state; use a Generator derived from the env's seed")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name) and func.id in REFUSED_CALLS:
            self.add(node, "call", f"{func.id}() is refused: {REFUSED_CALLS[func.id]}")
        if (isinstance(func, ast.Attribute) and func.attr == "default_rng" and not node.args
                and not node.keywords):
            self.add(node, "numpy_random", "default_rng() without a seed draws from the operating system")
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("__") and attr.endswith("__") and attr not in ALLOWED_DUNDERS:
            self.add(node, "attribute", f"access to {attr!r} is refused (a way to reach interpreter internals)")
        value = node.value
        is_np_random = (
            (isinstance(value, ast.Name) and value.id in self.numpy_random)
            or (isinstance(value, ast.Attribute) and value.attr == "random"
                and isinstance(value.value, ast.Name) and value.value.id in self.numpy)
        )
        if is_np_random and attr not in NUMPY_RANDOM_ALLOWED:
            self.add(node, "numpy_random", f"numpy.random.{attr} draws from numpy's global state; "
                     "use a Generator derived from the env's seed")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in REFUSED_NAMES:
            self.add(node, "name", f"use of {node.id!r} is refused (interpreter internals)")
        self.generic_visit(node)

    def visit_Global(self, node: ast.Global) -> None:
        self.add(node, "global", "global state: an episode must be a function of its seed and actions")
        self.generic_visit(node)

    visit_Nonlocal = visit_Global


def check_source(source: str, filename: str = "<module>") -> list[Finding]:
    """Every static finding in a module's source, in line order (empty: the module passes)."""
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [Finding("syntax", exc.lineno or 0, f"syntax error: {exc.msg}")]
    checker = _Checker()
    checker.visit(tree)
    return sorted(checker.findings, key=lambda f: (f.line, f.rule))
