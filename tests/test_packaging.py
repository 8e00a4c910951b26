"""The distribution: one wheel with every import package, the prompts and the policy texts
as package data, found from an installed wheel as from a checkout."""

from __future__ import annotations

import ast
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO
from trace_gym.resources import prompts_dir, read_prompt

STEPS = ("trace_gym.generated_envs", "trace_gym.analysis", "trace_gym.trainer", "trace_gym.moe", "trace_gym.pipeline")


def _imported_modules(tree: ast.AST, package: str) -> set[str]:
    """Every module an AST imports, relative imports resolved against `package`."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{parent}.{base}" if base else parent
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def test_the_library_imports_no_step():
    """The library part of trace_gym (env contract, worlds, registry, agents, rollout, audit,
    synthesis) imports no step package; the CLI reaches the steps inside its command
    functions only, so that `import trace_gym.cli` imports none of them either."""
    offenders = []
    for path in sorted((REPO / "trace_gym").rglob("*.py")):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        scope = [tree]
        if path.parent.name == "cli":  # a command imports its step inside its functions
            scope = [n for n in tree.body if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in scope:
            for name in _imported_modules(node, package):
                if name.startswith(STEPS) or name.split(".")[0] in {"generated_envs", "analysis", "trainer", "moe", "pipeline"}:
                    offenders.append(f"{module} imports {name}")
    assert offenders == []
    code = ("import sys, trace_gym, trace_gym.cli, trace_gym.rollout, trace_gym.synthesis, trace_gym.audit; "
            f"print(sorted(m for m in sys.modules if m.startswith({STEPS!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


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
    for pkg in STEPS:
        assert f"{pkg.replace('.', '/')}/__init__.py" in names
    assert not {n.split("/")[0] for n in names} & {"generated_envs", "analysis", "trainer", "moe", "pipeline"}
    for data in ("trace_gym/prompts/README.md", "trace_gym/worlds/airline/policy.md",
                 "trace_gym/worlds/retail/policy.md", "trace_gym/generated_envs/manifest.json",
                 "trace_gym/configs/embedded.toml", "trace_gym/configs/gpu-qwen3-30b-a3b.toml"):
        assert data in names
    assert any(n.endswith("entry_points.txt") for n in names)
    unpacked = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(unpacked)
    # -S: no site-packages .pth, so the checkout's editable install is invisible
    deps = sysconfig.get_paths()["purelib"]
    code = ("import trace_gym, gymnasium as gym; from trace_gym.resources import read_prompt, prompts_dir; "
            "print(trace_gym.__file__); print(prompts_dir()); print(read_prompt('README.md')[:9]); "
            "env = gym.make('trace/airline-v0'); print(env.reset(seed=0)[0][0]['role']); "
            "from trace_gym.resources import embedded_config; from trace_gym.baseagent.build import embedded_recipe; "
            "print(embedded_config()); print(embedded_recipe().source)")
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path, env={"PYTHONPATH": f"{unpacked}:{deps}", "PATH": "/usr/bin:/bin"})
    lines = out.stdout.splitlines()
    assert lines[0].startswith(str(unpacked)) and str(unpacked) in lines[1]
    assert lines[2] == "# Prompts" and lines[3] == "system"
    assert lines[4].startswith(str(unpacked)) and lines[4].endswith("trace_gym/configs/embedded.toml")
    assert lines[5] == "smollm2-135m-instruct"  # the recipe read from the shipped config
    # the first command's dry run, from another directory: its default config is package data
    code = "import sys; from trace_gym.cli import main; sys.exit(main(['pipeline', '--dry-run']))"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": f"{unpacked}:{deps}", "PATH": "/usr/bin:/bin",
                              "TRACE_GYM_HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"plan of {unpacked}/trace_gym/configs/embedded.toml (budget default)")
    assert "build smollm2-135m-instruct" in out.stdout and "no build measured on this machine" in out.stdout
