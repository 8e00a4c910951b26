"""A run made before the stages were typed still resumes: every stage's cache key, computed
by today's stages from that run's records, is the key the run recorded (so nothing reruns
but what changed), and every record reads back into its dataclass and out to the same JSON.

The fixture holds a micro smoke run's stage records (inputs, their hash, outputs) as the
untyped pipeline wrote them, and its configuration. Its paths are written relative
(`checkout/...`, `run/...`) so that it names no machine; the recorded hashes are those of the
inputs as stored (paths are only strings to a cache key)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO
from trace_gym.jsondata import sha256_json

FIXTURE = REPO / "tests" / "fixtures" / "pipeline" / "before_typed_stages.json"


@pytest.fixture
def old_run(tmp_path, monkeypatch):
    """The old run's records, its configuration loaded, and the env code and audit kit
    hashes it recorded standing in for today's (those change with the envs, as before)."""
    from trace_gym import registry
    from trace_gym.audit import lock

    data = json.loads(FIXTURE.read_text())
    codes: dict[str, str] = {}
    for stage in data["stages"].values():
        codes.update(stage["inputs"].get("code", {}))
        if "env_sha256" in stage["inputs"]:
            codes[stage["inputs"]["config"]["env_id"]] = stage["inputs"]["env_sha256"]
    monkeypatch.setattr(registry, "env_sha256", lambda env_id: codes[env_id])
    monkeypatch.setattr(lock, "current_key", lambda: data["stages"]["audit"]["inputs"]["kit"])
    path = tmp_path / "micro.toml"
    path.write_text(data["config"])
    return data, path


def test_every_record_reads_into_its_dataclass_and_back_to_the_same_json(old_run):
    from trace_gym.pipeline.stages import STAGES
    from trace_gym.pipeline.stages.train import Adapter

    data, _ = old_run
    for name, stage in data["stages"].items():
        record = Adapter if name.startswith("train-") else next(s.record for s in STAGES if s.name == name)
        assert record.from_json(stage["outputs"]).to_json() == stage["outputs"], name


def test_todays_stages_compute_the_keys_the_old_run_recorded(old_run, tmp_path):
    from trace_gym.pipeline.config import load
    from trace_gym.pipeline.contract import Run, State
    from trace_gym.pipeline.stages import STAGES
    from trace_gym.pipeline.stages.train import STAGE as TRAIN
    from trace_gym.pipeline.stages.train import Adapter, Adapters, train_inputs

    data, path = old_run
    old = data["stages"]
    state = State(load(path, "smoke"), Run(tmp_path / "run", log=lambda m: None), list(STAGES))
    checked = []
    for stage in STAGES:
        if stage is TRAIN:
            adapters = {}
            for name, record in old.items():
                if name.startswith("train-"):
                    env_id = record["inputs"]["config"]["env_id"]
                    key = sha256_json(train_inputs(state.config, state.get(STAGES[0]), env_id))
                    assert key == record["inputs_sha256"], name
                    adapters[env_id] = Adapter.from_json(record["outputs"])
                    checked.append(name)
            state.records[stage.name] = Adapters(adapters)
        elif stage.name in old:
            assert stage.inputs(state) == old[stage.name]["inputs"], stage.name
            assert sha256_json(stage.inputs(state)) == old[stage.name]["inputs_sha256"], stage.name
            state.records[stage.name] = stage.record.from_json(old[stage.name]["outputs"])
            checked.append(stage.name)
        else:  # a stage the old run did not record (the baselines, off): what an untyped run had
            state.records[stage.name] = stage.record()
    assert sorted(checked) == sorted(old)
