"""Every public name of the package has a docstring: ruff's pydocstyle rules (D100-D104,
D106; configured in pyproject.toml), run over the whole checkout by the suite."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO

RULES = "D100,D101,D102,D103,D104,D106"


def _ruff() -> list[str]:
    return [sys.executable, "-m", "ruff"]  # the test extra installs it; a missing ruff fails below, saying so


def test_every_public_name_has_a_docstring():
    out = subprocess.run([*_ruff(), "check", "--no-cache", "--select", RULES, "--output-format", "concise", "."],
                         cwd=REPO, capture_output=True, text=True)
    assert "No module named ruff" not in out.stderr, "ruff is missing: install the test extra (pip install -e '.[test]')"
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-1000:]


def test_the_rules_see_a_missing_docstring(tmp_path):
    """The check above can fail: a public function without a docstring is found."""
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\n")
    (tmp_path / "mod.py").write_text('"""A module."""\n\n\ndef public():\n    return 1\n')
    out = subprocess.run([*_ruff(), "check", "--no-cache", "--select", RULES, "--output-format", "concise", "."],
                         cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 1 and "D103" in out.stdout, out.stdout + out.stderr


OUTSIDE = ("DESIGN §", "DESIGN.md", "STYLE.md")
"""How a reference to a document that is not in the repo reads."""


def test_no_file_cites_a_document_outside_the_repo():
    files = [p for pattern in ("*.py", "*.md", "*.toml") for p in REPO.rglob(pattern)
             if not {"build", ".git", ".hypothesis", "runs"} & set(p.relative_to(REPO).parts)
             and p.name != "test_lint.py"]
    cited = [f"{p.relative_to(REPO)}: {word}" for p in files for word in OUTSIDE
             if word in p.read_text(encoding="utf-8", errors="replace")]
    assert cited == []
