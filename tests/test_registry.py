"""Registration: lazy, namespaced, with helpful errors."""

from __future__ import annotations

import json
import subprocess
import sys

import gymnasium as gym
import pytest

import trace_gym
from tests.conftest import REPO
from trace_gym.errors import TraceGymError, UnknownEnv
from trace_gym.registry import read_manifest


def test_targets_are_registered_and_listed():
    ids = [e.id for e in trace_gym.list_envs()]
    assert ids[:3] == ["trace/airline-v0", "trace/coding-v0", "trace/retail-v0"]  # targets first, by id
    assert all(i in gym.registry for i in ids)


def test_module_prefixed_id_works():
    env = gym.make("trace_gym:trace/airline-v0")
    obs, _ = env.reset(seed=0)
    assert obs[0]["role"] == "system"


def test_unknown_id_suggests_the_nearest():
    with pytest.raises(UnknownEnv, match="Did you mean: trace/airline-v0"):
        trace_gym.make("trace/airlin-v0")


def test_import_is_lazy():
    code = ("import sys, trace_gym; "
            "print([m for m in sys.modules if m.startswith(('trace_gym.targets', 'trace_gym.generated_envs'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("text, message", [
    ("{", "not valid JSON"),
    ('{"envs": 3}', "list 'envs'"),
    ('{"envs": [{"id": "trace/x-v0"}]}', "lacks entry_point"),
    ('{"envs": [{"id": "x-v0", "entry_point": "a:b", "capability": "c", "description": "d", '
     '"origin": "shipped", "sha256": "0"}]}', "must start with 'trace/'"),
])
def test_malformed_manifests_are_refused_saying_where(text, message):
    with pytest.raises(TraceGymError, match=message) as info:
        read_manifest(text, "somewhere/manifest.json")
    assert "somewhere/manifest.json" in str(info.value)


def test_shipped_manifest_is_valid():
    data = json.loads((REPO / "generated_envs" / "manifest.json").read_text())
    read_manifest(json.dumps(data), "generated_envs/manifest.json")


def test_one_function_decides_where_an_env_runs(tmp_path, monkeypatch):
    """`trust`: built-in targets, shipped envs and the user's own gymnasium envs run in this
    process; generated code runs sandboxed, and training on it without a passing audit is
    refused unless allowed. The trainer and the pipeline ask the same function."""
    from trace_gym.registry import _ENTRIES, IN_PROCESS, REFUSED, SANDBOXED, EnvEntry, trust
    from trace_gym.trainer.training import check_env_allowed

    assert trust("trace/airline-v0").mode == IN_PROCESS
    assert trust("trace/precondition_verification-v0", training=True).mode == IN_PROCESS
    monkeypatch.setitem(gym.registry, "mine/Own-v0", gym.registry["CartPole-v1"])
    assert trust("mine/Own-v0", training=True).mode == IN_PROCESS
    module = tmp_path / "unaudited_env.py"
    module.write_text((REPO / "tests" / "audit" / "template_env.py").read_text())
    monkeypatch.setitem(_ENTRIES, "trace/unaudited-v0", EnvEntry(
        "trace/unaudited-v0", f"file:{module}:TemplateEnv", "test", kind="capability", capability="x",
        origin="synthesized", sha256="0" * 64))
    played = trust("trace/unaudited-v0")
    assert (played.mode, played.audited) == (SANDBOXED, False)
    refused = trust("trace/unaudited-v0", training=True)
    assert refused.mode == REFUSED and "trace-gym audit" in refused.reason and "--allow-unaudited" in refused.reason
    assert trust("trace/unaudited-v0", training=True, allow_unaudited=True).mode == SANDBOXED
    with pytest.raises(TraceGymError, match="no passing audit"):
        check_env_allowed("trace/unaudited-v0", allow_unaudited=False)

    from trace_gym.pipeline.contract import Run, State
    from trace_gym.pipeline.stages import audit, envs

    chosen = envs.Envs([envs.ChosenEnv("c", "trace/unaudited-v0", "synthesized"),
                        envs.ChosenEnv("precondition_verification", "trace/precondition_verification-v0", "shipped")], [])
    state = State(None, Run(tmp_path, log=lambda m: None), records={"envs": chosen})  # type: ignore[arg-type]
    trainable = audit.STAGE.run(tmp_path, state).trainable
    assert [e.env_id for e in trainable] == ["trace/precondition_verification-v0"]
