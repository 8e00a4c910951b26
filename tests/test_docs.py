"""The documentation stays true: the site builds strictly (a broken link, a page missing from
the nav or an unknown anchor fails), and the README's tour runs as written through the
installed command line, each command exiting 0."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _mkdocs(config: str, cwd, site) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", config, "-d", str(site)],
                          cwd=cwd, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly(tmp_path):
    out = _mkdocs("mkdocs.yml", REPO, tmp_path / "site")
    assert "No module named mkdocs" not in out.stderr, "mkdocs is missing: install the test extra"
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site" / "envs" / "index.html").is_file()


def test_a_broken_link_fails_the_build(tmp_path):
    """The check above can fail: a copy of the docs with one link to a page that does not exist."""
    shutil.copytree(REPO / "docs", tmp_path / "docs")
    shutil.copy(REPO / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "cli.md"
    page.write_text(page.read_text() + "\nSee [the missing page](missing.md).\n")
    out = _mkdocs("mkdocs.yml", tmp_path, tmp_path / "site")
    assert out.returncode != 0 and "missing.md" in out.stderr, out.stderr[-2000:]


def tour() -> list[str]:
    """The commands of the README's tour, in order."""
    text = (REPO / "README.md").read_text()
    block = re.search(r"## A tour in a minute\n\n```bash\n(.*?)```", text, re.DOTALL)
    assert block, "the README has no tour"
    return [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_the_readmes_tour_runs_as_written(tmp_path):
    trace_gym = shutil.which("trace-gym")
    if trace_gym is None:
        pytest.fail("the trace-gym command is not installed (pip install -e .)")
    commands = tour()
    assert [c.split()[1] for c in commands] == ["list", "info", "play", "-p", "rollout", "view"]
    path = f"{Path(trace_gym).parent}{os.pathsep}{os.environ['PATH']}"
    for command in commands:  # in a scratch directory, by a shell: the tour's runs/ is made there
        out = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PATH": path})
        assert out.returncode == 0, f"{command}\n{out.stderr[-2000:]}"
        assert "Traceback" not in out.stderr, command
    assert (tmp_path / "runs" / "tour.jsonl").is_file()
