"""PolicySpec: a policy by name and arguments, fingerprinted without being built."""

from __future__ import annotations

import functools
import pickle

import pytest

from trace_gym.agents import OraclePolicy, RandomPolicy, make_policy
from trace_gym.agents.spec import PolicySpec
from trace_gym.errors import InvalidConfig
from trace_gym.runs import policy_fingerprint


def test_a_spec_builds_its_policy_and_pickles():
    spec = PolicySpec("random", {"seed": 3})
    assert isinstance(spec(), RandomPolicy) and isinstance(PolicySpec("oracle").make(), OraclePolicy)
    again = pickle.loads(pickle.dumps(spec))
    assert again == spec and policy_fingerprint(again) == policy_fingerprint(spec)
    assert spec.with_options(seed=4).kwargs == {"seed": 4} and spec.kwargs == {"seed": 3}


def test_a_local_spec_is_fingerprinted_without_loading_its_model(tmp_path, monkeypatch):
    """The fingerprint comes from the arguments: a model that is never loaded (here a folder
    with no weights at all, which would fail to load) is hashed by its files."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setattr("trace_gym.agents.spec.make_policy", lambda *a, **k: pytest.fail("built"))
    spec = PolicySpec("local", {"model_path": str(model), "temperature": 0.0, "max_new_tokens": 8})
    first = spec.fingerprint()
    assert first["name"] == "local" and first["model_sha256"] and first["temperature"] == 0.0
    (model / "config.json").write_text('{"changed": 1}')
    assert spec.fingerprint()["model_sha256"] != first["model_sha256"]
    assert spec.local and not spec.server and PolicySpec("endpoint").server


def test_the_seed_of_a_random_policy_tells_two_specs_apart():
    assert policy_fingerprint(PolicySpec("random", {"seed": 0})) != policy_fingerprint(PolicySpec("random", {"seed": 1}))
    # code written before specs: a partial of make_policy is read as the spec it spells
    assert policy_fingerprint(functools.partial(make_policy, "random", seed=1)) == \
        policy_fingerprint(PolicySpec("random", {"seed": 1}))


def test_an_unknown_policy_is_refused_at_once():
    with pytest.raises(InvalidConfig, match="policy 'orcale' is not registered"):
        PolicySpec("orcale")
