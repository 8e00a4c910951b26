"""Analysis inputs: loading both formats, compact summaries, batching, the CLI."""

from __future__ import annotations

import functools
import json

import pytest

from tests.conftest import reference_file
from trace_gym.agents import make_policy
from trace_gym.analysis.trajectories import batches, load_records
from trace_gym.cli import main
from trace_gym.errors import TraceGymError
from trace_gym.rollout import rollout
from trace_gym.trajectory import SummaryLimits, summarize


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "random.jsonl"
    rollout("trace/retail-v0", functools.partial(make_policy, "random"), range(20), out, progress=False)
    return out


def test_loads_rollouts_and_tau2_results(runs):
    records = load_records([runs, reference_file("tau2/airline_results.json")])
    assert len(records) == 32
    with pytest.raises(TraceGymError, match="appears twice"):
        load_records([runs, runs])


def test_summaries_are_compact(runs):
    limits = SummaryLimits(content=40, arguments=30, tool_output=50, instructions=60)
    for record in load_records([runs]):
        text = summarize(record, limits)
        assert text.startswith(f"### {record['id']}")
        assert ("FAILED" in text.splitlines()[0]) != record["passed"]
        for line in text.splitlines()[2:]:
            assert len(line) < 200


def test_batches_fit_the_budget(runs):
    records = load_records([runs])
    groups = batches(records, 3_000)
    assert sum(len(g) for g in groups) == len(records)
    assert all(sum(len(summarize(r)) for r in g) <= 3_000 or len(g) == 1 for g in groups)


def test_cli_analyze(runs, tmp_path, capsys):
    assert main(["analyze", str(runs), "--out", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {c["name"] for c in data["capabilities"]} == {
        "precondition_verification", "structured_data_reasoning", "multi_step_task_completion", "tool_calling_precision"}
    saved = json.loads((tmp_path / "selected_capabilities.json").read_text())
    assert saved == data and saved["schema_version"] == 1 and saved["params"]["k"] == 8
    assert (tmp_path / "capabilities.png").is_file()
    assert main(["analyze", str(runs), "--out", str(tmp_path), "--runs", "3", "--k", "8"]) == 2  # K=8 > N=3
    assert "k=8" in capsys.readouterr().err
    assert main(["analyze", str(runs), "--out", str(tmp_path), "--runs", "20", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] == {"rho": 0.1, "delta": 0.2, "k": 16, "n": 20}


@pytest.mark.parametrize("record, words", [
    ({"a": 1}, "missing field(s) id, messages, reward, passed"),
    ({"id": "x", "messages": [], "reward": 1.0, "passed": "yes"}, "passed must be true or false"),
    ({"id": "x", "messages": ["hi"], "reward": 1.0, "passed": True}, "messages must be a list of chat messages"),
    ({"id": 3, "messages": [], "reward": 1.0, "passed": True}, "id must be a string"),
])
def test_records_analysis_cannot_read_are_refused_saying_which(tmp_path, record, words):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(TraceGymError, match="record 1 is not a trajectory record") as exc:
        load_records([path])
    assert words in str(exc.value)


def test_a_missing_input_is_named(tmp_path):
    with pytest.raises(TraceGymError, match="nope.jsonl: no such file"):
        load_records([tmp_path / "nope.jsonl"])
