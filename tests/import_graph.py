"""The import graph of the project's modules, read from the source (never executed): every
`import` and `from ... import` anywhere in a module, inside functions included, since a
function-level import still ties the two modules together."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from trace_gym.provenance import import_targets

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _folder(package: str, folders: dict[str, str]) -> str:
    """A package's folder as setuptools finds it: its nearest mapped ancestor's folder and the
    rest of its name (`trace_gym.pipeline.stages` -> pipeline/stages)."""
    parts = package.split(".")
    for i in range(len(parts), 0, -1):
        prefix = ".".join(parts[:i])
        if prefix in folders:
            return "/".join([folders[prefix], *parts[i:]])
    return package.replace(".", "/")


def module_files(repo: Path) -> dict[str, Path]:
    """Every module of the distribution's packages (pyproject's list and folders): name -> file."""
    setup = tomllib.loads((repo / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = setup.get("package-dir", {})
    out: dict[str, Path] = {}
    for package in setup["packages"]:
        folder = repo / _folder(package, folders)
        for path in sorted(folder.glob("*.py")):
            out[package if path.name == "__init__.py" else f"{package}.{path.stem}"] = path
    return out


def imported_modules(tree: ast.AST, package: str, modules: set[str] | dict[str, Path]) -> set[str]:
    """The modules of `modules` an AST imports (`trace_gym.provenance.import_targets`): `from
    P import x` imports the module P.x when there is one, else P. The implicit import of a
    module's parent packages is not counted: every submodule has it."""
    out: set[str] = set()
    for base, name in import_targets(tree, package):
        if name is not None and f"{base}.{name}" in modules:
            out.add(f"{base}.{name}")
        elif base in modules:
            out.add(base)
    return out


def import_graph(repo: Path) -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    files = module_files(repo)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        graph[name] = imported_modules(ast.parse(path.read_text(encoding="utf-8")), package, files) - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph) + 100))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return found
