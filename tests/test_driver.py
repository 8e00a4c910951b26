"""The episode driver (`trace_gym.driver`): episodes handed back as they end, the same
episodes whatever is in flight, records as the trajectory format has them, an env's failure
ending only its episode, a policy's failure ending the run, and a rollout killed mid-run
resuming to the same set of records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator

import gymnasium as gym
import pytest

import trace_gym  # noqa: F401  (registers the envs)
from tests.conftest import REPO
from trace_gym.agents import make_policy
from trace_gym.agents.base import OraclePolicy
from trace_gym.driver import EpisodeRequest, play, play_one
from trace_gym.jsondata import sha256_json
from trace_gym.rollout import read_records, rollout
from trace_gym.seeding import split_of
from trace_gym.trajectory import SCHEMA_VERSION, passed

ENV = "trace/precondition_verification-v0"


def _content(records: list[dict]) -> list[str]:
    """What must match between two runs of the same episodes: every record but its timings."""
    return sorted(sha256_json({k: v for k, v in r.items() if k != "timings"}) for r in records)


class Counted(gym.Wrapper):
    """A real env that counts its episodes in flight (reset, not yet ended) across every
    instance of one `Census`, and raises in its `fail_at`-th step of seed `fail_seed`."""

    def __init__(self, env: gym.Env, census: Census) -> None:
        super().__init__(env)
        self.census, self.steps, self.seed = census, 0, None
        self.live = False

    def reset(self, *, seed=None, options=None):
        self.census.resets += 1
        self.seed, self.steps, self.live = seed, 0, True
        self.census.enter()
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.seed == self.census.fail_seed and self.steps == self.census.fail_at:
            self.census.failed += 1
            self.census.leave()
            self.live = False
            raise RuntimeError("the env broke")
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            self.census.leave()
            self.live = False
        return obs, reward, terminated, truncated, info

    def close(self):
        self.census.closed += 1
        if self.live:  # closed mid-episode (the run stopped)
            self.census.leave()
            self.live = False
        self.env.close()


class Census:
    """Envs made for one run, and how many of their episodes were in flight at most."""

    def __init__(self, fail_seed: int | None = None, fail_at: int = 2) -> None:
        self.fail_seed, self.fail_at = fail_seed, fail_at
        self.made = self.resets = self.closed = self.now = self.most = self.failed = 0

    def make(self, env_id: str) -> Counted:
        self.made += 1
        return Counted(gym.make(env_id), self)

    def enter(self) -> None:
        self.now += 1
        self.most = max(self.most, self.now)

    def leave(self) -> None:
        self.now -= 1


def _pulled(episodes: list[EpisodeRequest], log: list[int]) -> Iterator[EpisodeRequest]:
    """The episodes, noting in `log` how many the driver has taken so far."""
    for n, episode in enumerate(episodes, 1):
        log.append(n)
        yield episode


# -- (a) episodes as they end, the same whatever is in flight -----------------------------

@pytest.mark.parametrize("in_flight", [1, 3])
def test_each_episode_is_handed_back_as_soon_as_it_ends(in_flight):
    census, taken = Census(), []
    episodes = [EpisodeRequest(seed) for seed in range(12)]
    played = play(_pulled(episodes, taken), OraclePolicy, env_id=ENV, in_flight=in_flight, make_env=census.make)
    first = next(played)
    # the first episode comes back while the others are still to be started
    assert len(taken) <= in_flight + 1 and census.resets <= in_flight + 1
    rest = list(played)
    assert len(rest) == 11 and census.most == in_flight
    assert first.reward == 1.0 and all(p.reward == 1.0 for p in rest)
    assert census.closed == census.made  # every env closed when the run ended


def test_one_or_three_in_flight_play_the_same_episodes():
    episodes = [EpisodeRequest(seed, sample, hint=sample == 1) for seed in (3, 4, 5, 6) for sample in range(2)]
    runs = {n: [p.record() for p in play(episodes, OraclePolicy, env_id=ENV, in_flight=n)] for n in (1, 3)}
    assert len(runs[1]) == len(runs[3]) == 8
    assert _content(runs[1]) == _content(runs[3])
    by_id = {n: {r["id"]: (r["messages"], r["reward"]) for r in runs[n]} for n in (1, 3)}
    assert by_id[1] == by_id[3]


def test_play_in_order_returns_every_episode_in_the_order_given_equal_ones_too():
    """The trainers' backends ask for groups that may repeat an episode: each request gets
    its own played episode back, at its own place, whichever ends first."""
    from trace_gym.driver import play_in_order

    episodes = [EpisodeRequest(9), EpisodeRequest(4, 1), EpisodeRequest(9), EpisodeRequest(2, hint=True),
                EpisodeRequest(4, 1)]
    played = play_in_order(episodes, OraclePolicy, env_id=ENV, in_flight=3)
    assert [(p.seed, p.episode.sample, p.episode.hint) for p in played] == \
        [(e.seed, e.sample, e.hint) for e in episodes]
    assert len({id(p) for p in played}) == 5 and all(p.episode is not e for p, e in zip(played, episodes))
    assert played[0].messages == played[2].messages and all(p.reward == 1.0 for p in played)


def _old_record(env: gym.Env, *, env_id: str, seed: int, sample: int, policy: str, hint: bool,
                messages: list, reward: float, info: dict) -> dict:
    """A record as `trace_gym.trajectory.make_record` built it before the driver (timings aside)."""
    base = env.unwrapped
    task = base.task
    return {
        "schema_version": SCHEMA_VERSION,
        "id": f"{env_id}/{split_of(seed)}/{seed}/{sample}",
        "env_id": env_id,
        "env_sha256": base.code_sha256(),
        "seed": seed,
        "sample": sample,
        "split": split_of(seed),
        "policy": policy,
        "hint": hint,
        "messages": messages,
        "reward": float(reward),
        "passed": passed(reward),
        "verdict": info.get("verdict"),
        "task_kind": task.kind,
        "capabilities_needed": list(task.capabilities_needed),
        "termination_reason": info.get("termination_reason"),
        "instructions": task.instructions,
    }


@pytest.mark.parametrize("env_id", ["trace/retail-v0", "trace/airline-v0", ENV, "trace/tool_calling_precision-v0"])
@pytest.mark.parametrize("policy", ["oracle", "random"])
def test_records_have_the_fields_and_values_they_had_before_the_driver(env_id, policy):
    env = gym.make(env_id)
    for seed, sample, hint in ((0, 0, False), (7, 2, True), (1_000_000_003, 1, False)):
        played = play_one(env, make_policy(policy), env_id=env_id, seed=seed, sample=sample, hint=hint)
        record = played.record()
        # the same episode stepped by hand, as the old loop stepped it
        chosen = make_policy(policy)
        obs, info = env.reset(seed=seed, options={"hint": True} if hint else None)
        chosen.bind(env, seed, sample)
        tools, done = info["tools"], False
        while not done:
            obs, reward, terminated, truncated, info = env.step(chosen.act(obs, tools))
            done = terminated or truncated
        expected = _old_record(env, env_id=env_id, seed=seed, sample=sample, policy=chosen.name, hint=hint,
                               messages=obs, reward=reward, info=info)
        assert list(record) == [*expected, "timings"]  # the same fields, in the same order
        assert {k: v for k, v in record.items() if k != "timings"} == expected
        assert json.dumps({k: v for k, v in record.items() if k != "timings"}) == json.dumps(expected)
        assert set(record["timings"]) == {"reset_s", "steps_s", "total_s"}


# -- (b) an env that fails ends its own episode ---------------------------------------------

def test_an_env_that_raises_ends_its_episode_with_an_error_record_and_the_others_go_on():
    census = Census(fail_seed=2)
    episodes = [EpisodeRequest(seed) for seed in range(6)]
    played = {p.seed: p for p in play(episodes, OraclePolicy, env_id=ENV, in_flight=3, make_env=census.make)}
    assert sorted(played) == list(range(6))
    broken = played.pop(2)
    assert broken.error and "RuntimeError: the env broke" in broken.error
    assert broken.reward == 0.0 and not broken.passed and broken.termination_reason == "error"
    record = broken.record()
    assert record["error"] == broken.error and record["reward"] == 0.0 and record["passed"] is False
    assert record["termination_reason"] == "error" and record["id"] == f"{ENV}/train/2/0"
    assert all(p.error is None and p.reward == 1.0 and "error" not in p.record() for p in played.values())
    assert census.failed == 1 and census.made == 4 and census.closed == 4  # the broken env closed and replaced


def test_a_rollout_appends_an_env_failure_as_a_record_and_goes_on(tmp_path):
    census = Census(fail_seed=2)
    name = "test/BreaksOnSeed2-v0"
    gym.register(name, entry_point=lambda **kwargs: census.make(ENV))
    try:
        out = tmp_path / "r.jsonl"
        summary = rollout(name, OraclePolicy, range(4), out, workers=2, progress=False,
                          fingerprint={"test": "env failures"})
    finally:
        gym.registry.pop(name)
    records = {r["seed"]: r for r in read_records(out)}
    assert census.failed == 1 and summary.written == 4 and sorted(records) == [0, 1, 2, 3]
    assert records[2]["error"] and records[2]["reward"] == 0.0 and records[2]["termination_reason"] == "error"
    assert all(records[s]["passed"] and "error" not in records[s] for s in (0, 1, 3))


# -- (c) a policy that fails stops the run ---------------------------------------------------

class FailsOnSeed(OraclePolicy):
    name = "fails"

    def bind(self, env, seed=0, sample=0):
        super().bind(env, seed, sample)
        self.seed = seed

    def act(self, messages, tools):
        if self.seed == 3:
            raise ValueError("the policy broke")
        return super().act(messages, tools)


@pytest.mark.parametrize("in_flight", [1, 3])
def test_a_policy_that_raises_stops_the_run_with_its_own_exception(in_flight):
    census, got = Census(), []
    with pytest.raises(ValueError, match="the policy broke"):
        for p in play([EpisodeRequest(seed) for seed in range(8)], FailsOnSeed, env_id=ENV, in_flight=in_flight,
                      make_env=census.make):
            got.append(p.seed)
    assert 3 not in got and len(got) < 8
    assert census.closed == census.made and census.now == 0  # the episodes in flight were ended


class Silent:
    """A batched policy that takes episodes and never answers."""

    name = "silent"

    def submit(self, live):
        pass

    def collect(self):
        return []

    def release(self, live):
        pass


def test_a_batched_policy_that_returns_no_turn_is_a_named_error():
    from trace_gym.errors import PolicyError

    census = Census()
    with pytest.raises(PolicyError, match="policy 'silent' returned no turn while 2 episode"):
        list(play([EpisodeRequest(0), EpisodeRequest(1)], Silent(), env_id=ENV, in_flight=2, make_env=census.make))
    assert census.closed == census.made and census.now == 0


# -- (d) an instance plays one episode at a time, a factory several ---------------------------

def test_a_policy_instance_plays_one_episode_at_a_time_and_a_factory_several():
    made = []

    def factory():
        made.append(OraclePolicy())
        return made[-1]

    one, several = Census(), Census()
    episodes = [EpisodeRequest(seed) for seed in range(9)]
    alone = list(play(episodes, OraclePolicy(), env_id=ENV, in_flight=3, make_env=one.make))
    together = list(play(episodes, factory, env_id=ENV, in_flight=3, make_env=several.make))
    assert one.most == 1 and one.made == 1
    assert several.most == 3 and several.made == 3 and len(made) == 3
    assert _content([p.record() for p in alone]) == _content([p.record() for p in together])


# -- (e) a rollout killed with SIGKILL resumes to the same records --------------------------

ROLLOUT = """
import sys, time
from pathlib import Path

