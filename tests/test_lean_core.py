"""`pip install trace-gym` is what gym.make, the audit and the command line need: the front
doors import no step's library, and without the plot extra `analyze` writes all but its chart."""

from __future__ import annotations

import subprocess
import sys

FRONT_DOORS = """
import io, contextlib, sys
import gymnasium as gym
import trace_gym
from trace_gym.cli import main
env = gym.make("trace/precondition_verification-v0"); env.reset(seed=0)
for argv in (["list"], ["info", "trace/coding-v0"], ["play", "trace/retail-v0", "--seed", "1", "--policy", "oracle"]):
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(argv) == 0, argv
from trace_gym.audit import audit  # the audit's own imports
heavy = ["matplotlib", "torch", "transformers", "datasets", "peft", "trl", "pandas", "skyrl_gym", "openvino", "verifiers", "art"]
print(sorted(h for h in heavy if h in sys.modules))
"""

NO_MATPLOTLIB = """
import sys, logging
sys.modules["matplotlib"] = None  # as if the plot extra were not installed
logging.basicConfig(level=logging.WARNING, format="%(message)s")
from pathlib import Path
from trace_gym.agents.base import OraclePolicy
from trace_gym.rollout import rollout
from trace_gym.analysis.pipeline import analyze
out = Path(sys.argv[1])
rollout("trace/retail-v0", OraclePolicy, range(2), out / "runs.jsonl")
analyze([out / "runs.jsonl"], out / "analysis")
print(sorted(p.name for p in (out / "analysis").iterdir()))
"""


def test_the_front_doors_import_no_steps_library():
    out = subprocess.run([sys.executable, "-c", FRONT_DOORS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_analyze_without_the_plot_extra_writes_all_but_the_chart(tmp_path):
    out = subprocess.run([sys.executable, "-c", NO_MATPLOTLIB, str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "selected_capabilities.json" in out.stdout and "capabilities.png" not in out.stdout
    assert "pip install 'trace-gym[plot]'" in out.stderr
