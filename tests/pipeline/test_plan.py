"""`trace-gym pipeline --dry-run`: the configuration checked, each stage's work and its
estimate from this machine's measured rates, no model loaded."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import REPO
from trace_gym import rates
from trace_gym.errors import InvalidConfig

GREEDY = "local openvino {dtype} greedy"
SAMPLED = "local openvino {dtype} sampled"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_GYM_HOME", str(tmp_path / "home"))


def _keys() -> tuple[str, str]:
    from trace_gym.agents.hardware import placement

    dtype = placement("auto").dtype
    return GREEDY.format(dtype=dtype), SAMPLED.format(dtype=dtype)


def _minutes(text: str, stage: str) -> float | None:
    line = next(line for line in text.splitlines() if line.strip().startswith(stage))
    found = re.search(r"(\d+\.\d) min", line)
    return float(found.group(1)) if found and "not estimated" not in line else None


def test_each_stage_is_estimated_from_the_rates_measured_here():
    from trace_gym.pipeline.plan import dry_run

    text = dry_run()  # the embedded default: 32 rollouts a target, 16 x 7 evaluation episodes a target
    assert "build smollm2-135m-instruct" in text and "no build measured on this machine" in text
    assert _minutes(text, "rollouts") is None and "no rate measured on this machine" in text
    greedy, sampled = _keys()
    rates.record(greedy, "trace/airline-v0", 30, 60 * 10)    # 3 a minute
    rates.record(greedy, "trace/retail-v0", 10, 60 * 10)     # 1 a minute
    rates.record(sampled, "trace/precondition_verification-v0", 40, 60 * 10)  # 4 a minute, for all four envs
    rates.record("base-agent build", "smollm2-135m-instruct", 144, 60 * 12)
    text = dry_run()
    # 96 demonstrations a target and 16 of each capability env: 256 at 12 a minute
    assert _minutes(text, "base_agent") == pytest.approx(256 / 12, abs=0.1)
    assert _minutes(text, "rollouts") == pytest.approx(32 / 3 + 32 / 1, abs=0.1)
    assert _minutes(text, "calibrate") == pytest.approx(4 * 32 / 4, abs=0.1)
    assert _minutes(text, "eval") == pytest.approx(7 * 16 / 3 + 7 * 16 / 1, abs=0.1)
    assert _minutes(text, "train") is None  # no training measured: its rollouts alone are named
    assert "its rollouts alone: 128.0 min" in text  # 4 envs x 128 episodes at 4 a minute
    rates.record("train openvino", "trace/precondition_verification-v0", 64, 60 * 32)  # 2 a minute
    text = dry_run()
    assert _minutes(text, "train") == pytest.approx(4 * 128 / 2, abs=0.1)
    assert "over the 60-minute budget" in text and "train (256.0 min)" in text


def test_a_bad_knob_is_refused_before_anything_runs(tmp_path):
    from trace_gym.pipeline.plan import dry_run

    text = (REPO / "configs" / "embedded.toml").read_text()
    kinds = 'kinds = ["cancel_order", "modify_order_address", "modify_user_address", "return_items"]\n'
    assert text.count(kinds) == 1  # the retail miniature's
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace(kinds, 'kinds = ["no_such_kind"]\n'))
    with pytest.raises(InvalidConfig, match=r"bad\.toml: trace/retail-v0 with knobs .*no_such_kind"):
        dry_run(bad)
    assert text.count("samples = 4\n") == 1  # [calibrate]'s
    bad.write_text(text.replace("samples = 4\n", "samples = 4\nsamples_per_seed = 2\n"))
    with pytest.raises(InvalidConfig, match=r"\[calibrate\] has unknown key\(s\) \['samples_per_seed'\]"):
        dry_run(bad)


def test_the_dry_run_loads_no_model_and_the_cli_prints_it(tmp_path):
    code = ("import sys; from trace_gym.cli import main; code = main(['pipeline', '--dry-run']); "
            "print(sorted(m for m in ('torch', 'transformers', 'openvino', 'peft') if m in sys.modules)); "
            "sys.exit(code)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("plan of ") and "embedded.toml (budget default)" in out.stdout.splitlines()[0]
    assert out.stdout.splitlines()[-1] == "[]"


def test_the_clock_says_what_is_left_and_writes_a_line_a_minute_without_a_terminal():
    import threading

    from trace_gym.pipeline.clock import Clock
    from trace_gym.pipeline.stages import STAGES

    estimate = dict.fromkeys((s.name for s in STAGES), 0.0) | {"rollouts": 600.0, "train": None, "eval": 1200.0}
    lines, ticked = [], threading.Event()

    def say(line):
        lines.append(line)
        ticked.set()

    with Clock(estimate, say, every=0.05) as clock:
        assert clock.left() == ""  # before the first stage
        clock.start("rollouts")
        assert clock.left() == "about 30 min left (train not estimated)"
        assert ticked.wait(5)
        clock.start("eval")
        assert clock.left() == "about 20 min left"
    assert lines[0].startswith("rollouts: running for 0 s, about 30 min left (train not estimated)")
    count = len(lines)
    ticked.clear()
    assert not ticked.wait(0.2) and len(lines) == count  # stopped with the run
