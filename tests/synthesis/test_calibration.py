"""Calibration bands: exact at their boundaries, and measured right on real rollouts."""

from __future__ import annotations

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.calibration import Bands, calibrate, check, measure, pass_at_k
from trace_gym.driver import EpisodeRequest, play
from trace_gym.errors import InvalidConfig


def _groups(outcomes: list[list[float]]) -> dict[int, list[float]]:
    return dict(enumerate(outcomes))


@given(st.lists(st.lists(st.sampled_from([0.0, 0.5, 1.0]), min_size=4, max_size=4), min_size=1, max_size=30))
def test_band_decisions_follow_the_figures(outcomes):
    figures = measure(_groups(outcomes))
    problems = check(figures)
    expected = (0.2 <= figures["mean_reward"] <= 0.6 and 0.2 <= figures["success_rate"] <= 0.6
                and figures["reward_std"] >= 0.05 and figures["all_success_groups"] <= 0.2
                and figures["all_zero_groups"] <= 0.2 and figures["constant_groups"] <= 0.5)
    assert (not problems) == expected


def test_boundaries_are_inclusive():
    # success rate and mean reward exactly 0.2 and exactly 0.6, groups mixed
    low = _groups([[1.0, 0.0, 0.0, 0.0, 0.0]] * 5)
    high = _groups([[1.0, 1.0, 1.0, 0.0, 0.0]] * 5)
    assert measure(low)["success_rate"] == pytest.approx(0.2) and check(measure(low)) == []
    assert measure(high)["success_rate"] == pytest.approx(0.6) and check(measure(high)) == []
    just_below = _groups([[1.0] + [0.0] * 5] * 5)  # 1/6 < 0.2
    assert any("too hard" in p for p in check(measure(just_below)))
    # all-success groups: exactly 20% passes, above fails
    five = _groups([[1.0, 1.0]] + [[1.0, 0.0]] * 4)
    assert measure(five)["all_success_groups"] == pytest.approx(0.2)
    assert not any("all_success" in p for p in check(measure(five)))
    assert any("all_success" in p for p in check(measure(_groups([[1.0, 1.0]] * 2 + [[1.0, 0.0]] * 3))))


def test_pass_at_k():
    assert pass_at_k(0, 16, 4) == 0.0 and pass_at_k(16, 16, 1) == 1.0
    assert pass_at_k(1, 4, 4) == 1.0 and pass_at_k(1, 4, 1) == pytest.approx(0.25)


class Sometimes:
    """The oracle on a known share of episodes, a bare refusal on the others."""

    name = "sometimes"

    def __init__(self, rate: float) -> None:
        self.rate = rate

    def bind(self, env, seed=0, sample=0):
        import numpy as np

        self.env = env.unwrapped
        self.good = np.random.default_rng([seed, sample]).random() < self.rate

    def act(self, messages, tools):
        return self.env.oracle_action(messages) if self.good else "I can't help with that."


@pytest.mark.parametrize("rate", [0.1, 0.4, 0.9])
def test_known_success_rates_are_measured(rate):
    episodes = [EpisodeRequest(s, k) for s in range(60) for k in range(8)]
    records = [p.record() for p in play(episodes, Sometimes(rate), env_id="trace/tool_calling_precision-v0",
                                        make_env=gym.make)]
    result = calibrate(records)
    assert result["success_rate"] == pytest.approx(rate, abs=0.06)
    assert result["calibrated"] == (rate == 0.4)


def test_bands_are_validated():
    with pytest.raises(InvalidConfig, match="mean_reward"):
        Bands(mean_reward=(0.7, 0.2))


class _Staged(gym.Wrapper):
    """Stands in for the staged module's RemoteEnv: a real env that raises in the first step
    of seed 3 and counts how often it is closed."""

    def __init__(self, source):
        super().__init__(gym.make("trace/tool_calling_precision-v0"))
        self.closed, self.seed = 0, None

    def reset(self, *, seed=None, options=None):
        self.seed = seed
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        if self.seed == 3:
            raise RuntimeError("the staged env broke")
        return self.env.step(action)

    def close(self):
        self.closed += 1


def test_calibration_plays_every_episode_in_one_env_and_an_env_failure_is_a_problem(monkeypatch, tmp_path):
    import functools

    from trace_gym import synthesis
    from trace_gym.sandbox import proxy

    made = []
    monkeypatch.setattr(proxy, "EnvSource", type("Source", (), {"from_file": staticmethod(lambda path: path)}))
    monkeypatch.setattr(proxy, "RemoteEnv", lambda source: made.append(_Staged(source)) or made[-1])
    result = synthesis.Calibration(functools.partial(Sometimes, 0.4), seeds=6, samples=4).run(tmp_path / "m.py")
    assert len(made) == 1 and made[0].closed == 1  # one worker instance, closed once, at the end
    assert not result["calibrated"]
    assert any("the env failed in 4 of 24 episode(s)" in p and "the staged env broke" in p for p in result["problems"])


def test_calibrating_no_records_is_refused_by_name():
    from trace_gym.calibration import calibrate
    from trace_gym.errors import InvalidConfig

    with pytest.raises(InvalidConfig, match="at least one group"):
        calibrate([])
