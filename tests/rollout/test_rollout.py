"""Rollouts: records as documented, parallel workers, and resumption after a kill."""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from trace_gym.agents import make_policy
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import sha256_json
from trace_gym.rollout import append_record, read_records, rollout
from trace_gym.seeding import seeds

KEYS = {"schema_version", "id", "env_id", "env_sha256", "seed", "sample", "split", "policy", "messages",
        "reward", "passed", "verdict", "task_kind", "capabilities_needed", "termination_reason",
        "instructions", "timings"}


def _content(path):
    """What must match between runs: every record but its timings."""
    return sorted(sha256_json({k: v for k, v in r.items() if k != "timings"}) for r in read_records(path))


def test_records_and_samples(tmp_path):
    out = tmp_path / "r.jsonl"
    summary = rollout("trace/retail-v0", functools.partial(make_policy, "oracle"), [5, 6], out, samples=2,
                      progress=False)
    records = read_records(out)
    assert summary.written == 4 and len(records) == 4
    assert all(KEYS <= set(r) and r["passed"] for r in records)
    assert {r["id"] for r in records} == {f"trace/retail-v0/train/{s}/{k}" for s in (5, 6) for k in (0, 1)}
    again = rollout("trace/retail-v0", functools.partial(make_policy, "oracle"), [5, 6], out, samples=2,
                    progress=False)
    assert again.written == 0 and again.skipped == 4 and len(read_records(out)) == 4


def test_parallel_workers_give_the_same_episodes(tmp_path):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    factory = functools.partial(make_policy, "random")
    rollout("trace/airline-v0", factory, range(12), one, workers=1, progress=False)
    rollout("trace/airline-v0", factory, range(12), two, workers=2, progress=False)
    assert _content(one) == _content(two)


def test_partial_last_line_is_dropped_on_resume(tmp_path):
    out = tmp_path / "r.jsonl"
    rollout("trace/airline-v0", functools.partial(make_policy, "oracle"), [1, 2], out, progress=False)
    with open(out, "ab") as f:
        f.write(b'{"id": "trace/airline-v0/train/3/0", "messa')  # a write cut short
    assert len(read_records(out)) == 2
    rollout("trace/airline-v0", functools.partial(make_policy, "oracle"), [1, 2, 3], out, progress=False)
    lines = out.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["passed"] for line in lines)


def test_killed_rollout_resumes_to_the_same_set(tmp_path):
    full, killed = tmp_path / "full.jsonl", tmp_path / "killed.jsonl"
    cmd = [sys.executable, "-m", "trace_gym.cli", "rollout", "trace/retail-v0", "--policy", "random",
           "--seeds", "0:120", "--workers", "1", "--quiet"]
    subprocess.run([*cmd, "--out", str(full)], check=True, cwd=REPO)
    proc = subprocess.Popen([*cmd, "--out", str(killed)], cwd=REPO)
    deadline = time.time() + 60
    while time.time() < deadline and (not killed.exists() or len(read_records(killed)) < 20):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = len(read_records(killed))
    assert 0 < partial < 120
    with open(killed, "ab") as f:  # as if the kill had landed mid-write
        f.write(b'{"id": "trace/retail-v0/train/9')
    subprocess.run([*cmd, "--out", str(killed)], check=True, cwd=REPO)
    lines = killed.read_text().splitlines()
    assert len(lines) == 120 and all(line.endswith("}") for line in lines)
    assert len({json.loads(line)["id"] for line in lines}) == 120
    assert _content(killed) == _content(full)


def test_malformed_complete_line_is_an_error(tmp_path):
    out = tmp_path / "bad.jsonl"
    append_record(out, {"id": "a"})
    with open(out, "ab") as f:
        f.write(b"not json\n")
    try:
        read_records(out)
    except Exception as exc:
        assert "line 2" in str(exc)
    else:
        raise AssertionError("a malformed line was accepted")


def test_seed_indices_map_into_splits():
    assert list(seeds("test", 0, 3)) == [1_000_000_000, 1_000_000_001, 1_000_000_002]


@pytest.mark.parametrize("line", [b"[1, 2]", b'"text"', b"[" * 100_000])
def test_a_line_that_is_not_an_object_is_an_error(tmp_path, line):
    out = tmp_path / "bad.jsonl"
    append_record(out, {"id": "a"})
    with open(out, "ab") as f:
        f.write(line + b"\n")
    with pytest.raises(TraceGymError, match="line 2 is not a JSON record"):
        read_records(out)
