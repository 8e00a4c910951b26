"""Run configurations under configs/: the shipped ones load and every knob they set is one
the env accepts; malformed files are refused with the file and the problem named."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.conftest import REPO
from trace_gym.errors import InvalidConfig
from trace_gym.runconfig import env_knobs, load

CONFIGS = sorted((REPO / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configurations_make_their_envs(path):
    for env_id, knobs in load(path).get("env_knobs", {}).items():
        env = gym.make(env_id, **knobs)
        env.reset(seed=0)
        assert env_knobs(path, env_id) == knobs


def test_an_env_without_knobs_gets_none(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[env_knobs."trace/airline-v0"]\nmax_requests = 1\n')
    assert env_knobs(path, "trace/retail-v0") == {}
    assert env_knobs(path, "trace/airline-v0") == {"max_requests": 1}


@pytest.mark.parametrize("text, match", [("[env_knobs\n", "not valid TOML"), ("[trainer]\nlr = 1\n", "unknown section"),
                                         ('[env_knobs]\n"trace/airline-v0" = 3\n', "must be a table")])
def test_malformed_configurations_are_refused(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InvalidConfig, match=match):
        load(path)
    with pytest.raises(InvalidConfig, match="no run configuration"):
        load(tmp_path / "missing.toml")
