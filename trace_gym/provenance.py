"""Which code an env's behaviour depends on, as one sha256.

- `env_code_sha256(path)`: an env module and every trace_gym module it imports, directly or
  through other trace_gym modules (imports read from the source, never executed), with the
  text files those packages read (the policies). Recorded in every trajectory
  (`env_sha256`): equal hashes, equal episodes for equal seeds and actions. Computed once per
  file version, not per record.
- `library_sha256()`: the same over the trace_gym modules a generated env may import (the
  static rules' allowlist), part of the audit lock's key, so that a change to what generated
  code builds on invalidates its audits and an unrelated commit does not.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = "trace_gym"
NOT_BEHAVIOUR = frozenset({"trace_gym.provenance"})
"""Imported by env code to compute this very hash, not to act: left out of it."""


@functools.cache
def module_file(name: str) -> Path | None:
    """The source file of a trace_gym module (None when `name` is not a module)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin).resolve()


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imported_modules(source: str, package: str = "") -> set[str]:
    """The trace_gym modules a source imports anywhere in it: `import M` names M, and
    `from M import x` names M.x when that is a module, else M. (A package's `__init__`
    runs too, but trace_gym's are namespaces and the registry, not env behaviour.)"""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if module_file(sub) is not None else base)
    return {m for m in found if (m == ROOT or m.startswith(ROOT + ".")) and m not in NOT_BEHAVIOUR
            and module_file(m) is not None}


def closure(modules: Iterable[str]) -> dict[str, Path]:
    """The modules and every trace_gym module they import, transitively: name -> file."""
    out: dict[str, Path] = {}
    queue = list(modules)
    while queue:
        name = queue.pop()
        if name in out:
            continue
        path = module_file(name)
        if path is None:
            continue
        out[name] = path
        queue.extend(imported_modules(_read(path), _package_of(name, path)) - out.keys())
    return out


@functools.cache
def _read_cached(path: Path, stamp: tuple[int, int]) -> str:
    return path.read_text(encoding="utf-8")


def _read(path: Path) -> str:
    stat = path.stat()
    return _read_cached(path, (stat.st_mtime_ns, stat.st_size))


def _files_sha256(files: dict[str, Path]) -> str:
    parts = []
    data_files: set[Path] = set()
    for name, path in files.items():
        parts.append(f"{name}:{_sha256_file(path)}")
        data_files.update(path.parent.glob("*.md"))
    parts += [f"data/{p.parent.name}/{p.name}:{_sha256_file(p)}" for p in data_files]
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


def _sha256_file(path: Path) -> str:
    stat = path.stat()
    return _sha256_cached(path, (stat.st_mtime_ns, stat.st_size))


@functools.cache
def _sha256_cached(path: Path, stamp: tuple[int, int]) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def env_code_sha256(path: str | Path) -> str:
    """sha256 over an env module file and the trace_gym code it builds on."""
    path = Path(path).resolve()
    source = path.read_bytes()
    stat = path.stat()
    return _env_code_sha256(path, (stat.st_mtime_ns, stat.st_size), hashlib.sha256(source).hexdigest())


@functools.cache
def _env_code_sha256(path: Path, stamp: tuple[int, int], own: str) -> str:
    package = ""
    for name in _names_of(path):
        package = _package_of(name, path)
    library = closure(imported_modules(_read(path), package))
    library.pop(next(iter(_names_of(path)), ""), None)
    return hashlib.sha256(f"module:{own}\nlibrary:{_files_sha256(library)}".encode()).hexdigest()


def _names_of(path: Path) -> list[str]:
    """The trace_gym module name of a file inside the trace_gym package, if it is one."""
    spec = importlib.util.find_spec(ROOT)
    roots = [Path(p).resolve() for p in (spec.submodule_search_locations or [])] if spec else []
    for root in roots:
        if root in path.parents:
            parts = path.relative_to(root).with_suffix("").parts
            return [".".join((ROOT, *(p for p in parts if p != "__init__")))]
    return []


def source_sha256(source: Any) -> str:
    """The env sha256 of an EnvSource (a module file, or a trusted entry point)."""
    if source.path is not None:
        return env_code_sha256(source.path)
    module = source.entry_point.partition(":")[0]
    path = module_file(module)
    if path is None:
        raise ValueError(f"no source file for {module}")
    return env_code_sha256(path)


def library_sha256() -> str:
    """sha256 over the trace_gym modules generated code may import, and what they import."""
    from trace_gym.audit.static import TRACE_GYM_MODULES

    return _files_sha256(closure(TRACE_GYM_MODULES))
