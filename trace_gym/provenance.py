"""Which code an env's behaviour depends on, as one sha256.

- `env_code_sha256(path)`: an env module and every trace_gym module it imports, directly or
  through other trace_gym modules (imports read from the source, never executed), with the
  text files those packages read (the policies). Recorded in every trajectory
  (`env_sha256`): equal hashes, equal episodes for equal seeds and actions. Computed once per
  file version, not per record.
- `library_sha256(modules)`: the same over the trace_gym modules a generated env may import
  (the static rules' allowlist, passed in by the audit lock), part of the audit lock's key,
  so that a change to what generated code builds on invalidates its audits and an unrelated
  commit does not.
- `dir_sha256(path)`: a model's or adapter's files, for run fingerprints and caches.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from trace_gym.errors import TraceGymError

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


def import_targets(tree: ast.AST, package: str = "") -> Iterator[tuple[str, str | None]]:
    """Every import anywhere in `tree`, inside functions too, as (module, name): `import M`
    gives (M, None), `from M import x` gives (M, x), relative imports resolved against
    `package`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((a.name, None) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            yield from ((base, a.name) for a in node.names)


def imported_modules(source: str, package: str = "") -> set[str]:
    """The trace_gym modules a source imports anywhere in it: `import M` names M, and
    `from M import x` names M.x when that is a module, else M. (A package's `__init__`
    runs too, but trace_gym's are namespaces and the registry, not env behaviour.)"""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    found: set[str] = set()
    for base, name in import_targets(tree, package):
        sub = f"{base}.{name}" if name is not None else None
        found.add(sub if sub is not None and module_file(sub) is not None else base)
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
        raise TraceGymError(f"no source file for {module}")
    return env_code_sha256(path)


def library_sha256(modules: Iterable[str]) -> str:
    """sha256 over `modules` (the trace_gym modules generated code may import:
    `trace_gym.audit.static.TRACE_GYM_MODULES` and its `DEPRECATED_MODULES`) and every
    trace_gym module they import."""
    return _files_sha256(closure(modules))


def dir_sha256(path: str | os.PathLike) -> str:
    """sha256 over a directory's files (names and bytes), or a file's bytes; computed once
    per version of each file."""
    path = Path(path)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    parts = [f"{p.relative_to(path) if path.is_dir() else p.name}:{_file_sha256(p)}" for p in files]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    stat = path.stat()
    return _file_sha256_cached(path.resolve(), stat.st_mtime_ns, stat.st_size)


@functools.cache
def _file_sha256_cached(path: Path, mtime_ns: int, size: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
