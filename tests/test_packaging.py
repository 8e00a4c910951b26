"""The distribution: one wheel with every import package, the prompts and the policy texts
as package data, found from an installed wheel as from a checkout."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from trace_gym.resources import prompts_dir, read_prompt


def test_prompts_found_from_checkout():
    assert "Prompts" in read_prompt("README.md")
    assert Path(str(prompts_dir())) == REPO / "prompts"


@pytest.mark.slow
def test_wheel_ships_packages_and_data(tmp_path):
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)]
    # Offline-friendly first (the environment's own setuptools); a bare venv may lack a
    # recent enough one, then pip fetches the build backend from the package index.
    if subprocess.run([*build, "--no-build-isolation"], capture_output=True).returncode != 0:
        subprocess.run(build, check=True, capture_output=True)
    wheel = next(tmp_path.glob("trace_gym-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for pkg in ("trace_gym", "generated_envs", "trainer", "moe", "analysis"):
        assert f"{pkg}/__init__.py" in names
    for data in ("trace_gym/prompts/README.md", "trace_gym/worlds/airline/policy.md",
                 "trace_gym/worlds/retail/policy.md", "generated_envs/manifest.json"):
        assert data in names
    assert any(n.endswith("entry_points.txt") for n in names)
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    # -S: no site-packages .pth, so the checkout's editable install is invisible
    deps = sysconfig.get_paths()["purelib"]
    code = ("import trace_gym, gymnasium as gym; from trace_gym.resources import read_prompt, prompts_dir; "
            "print(trace_gym.__file__); print(prompts_dir()); print(read_prompt('README.md')[:9]); "
            "env = gym.make('trace/airline-v0'); print(env.reset(seed=0)[0][0]['role'])")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path, env={"PYTHONPATH": f"{unpacked}:{deps}", "PATH": "/usr/bin:/bin"})
    lines = out.stdout.splitlines()
    assert lines[0].startswith(str(unpacked)) and str(unpacked) in lines[1]
    assert lines[2] == "# Prompts" and lines[3] == "system"
