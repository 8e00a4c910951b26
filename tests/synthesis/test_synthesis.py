"""The synthesis loop against a local server playing the synthesis agent."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.agents.fake_server import FakeServer
from tests.audit.mutants import TEMPLATE, mutant
from tests.conftest import REPO
from trace_gym.audit import Limits, audit
from trace_gym.audit.lock import read_lock
from trace_gym.cli import main
from trace_gym.synthesis import extract_code
from trace_gym.testing import KitSettings

FAST = KitSettings(examples=10, oracle_seeds=10, episodes=20, soundness_seeds=4, distinct_seeds=60,
                   adversary_seeds=24, wording_seeds=300, gold_seeds=40)
TIGHT = Limits(cpu_seconds=8, memory_bytes=2 * 2**30, wall_seconds=40)
NAME = "checking_rules_first"


def _selected(tmp_path):
    path = tmp_path / "selected_capabilities.json"
    path.write_text(json.dumps({"schema_version": 1, "params": {}, "inputs_sha256": "x", "capabilities": [
        {"name": NAME, "description": "Check the rules before acting.", "mean_delta": 0.5, "status": "PENDING",
         "example_failed_ids": []},
        {"name": "other_thing_here", "description": "x", "mean_delta": 0.1, "status": "NOT_SELECTED"}]}))
    return path


def _reply(code: str) -> dict:
    return {"content": f"Here is the module.\n```python\n{code}```\n"}


def _run(tmp_path, server, *extra):
    from trace_gym import synthesis

    original = synthesis.synthesize

    def fast(*args, **kwargs):
        return original(*args, kit_settings=FAST, limits=TIGHT, seed_base=0, **kwargs)

    synthesis.synthesize = fast
    try:
        return main(["synthesize", str(_selected(tmp_path)), "--base-url", server.url, "--model", "fake",
                     "--envs-dir", str(tmp_path / "envs"), "--run-dir", str(tmp_path / "run"), *extra])
    finally:
        synthesis.synthesize = original


def test_failure_is_fed_back_and_the_fix_installed(tmp_path):
    broken = mutant(tmp_path, "broken", imports="import random", generate="rng = Rng.from_seed(random.randrange(9))").read_text()
    good = TEMPLATE.read_text()
    answers = [_reply(broken), _reply(good)]
    seen = []

    def script(body):
        seen.append(body["messages"])
        return "ok", answers[min(len(seen) - 1, 1)]

    with FakeServer(script) as server:
        assert _run(tmp_path, server) == 0
    assert len(seen) == 2
    feedback = seen[1][-1]["content"]
    assert "rejected" in feedback and "global random" in feedback
    assert "environment_generation" not in feedback and "# The capability" not in feedback
    installed = tmp_path / "envs" / f"{NAME}.py"
    assert installed.read_text() == good
    manifest = json.loads((tmp_path / "envs" / "manifest.json").read_text())
    (entry,) = manifest["envs"]
    assert entry["id"] == f"trace/{NAME}-v0" and entry["origin"] == "synthesized"
    status = {c["name"]: c["status"] for c in json.loads((tmp_path / "selected_capabilities.json").read_text())["capabilities"]}
    assert status == {NAME: "READY", "other_thing_here": "NOT_SELECTED"}
    for attempt in (1, 2):
        folder = tmp_path / "run" / NAME / f"attempt_{attempt}"
        assert {p.name for p in folder.iterdir()} == {"prompt.json", "response.md", "module.py", "report.json"}
    # the installed module's audit reproduces the recorded one
    lock = read_lock(tmp_path / "envs")["entries"][entry["sha256"]]
    again = audit(str(installed), FAST, TIGHT, record=False, seed_base=0)
    assert lock["results"] == [{k: r[k] for k in ("name", "passed", "detail")} for r in again.results]
    # and the new id works in a fresh process
    code = (f"import gymnasium as gym, trace_gym; env = gym.make('trace/{NAME}-v0'); obs, info = env.reset(seed=3); "
            "print(len(info['tools']))")
    out = subprocess.run([sys.executable, "-W", "error::UserWarning", "-c", code], capture_output=True, text=True,
                         cwd=REPO, env={**os.environ, "TRACE_GYM_ENVS_DIR": str(tmp_path / "envs")})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "2"


def test_only_broken_modules_end_failed_with_nothing_installed(tmp_path):
    broken = mutant(tmp_path, "broken", verify="ok = True").read_text()  # passes static rules, fails soundness
    with FakeServer(lambda body: ("ok", _reply(broken))) as server:
        assert _run(tmp_path, server) == 1
    assert not (tmp_path / "envs" / f"{NAME}.py").exists()
    assert not (tmp_path / "envs" / "manifest.json").exists()
    selected = json.loads((tmp_path / "selected_capabilities.json").read_text())
    cap = selected["capabilities"][0]
    assert cap["status"] == "FAILED" and not cap["last_report"]["passed"]
    assert len(list((tmp_path / "run" / NAME).glob("attempt_*"))) == 5


@pytest.mark.parametrize("hooks", [
    {"imports": "import socket"},
    {"imports": "import subprocess"},
    {"generate": "open({marker!r}, 'w').write('x')"},
    {"generate": "while True:\n    pass"},
])
def test_hostile_answers_never_run_outside_the_sandbox(tmp_path, hooks):
    marker = tmp_path / "ran"
    hooks = {k: v.format(marker=str(marker)) for k, v in hooks.items()}
    hostile = mutant(tmp_path, "hostile", **hooks).read_text()
    with FakeServer(lambda body: ("ok", _reply(hostile))) as server:
        assert _run(tmp_path, server, "--attempts", "2") == 1
    assert not marker.exists()
    assert not (tmp_path / "envs" / f"{NAME}.py").exists()


def test_installed_envs_are_kept_without_replace(tmp_path):
    good = TEMPLATE.read_text()
    with FakeServer(lambda body: ("ok", _reply(good))) as server:
        assert _run(tmp_path, server) == 0
        (tmp_path / "envs" / f"{NAME}.py").write_text(good + "\n# reviewed\n")
        assert _run(tmp_path, server) == 0
    assert (tmp_path / "envs" / f"{NAME}.py").read_text().endswith("# reviewed\n")


def test_extract_code():
    assert extract_code("text\n```python\nx = 1\n```\nmore") == "x = 1\n"
    assert extract_code("no code here at all!") is None
    assert extract_code("x = 1\ny = 2") == "x = 1\ny = 2\n"


def test_calibration_result_is_fed_back(tmp_path):
    """With a base policy the module is also calibrated; out of band, the figures go back."""
    import functools

    from tests.synthesis.test_calibration import Sometimes
    from trace_gym import synthesis
    from trace_gym.calibration import Bands

    good = TEMPLATE.read_text()
    seen = []

    def script(body):
        seen.append(body["messages"])
        return "ok", _reply(good)

    selected = _selected(tmp_path)
    with FakeServer(script) as server:
        from openai import OpenAI

        client = OpenAI(base_url=server.url, api_key="x")

        def complete(messages):
            return client.chat.completions.create(model="fake", messages=messages).choices[0].message.content

        too_easy = synthesis.Calibration(functools.partial(Sometimes, 1.0), seeds=8, samples=4, bands=Bands())
        results = synthesis.synthesize(selected, complete, envs_dir=tmp_path / "envs", run_dir=tmp_path / "run",
                                       attempts=2, calibration=too_easy, kit_settings=FAST, limits=TIGHT, seed_base=0)
    assert results[0].status == "FAILED"
    assert "too easy" in seen[1][-1]["content"]
    report = json.loads((tmp_path / "run" / NAME / "attempt_1" / "report.json").read_text())
    assert report["calibration"]["success_rate"] == 1.0 and not report["calibration"]["calibrated"]
