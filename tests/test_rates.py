"""The rates a machine measures: summed over runs, kept per machine, advisory."""

from __future__ import annotations

import functools
import json

import pytest

from tests.conftest import REPO
from trace_gym import rates

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACE_GYM_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def test_a_rate_is_the_runs_episodes_over_their_seconds():
    rates.record("local torch float32 greedy", "trace/airline-v0", 4, 60.0)
    rates.record("local torch float32 greedy", "trace/airline-v0", 16, 240.0)
    got = rates.rate("local torch float32 greedy", "trace/airline-v0")
    assert got.per_minute == pytest.approx(20 / 300 * 60) and got.episodes == 20
    assert got.measured_on == "trace/airline-v0"
    assert rates.rate("local torch float32 sampled", "trace/airline-v0") is None  # another kind of work


def test_short_runs_and_other_machines_do_not_count(monkeypatch):
    rates.record("w", "trace/airline-v0", rates.MIN_EPISODES - 1, 10.0)
    rates.record("w", "trace/airline-v0", 8, 0.0)
    assert rates.rate("w", "trace/airline-v0") is None
    rates.record("w", "trace/airline-v0", 8, 60.0)
    monkeypatch.setattr(rates, "machine", lambda: "another machine")
    assert rates.rate("w", "trace/airline-v0") is None


def test_an_unmeasured_env_falls_back_on_its_family_and_says_so():
    rates.record("w", "trace/retail-v0", 10, 60.0)
    rates.record("w", "trace/precondition_verification-v0", 30, 60.0)
    airline = rates.rate("w", "trace/airline-v0")
    assert airline.per_minute == pytest.approx(10) and airline.measured_on == "other targets"
    capability = rates.rate("w", "trace/structured_data_reasoning-v0")
    assert capability.per_minute == pytest.approx(30) and capability.measured_on == "other capability envs"


@pytest.mark.parametrize("text", ["{", "[]", '{"m": 3}', "\u0000", '{"HERE": 3}', '{"HERE": {"w": []}}',
                                  '{"HERE": {"w": {"trace/airline-v0": {"episodes": "x"}}}}'])
def test_a_malformed_file_is_ignored_and_rewritten(home, text):
    home.mkdir(parents=True)
    rates.rates_path().write_text(text.replace("HERE", rates.machine()))
    assert rates.rate("w", "trace/airline-v0") is None
    rates.record("w", "trace/airline-v0", 6, 60.0)
    assert rates.rate("w", "trace/airline-v0").per_minute == pytest.approx(6)
    assert json.loads(rates.rates_path().read_text())[rates.machine()]["w"]["trace/airline-v0"]["episodes"] == 6


def test_a_local_models_rollout_records_its_rate_and_the_oracles_does_not(tmp_path):
    from trace_gym.agents import make_policy
    from trace_gym.rollout import rollout

    local = functools.partial(make_policy, "local", model_path=str(FIXTURE), temperature=0.0, max_new_tokens=8,
                              engine="torch", dtype="float32")
    knobs = {"prompt_style": "compact", "max_requests": 1}
    rollout("trace/airline-v0", local, range(4), tmp_path / "local.jsonl", workers=4, progress=False,
            env_kwargs=knobs)
    rollout("trace/retail-v0", functools.partial(make_policy, "oracle"), range(4), tmp_path / "oracle.jsonl",
            progress=False, env_kwargs=knobs)
    data = json.loads(rates.rates_path().read_text())[rates.machine()]
    assert list(data) == ["local torch float32 greedy"]
    assert list(data["local torch float32 greedy"]) == ["trace/airline-v0"]
    assert data["local torch float32 greedy"]["trace/airline-v0"]["episodes"] == 4
    assert rates.player({"name": "oracle"}) is None
