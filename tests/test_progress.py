"""The library reports through `logging` (the `trace_gym` logger), never through callbacks or
`print`: a program that imports it sees nothing until it configures logging; the CLI shows
the lines on stderr and keeps stdout for results."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys

from tests.conftest import REPO

LIBRARY = ["trace_gym", "pipeline", "trainer", "moe", "analysis", "generated_envs"]
"""The package's source folders (the step folders install under trace_gym)."""


def _library_files():
    for root in LIBRARY:
        for path in sorted((REPO / root).rglob("*.py")):
            if "cli" not in path.relative_to(REPO).parts and path.name != "__main__.py":
                yield path


def test_no_library_function_prints_or_takes_a_log_callback():
    found = []
    for path in _library_files():
        tree = ast.parse(path.read_text(), str(path))
        scripts = {id(node) for block in ast.walk(tree)
                   if isinstance(block, ast.If) and "__main__" in ast.unparse(block.test) for node in ast.walk(block)}
        for node in ast.walk(tree):
            where = f"{path.relative_to(REPO)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print" \
                    and id(node) not in scripts:
                found.append(f"{where}: print()")
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found += [f"{where}: {node.name}(log=...)" for a in node.args.args + node.args.kwonlyargs
                          if a.arg == "log"]
    assert not found, found


SCRIPT = """
import logging, sys
from pathlib import Path
from trace_gym.analysis.pipeline import analyze
from trace_gym.agents.base import OraclePolicy
from trace_gym.rollout import rollout
if sys.argv[1] == "configured":
    logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
out = Path(sys.argv[2])
rollout("trace/retail-v0", OraclePolicy, range(2), out / "runs.jsonl")
analyze([out / "runs.jsonl"], out / "analysis")
"""


def test_a_program_sees_the_librarys_lines_only_once_it_configures_logging(tmp_path):
    def run(mode: str) -> subprocess.CompletedProcess[str]:
        (tmp_path / mode).mkdir()
        return subprocess.run([sys.executable, "-c", SCRIPT, mode, str(tmp_path / mode)], capture_output=True,
                              text=True, timeout=300)

    quiet = run("bare")
    assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == "", quiet.stderr[-2000:]
    told = run("configured")
    assert told.returncode == 0 and told.stdout == "", told.stderr[-2000:]
    assert "trace_gym.analysis.pipeline: 2 trajectories: 2 passed, 0 failed" in told.stderr, told.stderr[-2000:]


def test_the_cli_logs_on_stderr_and_keeps_stdout_for_results(tmp_path):
    trace_gym = shutil.which("trace-gym")
    assert trace_gym, "the trace-gym command is not installed (pip install -e .)"
    records = tmp_path / "runs.jsonl"
    made = subprocess.run([trace_gym, "rollout", "trace/retail-v0", "--policy", "oracle",
                           "--seeds", "0:2", "--out", str(records), "--quiet"], capture_output=True, text=True,
                          timeout=300)
    assert made.returncode == 0 and made.stdout == "", made.stderr[-2000:]
    out = subprocess.run([trace_gym, "analyze", str(records), "--out", str(tmp_path / "a")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "2 trajectories: 2 passed, 0 failed" in out.stderr and "trajectories:" not in out.stdout
    assert "selected_capabilities.json" in out.stdout


def test_main_called_in_a_program_leaves_its_logging_as_it_was():
    import logging

    from trace_gym.cli import main

    logger = logging.getLogger("trace_gym")
    level, handlers = logger.level, list(logger.handlers)
    assert main(["info", "trace/retail-v0"]) == 0
    assert main(["play", "trace/nope-v0", "--seed", "0"]) == 2
    assert (logger.level, logger.handlers) == (level, handlers)
