"""The command line: list and play."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from trace_gym.cli import main

RECORD_KEYS = {"schema_version", "id", "env_id", "env_sha256", "seed", "sample", "split", "policy",
               "messages", "reward", "passed", "verdict", "task_kind", "capabilities_needed",
               "termination_reason", "instructions", "timings"}


def test_list_json(capsys):
    assert main(["list", "--json"]) == 0
    envs = json.loads(capsys.readouterr().out)
    assert {"trace/airline-v0", "trace/retail-v0"} <= {e["id"] for e in envs}


def test_list_table(capsys):
    assert main(["list"]) == 0
    assert "trace/retail-v0" in capsys.readouterr().out


@pytest.mark.parametrize("env_id", ["trace/airline-v0", "trace/retail-v0"])
def test_play_json_prints_exactly_one_record(capsys, env_id):
    assert main(["play", env_id, "--seed", "0", "--policy", "oracle", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert RECORD_KEYS <= set(record)
    assert record["id"] == f"{env_id}/train/0/0" and record["passed"] and record["reward"] == 1.0
    assert record["split"] == "train" and len(record["env_sha256"]) == 64


def test_play_random_and_hint(capsys):
    assert main(["play", "trace/retail-v0", "--seed", "3", "--policy", "random", "--hint", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["policy"] == "random" and record["hint"] is True
    assert "<expert_guidance>" in record["messages"][0]["content"]


def test_play_prints_transcript_and_verdict(capsys):
    assert main(["play", "trace/airline-v0", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "reward 1.00" in out and "database" in out and "USER" in out


def test_unknown_env_is_a_clear_error(capsys):
    assert main(["play", "trace/airlin-v0", "--seed", "0"]) == 2
    assert "Did you mean: trace/airline-v0" in capsys.readouterr().err


def test_console_script_is_installed():
    exe = shutil.which("trace-gym", path=os.path.dirname(sys.executable)) or shutil.which("trace-gym")
    if exe is None:
        pytest.skip("the trace-gym console script is not on PATH (package not installed)")
    out = subprocess.run([exe, "play", "trace/airline-v0", "--seed", "0", "--policy", "oracle", "--json"],
                         capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["passed"] is True


@pytest.mark.parametrize("argv, words", [
    (["play", "trace/airline-v0", "--seed", "-3"], "--seed: -3 is invalid: must be an integer >= 0"),
    (["rollout", "trace/airline-v0", "--seeds", "0:2", "--samples", "0", "--out", "x.jsonl"], "--samples: 0 is invalid"),
    (["eval", "trace/airline-v0", "--seeds", "0:2", "--trials", "0"], "--trials: 0 is invalid"),
    (["eval", "trace/airline-v0", "--seeds", "0:2", "--workers", "two"], "--workers: 'two' is not an integer"),
    (["tiny-agent", "build", "--threads", "0"], "--threads: 0 is invalid"),
])
def test_counts_out_of_range_are_refused_naming_the_flag(capsys, argv, words):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and words in capsys.readouterr().err


@pytest.mark.parametrize("flag, value, words", [
    ("--temperature", "-1", "temperature=-1.0 is invalid"), ("--top-p", "2", "top_p=2.0 is invalid"),
    ("--max-new-tokens", "0", "max_tokens=0 is invalid"), ("--retries", "-1", "retries=-1 is invalid"),
    ("--timeout", "0", "timeout=0.0 is invalid"),
])
def test_bad_sampling_settings_are_refused_before_any_request(capsys, flag, value, words):
    argv = ["eval", "trace/airline-v0", "--policy", "endpoint", "--base-url", "http://127.0.0.1:9/v1",
            "--seeds", "0:1", "--quiet", "--out", os.devnull, flag, value]
    assert main(argv) == 2
    assert words in capsys.readouterr().err
