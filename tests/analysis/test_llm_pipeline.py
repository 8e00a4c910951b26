"""The LLM path of the analysis against a local OpenAI-compatible server that plays the
analyst with scripted JSON, faults included."""

from __future__ import annotations

import json
import logging
import re

import pytest

from tests.agents.fake_server import FakeServer
from tests.conftest import reference_file
from trace_gym.analysis.aggregate import Params
from trace_gym.analysis.llm import AnalystError
from trace_gym.analysis.pipeline import AnalysisConfig, analyze

CAPS = ["checking_rules_first", "copying_exact_values", "finishing_every_request", "reading_records_carefully"]


def _ids(prompt: str) -> list[str]:
    return re.findall(r"^### (\S+)", prompt, re.MULTILINE)


def _outcomes(prompt: str) -> dict[str, bool]:
    return {m.group(1): m.group(2) == "PASSED" for m in re.finditer(r"^### (\S+)\s+\((PASSED|FAILED)", prompt, re.MULTILINE)}


class Analyst:
    """Scripted answers; `faults` lists, per prompt, the broken answers given before a good one."""

    def __init__(self, faults=("bad_json", "unknown_id", "missing_id")) -> None:
        self.faults = list(faults)
        self.seen: dict[str, int] = {}
        self.prompts: list[str] = []

    def __call__(self, body):
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
        attempt = self.seen.get(prompt, 0)
        self.seen[prompt] = attempt + 1
        if attempt == 0:
            self.prompts.append(prompt)
        fault = self.faults[attempt] if attempt < len(self.faults) else None
        outcomes = _outcomes(prompt)
        if fault == "bad_json":
            return "ok", {"content": "Here you go: {\"capabilities\": [oops"}
        if "Propose between" in prompt:
            ids = list(outcomes)
            passed = [i for i in ids if outcomes[i]] or ids
            failed = [i for i in ids if not outcomes[i]] or ids
            caps = [{"name": n, "definition": f"The agent {n.replace('_', ' ')} in every situation that needs it.",
                     "examples": [passed[0], failed[0]] if fault != "unknown_id" else ["nobody/0", failed[0]]} for n in CAPS]
            return "ok", {"content": "```json\n" + json.dumps({"capabilities": caps}) + "\n```"}
        labels = {}
        for n in CAPS:
            lists = {k: [] for k in ("na_passed", "na_failed", "present_passed", "present_failed", "lacking_passed", "lacking_failed")}
            for tid, ok in outcomes.items():
                if n == "copying_exact_values":
                    key = "present_passed" if ok else "lacking_failed"
                else:
                    key = "present_passed" if ok else "present_failed"
                lists[key].append(tid)
            if fault == "unknown_id":
                lists["present_passed"].append("ghost/9")
            if fault == "missing_id" and outcomes:
                for values in lists.values():
                    if values:
                        values.pop()
                        break
            labels[n] = lists
        return "ok", {"content": json.dumps({"labels": labels})}


def _tau2_inputs():
    return [reference_file("tau2/airline_results.json"), reference_file("tau2/retail_results.json")]


def _config(server, **kw):
    return AnalysisConfig(labeller="llm", runs=3, params=Params(k=2, n=3), base_url=server.url, model="fake",
                          budget_chars=6_000, workers=2, **kw)


def test_faulty_answers_are_retried_and_the_result_is_valid(tmp_path):
    analyst = Analyst()
    with FakeServer(analyst) as server:
        data = analyze(_tau2_inputs(), tmp_path, _config(server))
    by_name = {c["name"]: c for c in data["capabilities"]}
    assert set(by_name) == set(CAPS)
    assert by_name["copying_exact_values"]["status"] == "PENDING" and by_name["copying_exact_values"]["passes_consistency"]
    assert all(by_name[n]["status"] == "NOT_SELECTED" for n in CAPS if n != "copying_exact_values")
    assert (tmp_path / "capabilities.png").stat().st_size > 1000
    assert json.loads((tmp_path / "llm_usage.json").read_text())["requests"] > 0
    # each fault was answered by asking again: discovery 3 times (bad JSON, unknown id, good),
    # each labelling batch 4 times (bad JSON, unknown id, missing id, good): every run shows
    # the trajectories in its own order, so no run repeats another's prompt
    discovery = [n for p, n in analyst.seen.items() if "Propose between" in p]
    labelling = [n for p, n in analyst.seen.items() if "Propose between" not in p]
    assert discovery == [3] and set(labelling) == {4}


