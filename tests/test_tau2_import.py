"""Importing tau2-bench results (both formats) into trajectory records."""

from __future__ import annotations

import json

import pytest

from tests.conftest import reference_file
from trace_gym.cli import main
from trace_gym.errors import TraceGymError
from trace_gym.rollout import read_records
from trace_gym.spaces import ConversationSpace
from trace_gym.tau2 import import_results


def test_reference_files_give_24_records():
    counts = {}
    for domain in ("airline", "retail"):
        records = list(import_results(reference_file(f"tau2/{domain}_results.json")))
        counts[domain] = (sum(r["passed"] for r in records), sum(not r["passed"] for r in records))
        for r in records:
            assert r["id"].startswith(f"tau2/{domain}/") and r["env_id"] == f"tau2/{domain}"
            assert ConversationSpace().contains(r["messages"])
            assert r["verdict"]["score"] == r["reward"] and r["verdict"]["source"]["reward"] == r["reward"]
            assert r["instructions"]
    assert counts == {"airline": (6, 6), "retail": (7, 5)}


def test_directory_format_gives_the_same_records(tmp_path):
    source = reference_file("tau2/airline_results.json")
    data = json.loads(source.read_text())
    sims = data.pop("simulations")
    data["simulation_index"] = [{"id": s["id"], "task_id": s["task_id"], "trial": s["trial"]} for s in sims]
    (tmp_path / "results.json").write_text(json.dumps(data))
    (tmp_path / "simulations").mkdir()
    for s in sims:
        (tmp_path / "simulations" / f"{s['id']}.json").write_text(json.dumps(s))
    by_id = lambda rs: sorted(rs, key=lambda r: r["id"])  # noqa: E731
    assert by_id(import_results(tmp_path)) == by_id(import_results(source))
    (tmp_path / "simulations" / f"{sims[0]['id']}.json").unlink()
    with pytest.raises(TraceGymError, match="do not match the index"):
        list(import_results(tmp_path))


def test_tool_calls_become_wire_format():
    records = list(import_results(reference_file("tau2/retail_results.json")))
    calls = [tc for r in records for m in r["messages"] for tc in m.get("tool_calls") or []]
    assert calls and all(isinstance(tc["function"]["arguments"], str) for tc in calls)
    ids = {tc["id"] for tc in calls}
    answers = [m for r in records for m in r["messages"] if m["role"] == "tool"]
    assert answers and all(m["tool_call_id"] in ids for m in answers)


def test_not_a_results_file_is_refused(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(TraceGymError, match="not a tau2 results file"):
        list(import_results(bad))


def test_cli_import(tmp_path):
    out = tmp_path / "tau2.jsonl"
    files = [str(reference_file("tau2/airline_results.json")), str(reference_file("tau2/retail_results.json"))]
    assert main(["import-tau2", *files, "--out", str(out)]) == 0
    assert main(["import-tau2", *files, "--out", str(out)]) == 0  # idempotent
    assert len(read_records(out)) == 24


def test_json_nested_deeper_than_json_reads_is_refused(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("[" * 100_000)
    with pytest.raises(TraceGymError, match="cannot read a tau2 results file"):
        list(import_results(path))
