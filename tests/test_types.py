"""The package type-checks: mypy, configured in pyproject.toml's [tool.mypy], run by the suite
over the package as it is installed: trace_gym/ with the step folders (analysis/, trainer/,
moe/, pipeline/, generated_envs/) in their places, as pyproject's package-dir maps them, which
mypy cannot follow by itself (the package ships py.typed, so its users' checkers read these
annotations)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REPO

CONFIG = REPO / "pyproject.toml"


def _mypy(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """`python -m mypy` with the checkout's configuration; the test extra installs it."""
    return subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(cache),
                           "--no-color-output", "--no-error-summary", *args],
                          cwd=cwd, capture_output=True, text=True)


def _cache() -> Path:
    """mypy's cache, outside the checkout and kept between runs of the suite: cold, the check
    reads torch's, transformers' and openai's annotations too and took 51 s on two cores;
    warm, 2 s. One per checkout, so that two worktrees do not share one."""
    key = hashlib.sha256(str(REPO).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"trace-gym-mypy-{key}"


def installed_layout(root: Path) -> Path:
    """`root/trace_gym` as the package installs it, made of links to the checkout's files:
    each entry of trace_gym/ and each mapped step folder under its package name."""
    import shutil
    import tomllib

    view = root / "trace_gym"
    if view.exists():
        shutil.rmtree(view)
    view.mkdir(parents=True)
    for entry in (REPO / "trace_gym").iterdir():
        if entry.name != "__pycache__":
            (view / entry.name).symlink_to(entry)
    folders = tomllib.loads(CONFIG.read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in folders.items():
        name = package.removeprefix("trace_gym.")
        if package.startswith("trace_gym.") and "." not in name and (REPO / folder / "__init__.py").is_file():
            (view / name).symlink_to(REPO / folder)
    return root


@pytest.mark.slow
def test_the_package_type_checks():
    root = installed_layout(_cache() / "layout")
    out = _mypy("-p", "trace_gym", cwd=root, cache=_cache() / "cache")
    assert "No module named mypy" not in out.stderr, "mypy is missing: install the test extra (pip install -e '.[test]')"
    assert out.returncode == 0, out.stdout[-8000:] + out.stderr[-2000:]


def test_the_check_sees_a_type_error(tmp_path):
    """The check above can fail: a wrong return type is found, and so is a `type: ignore` that
    ignores nothing (warn_unused_ignores)."""
    (tmp_path / "mod.py").write_text('"""A module."""\n\n\ndef one() -> int:\n    return "1"\n\n\n'
                                     'TWO: int = 2  # type: ignore[assignment]\n')
    out = _mypy("mod.py", cwd=tmp_path, cache=tmp_path / "cache")
    assert out.returncode == 1, out.stdout + out.stderr
    assert "mod.py:5: error" in out.stdout and "[return-value]" in out.stdout, out.stdout
    assert "mod.py:8: error" in out.stdout and "[unused-ignore]" in out.stdout, out.stdout