def test_every_simulation_reaches_the_labelling_input_with_its_outcome(tmp_path):
    analyst = Analyst(faults=())
    with FakeServer(analyst) as server:
        analyze(_tau2_inputs(), tmp_path, _config(server))
    labelling = [p for p in analyst.prompts if "Propose between" not in p]
    seen: dict[str, bool] = {}
    for prompt in labelling:
        seen.update(_outcomes(prompt))
    assert len(seen) == 24
    assert sum(seen.values()) == 13 and sum(not v for v in seen.values()) == 11
    assert all(t.startswith(("tau2/airline/", "tau2/retail/")) for t in seen)


def test_an_analyst_that_never_fits_gives_a_clear_error(tmp_path):
    with FakeServer(lambda body: ("ok", {"content": "I would rather not."})) as server:
        with pytest.raises(AnalystError, match="no usable list of capabilities after 4 attempts"):
            analyze(_tau2_inputs(), tmp_path, _config(server))
    assert not (tmp_path / "selected_capabilities.json").exists()


def test_interrupted_analysis_resumes_to_the_same_result(tmp_path):
    first = Analyst()
    with FakeServer(first) as server:
        full = analyze(_tau2_inputs(), tmp_path / "full", _config(server))
    analyst = Analyst()
    with FakeServer(analyst) as server:
        with pytest.raises(AnalystError, match="request cap"):
            analyze(_tau2_inputs(), tmp_path / "cut", _config(server, max_requests=9))
        asked_before = sum(analyst.seen.values())
        resumed = analyze(_tau2_inputs(), tmp_path / "cut", _config(server))
    assert resumed == full
    saved = sorted((tmp_path / "cut" / "labels").glob("run_*.json"))
    assert len(saved) == 3
    assert 0 < asked_before < sum(first.seen.values())
    assert sum(analyst.seen.values()) == sum(first.seen.values())  # nothing asked twice


def test_labelling_runs_are_independent_samples_with_their_seeds_recorded(tmp_path):
    bodies = []
    analyst = Analyst(faults=())

    def record(body):
        bodies.append(body)
        return analyst(body)

    with FakeServer(record) as server:
        data = analyze(_tau2_inputs(), tmp_path, _config(server, seed=5))
    labelling = [b for b in bodies if "Propose between" not in b["messages"][-1]["content"]]
    discovery = [b for b in bodies if "Propose between" in b["messages"][-1]["content"]]
    assert {b["temperature"] for b in labelling} == {0.7} and {b["temperature"] for b in discovery} == {0.0}
    saved = [json.loads(p.read_text()) for p in sorted((tmp_path / "labels").glob("run_*.json"))]
    seeds = [s["run_seed"] for s in saved]
    assert len(set(seeds)) == 3 and data["labelling"]["run_seeds"] == seeds and data["labelling"]["seed"] == 5
    assert {b["seed"] for b in labelling} == set(seeds)  # each run samples with its own seed
    orders = [s["order"]["trajectories"] for s in saved]
    assert len({tuple(o) for o in orders}) == 3 and all(sorted(o) == sorted(orders[0]) for o in orders)
    assert len({tuple(s["order"]["capabilities"]) for s in saved}) > 1
    # the prompts of one run are not those of another
    first_prompt_of = {}
    for b in labelling:
        first_prompt_of.setdefault(b["seed"], b["messages"][-1]["content"])
    assert len(set(first_prompt_of.values())) == 3


def test_a_cached_discovery_is_reused_only_for_the_same_inputs(tmp_path, monkeypatch, caplog):
    import trace_gym.analysis.discovery as discovery

    calls = []
    real = discovery.discover
    monkeypatch.setattr(discovery, "discover", lambda *a, **k: calls.append(1) or real(*a, **k))
    airline = [reference_file("tau2/airline_results.json")]
    saved = tmp_path / "discovered_capabilities.json"
    with FakeServer(Analyst(faults=())) as server:
        analyze(_tau2_inputs(), tmp_path, _config(server))
        key = json.loads(saved.read_text())["key"]
        analyze(_tau2_inputs(), tmp_path, _config(server))
        assert len(calls) == 1 and json.loads(saved.read_text())["key"] == key  # the same inputs: read back
        caplog.set_level(logging.INFO, logger="trace_gym")
        analyze(airline, tmp_path, _config(server))
    messages = [r.getMessage() for r in caplog.records if r.name == "trace_gym.analysis.pipeline"]
    assert len(calls) == 2 and any("made from other inputs" in m for m in messages)
    assert json.loads(saved.read_text())["key"] != key
