"""Records cannot be mixed up: each carries its run's fingerprint, a file is resumed only
under the same one, default outputs are named by it, and concurrent writers neither lose
nor duplicate an episode."""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from trace_gym.agents import make_policy
from trace_gym.cli import main
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import sha256_json
from trace_gym.rollout import append_record, read_records, rollout
from trace_gym.runs import fingerprint_id, run_fingerprint

RANDOM = functools.partial(make_policy, "random")


def test_every_record_carries_the_run_fingerprint(tmp_path):
    out = tmp_path / "r.jsonl"
    summary = rollout("trace/retail-v0", RANDOM, [1, 2], out, hint=True, progress=False)
    expected = run_fingerprint("trace/retail-v0", RANDOM, hint=True)
    assert summary.fingerprint == expected
    assert [r["run"] for r in read_records(out)] == [expected, expected]
    assert expected["policy"] == {"name": "random", "seed": 0, "reply_rate": 0.3}
    assert expected["env_sha256"] == read_records(out)[0]["env_sha256"]


@pytest.mark.parametrize("change, words", [
    ({"factory": functools.partial(make_policy, "oracle")}, "policy.name: 'random' -> 'oracle'"),
    ({"factory": functools.partial(make_policy, "random", seed=1)}, "policy.seed: 0 -> 1"),
    ({"hint": True}, "hint: False -> True"),
    ({"env_kwargs": {"max_requests": 1}}, "env_kwargs.max_requests: None -> 1"),
])
def test_resuming_under_another_fingerprint_is_refused_saying_what_differs(tmp_path, change, words):
    out = tmp_path / "r.jsonl"
    rollout("trace/airline-v0", RANDOM, [0, 1], out, progress=False)
    before = out.read_bytes()
    kwargs = {"hint": False, "env_kwargs": None, "factory": RANDOM, **change}
    factory = kwargs.pop("factory")
    with pytest.raises(TraceGymError, match="another run") as info:
        rollout("trace/airline-v0", factory, [0, 1, 2], out, progress=False, **kwargs)
    assert words in str(info.value)
    assert out.read_bytes() == before  # nothing appended
    # the same settings resume
    assert rollout("trace/airline-v0", RANDOM, [0, 1, 2], out, progress=False).written == 1


def test_the_env_version_is_part_of_the_fingerprint(tmp_path):
    out = tmp_path / "r.jsonl"
    fingerprint = run_fingerprint("trace/airline-v0", RANDOM)
    rollout("trace/airline-v0", RANDOM, [0], out, progress=False, fingerprint={**fingerprint, "env_sha256": "0" * 64})
    with pytest.raises(TraceGymError, match="env_sha256: '0000"):
        rollout("trace/airline-v0", RANDOM, [0, 1], out, progress=False)


def test_a_file_of_records_without_fingerprint_is_not_appended_to(tmp_path):
    out = tmp_path / "old.jsonl"
    append_record(out, {"id": "trace/airline-v0/train/0/0", "messages": [], "reward": 0.0, "passed": False})
    with pytest.raises(TraceGymError, match="without a run fingerprint"):
        rollout("trace/airline-v0", RANDOM, [0, 1], out, progress=False)


def test_eval_default_outputs_are_named_by_the_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    args = ["eval", "trace/retail-v0", "--seeds", "0:4", "--workers", "1", "--quiet", "--json"]
    assert main([*args, "--policy", "oracle"]) == 0
    oracle = json.loads(capsys.readouterr().out)
    assert main([*args, "--policy", "random"]) == 0
    random = json.loads(capsys.readouterr().out)
    assert oracle["pass_rate"] == 1.0 and random["pass_rate"] < 1.0  # not the first run's numbers again
    files = sorted(p.name for p in (tmp_path / "runs" / "eval").iterdir())
    ids = {fingerprint_id(run_fingerprint("trace/retail-v0", functools.partial(make_policy, p))) for p in ("oracle", "random")}
    assert len(files) == 2 and {f.rsplit("-", 1)[1].removesuffix(".jsonl") for f in files} == ids