from trace_gym.agents.base import OraclePolicy
from trace_gym.rollout import rollout


class Slow(OraclePolicy):
    name = "slow-oracle"
    played = 0

    def bind(self, env, seed=0, sample=0):
        Slow.played += 1
        with open(sys.argv[1] + ".started", "a") as f:  # one byte per episode started
            f.write(".")
        super().bind(env, seed, sample)

    def act(self, messages, tools):
        time.sleep(float(sys.argv[2]))
        return super().act(messages, tools)


summary = rollout(ENV, Slow, range(int(sys.argv[3])), Path(sys.argv[1]), samples=2, workers=3, progress=False)
print(summary.written, summary.skipped, Slow.played)
""".replace("ENV", repr(ENV))


def _rollout(out, pause: float, seeds: int, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", ROLLOUT, str(out), str(pause), str(seeds)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True, **popen)


def test_a_rollout_killed_with_sigkill_resumes_to_the_same_records(tmp_path):
    full, killed = tmp_path / "full.jsonl", tmp_path / "killed.jsonl"
    seeds, total = 40, 80
    uninterrupted = _rollout(full, 0.0, seeds)
    assert uninterrupted.communicate(timeout=120)[0].split() == [str(total), "0", str(total)]
    proc = _rollout(killed, 0.02, seeds)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not killed.exists() or len(read_records(killed)) < 10):
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate()
    before = len(read_records(killed))
    started = len((tmp_path / "killed.jsonl.started").read_text())
    # records were appended as their episodes ended, while most were still to be played
    assert 10 <= before <= started < total, "the rollout ended before it was killed: give it more episodes"
    with open(killed, "ab") as f:  # as if the kill had landed mid-write
        f.write(b'{"id": "' + ENV.encode() + b'/train/39/1", "mess')
    resumed = _rollout(killed, 0.0, seeds)
    written, skipped, played = map(int, resumed.communicate(timeout=120)[0].split())
    assert (written, skipped, played) == (total - before, before, total - before)  # only the missing ones
    lines = killed.read_text().splitlines()
    ids = [json.loads(line)["id"] for line in lines]
    assert len(ids) == total and len(set(ids)) == total
    assert _content(read_records(killed)) == _content(read_records(full))
