"""Task export (`trace-gym export`, `dataset`) and the shipped JSON Schemas, validated over
real rows and real trajectory records of every shipped env and of both importers."""

from __future__ import annotations

import json
import shutil
import subprocess

import fastjsonschema
import gymnasium as gym
import pytest

from tests.conftest import REPO
from trace_gym.agents.base import OraclePolicy
from trace_gym.interop import play
from trace_gym.interop.tasks import dataset, schema, task_rows, validator
from trace_gym.registry import list_envs
from trace_gym.rollout import read_records, rollout

SHIPPED = [e.id for e in list_envs()]


@pytest.mark.parametrize("env_id", SHIPPED)
def test_every_envs_rows_and_records_meet_the_schemas(env_id, tmp_path):
    rows = list(task_rows(env_id, [0, 1_000_000_003]))
    for row in rows:
        validator("task")(row)
    env = gym.make(env_id)
    env.reset(seed=rows[0]["seed"])
    assert rows[0]["prompt"] == env.reset(seed=0)[0] and rows[0]["task"] == env.unwrapped.task.to_json()
    assert [r["split"] for r in rows] == ["train", "test"]
    rollout(env_id, OraclePolicy, [0], tmp_path / "oracle.jsonl")  # the records `trace-gym rollout` writes
    (oracle,) = read_records(tmp_path / "oracle.jsonl")
    refused = play(env_id, 1, lambda messages, tools: "I cannot help with that.")
    for record in (oracle, refused):
        validator("trajectory")(record)
    assert oracle["reward"] == 1.0


def test_imported_records_meet_the_trajectory_schema(tmp_path):
    from trace_gym.tau2 import import_results

    reference = REPO.parent / "shared" / "reference" / "tau2" / "airline_results.json"
    if not reference.is_file():
        pytest.skip("the tau2 reference data is not beside the checkout")
    records = list(import_results(reference))
    assert records
    for record in records:
        validator("trajectory")(record)


@pytest.mark.parametrize("broken", [
    {"reward": 1.5}, {"passed": "yes"}, {"messages": [{"role": "robot", "content": "hi"}]},
    {"messages": [{"role": "assistant", "content": None}]},
    {"messages": [{"role": "tool", "content": "x"}]},
    {"messages": [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": "[1]"}}]}]},
])
def test_the_trajectory_schema_refuses_what_the_readers_refuse(broken):
    record = play("trace/retail-v0", 0, lambda messages, tools: "no") | broken
    with pytest.raises(fastjsonschema.JsonSchemaValueException):
        validator("trajectory")(record)


def test_a_row_with_a_stray_field_or_a_bad_seed_is_refused():
    (row,) = task_rows("trace/retail-v0", [0])
    for broken in ({**row, "answer": 1}, {**row, "seed": -1}, {**row, "prompt": []}):
        with pytest.raises(fastjsonschema.JsonSchemaValueException):
            validator("task")(broken)


def test_the_dataset_holds_the_rows_in_arrow_columns():
    data = dataset("trace/precondition_verification-v0", [0, 1])
    rows = list(task_rows("trace/precondition_verification-v0", [0, 1]))
    assert data["seed"] == [0, 1] and [json.loads(t) for t in data["task"]] == [r["task"] for r in rows]
    assert [json.loads(t) for t in data["tools"]] == [r["tools"] for r in rows]
    def given(messages):
        return [{k: v for k, v in m.items() if v is not None} for m in messages]

    assert given(data[0]["prompt"]) == given(rows[0]["prompt"])  # Arrow's missing keys are None, no more


def test_export_writes_the_rows_of_the_split_it_names(tmp_path):
    trace_gym = shutil.which("trace-gym")
    assert trace_gym, "the trace-gym command is not installed (pip install -e .)"
    out = tmp_path / "tasks.jsonl"
    done = subprocess.run([trace_gym, "export", "trace/retail-v0", "--seeds", "2:4", "--split", "test",
                           "--knob", "opening=given", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == list(task_rows("trace/retail-v0", [1_000_000_002, 1_000_000_003], opening="given"))


def test_the_schemas_are_shipped_and_name_themselves():
    for name in ("task", "trajectory"):
        assert schema(name)["$id"].endswith(f"/{name}.schema.json")
        fastjsonschema.compile(schema(name))