def _content(path):
    return sorted(sha256_json({k: v for k, v in r.items() if k != "timings"}) for r in read_records(path))


def test_two_concurrent_rollouts_into_one_file_lose_and_duplicate_nothing(tmp_path):
    shared, alone = tmp_path / "shared.jsonl", tmp_path / "alone.jsonl"
    cmd = [sys.executable, "-m", "trace_gym.cli", "rollout", "trace/retail-v0", "--policy", "random",
           "--workers", "1", "--quiet"]
    procs = [subprocess.Popen([*cmd, "--seeds", seeds, "--out", str(shared)], cwd=REPO, stderr=subprocess.PIPE)
             for seeds in ("0:150", "50:200")]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    ids = [r["id"] for r in read_records(shared)]
    assert len(ids) == 200 and len(set(ids)) == 200
    assert all(line.endswith("}") for line in shared.read_text().splitlines())
    subprocess.run([*cmd, "--seeds", "0:200", "--out", str(alone)], cwd=REPO, check=True)
    assert _content(shared) == _content(alone)


def test_appends_survive_short_writes(tmp_path, monkeypatch):
    import os

    import trace_gym.rollout as module

    real = os.write
    monkeypatch.setattr(module.os, "write", lambda fd, data: real(fd, bytes(data[:7])))
    out = tmp_path / "r.jsonl"
    rollout("trace/retail-v0", RANDOM, [3, 4], out, progress=False)
    append_record(tmp_path / "other.jsonl", {"id": "x", "text": "y" * 100})
    monkeypatch.undo()
    assert [r["seed"] for r in read_records(out)] == [3, 4]
    assert read_records(tmp_path / "other.jsonl") == [{"id": "x", "text": "y" * 100}]


def test_a_partial_line_left_by_a_crash_is_cut_before_the_next_append(tmp_path):
    out = tmp_path / "r.jsonl"
    append_record(out, {"id": "a"})
    with open(out, "ab") as f:
        f.write(b'{"id": "b", "cut sh')
    append_record(out, {"id": "c"})
    assert [r["id"] for r in read_records(out)] == ["a", "c"]


def test_the_env_sha256_is_computed_once_per_class(monkeypatch):
    import gymnasium as gym

    import trace_gym.env as env_module
    import trace_gym.provenance as provenance
    from trace_gym.driver import EpisodeRequest, play

    calls = []
    real = provenance.env_code_sha256
    monkeypatch.setattr(provenance, "env_code_sha256", lambda path: calls.append(path) or real(path))
    monkeypatch.setattr(env_module, "_CODE_SHA256", {})
    env = gym.make("trace/tool_calling_precision-v0")
    records = [p.record() for p in play([EpisodeRequest(s) for s in range(20)], make_policy("oracle"), env_id="x",
                                        make_env=lambda _: env)]
    assert len(calls) == 1 and len({r["env_sha256"] for r in records}) == 1


def test_the_env_sha256_covers_the_trace_gym_modules_the_env_imports(monkeypatch, tmp_path):
    import trace_gym.provenance as provenance

    module = REPO / "generated_envs" / "tool_calling_precision.py"
    imported = provenance.closure(provenance.imported_modules(module.read_text()))
    assert {"trace_gym.capability_env", "trace_gym.env", "trace_gym.tools", "trace_gym.worlds.world",
            "trace_gym.worlds.airline.tools"} <= set(imported)
    assert not {"trace_gym.registry", "trace_gym.audit", "trace_gym.rollout", "trace_gym.cli"} & set(imported)
    before = provenance.env_code_sha256(module)
    # a change to one module it builds on (here: the hash of world.py's bytes) changes the env's hash
    real = provenance._sha256_file
    world = provenance.module_file("trace_gym.worlds.world")
    monkeypatch.setattr(provenance, "_sha256_file", lambda p: "changed" if p == world else real(p))
    provenance._env_code_sha256.cache_clear()
    assert provenance.env_code_sha256(module) != before
