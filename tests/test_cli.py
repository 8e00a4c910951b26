"""The command line: list and play."""

from __future__ import annotations

import json
import os
import re
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


def test_list_table_never_cuts_an_id(capsys, monkeypatch):
    """On an 80-column terminal or a pipe (rich's 80 columns) every id shows whole."""
    from trace_gym.registry import list_envs

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list"]) == 0
    shown = capsys.readouterr().out
    assert all(e.id in shown for e in list_envs()) and max(map(len, shown.splitlines())) <= 80


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


def test_view_shows_a_record_of_a_file_as_play_shows_it(capsys, tmp_path):
    records = tmp_path / "r.jsonl"
    assert main(["rollout", "trace/airline-v0", "--seeds", "0:2", "--policy", "oracle", "--quiet",
                 "--out", str(records)]) == 0
    capsys.readouterr()
    assert main(["view", str(records), "--index", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(records.read_text().splitlines()[1])
    assert main(["view", str(records), "--index", "1"]) == 0
    shown = capsys.readouterr().out
    assert "2 of 2 in r.jsonl" in shown and "reward 1.00" in shown and "USER" in shown
    assert main(["view", str(records), "--index", "2"]) == 2
    assert "holds 2 record(s); --index 2 is past the last" in capsys.readouterr().err


def test_play_seed_indexes_into_its_split_as_every_command_does(capsys):
    assert main(["play", "trace/retail-v0", "--seed", "2", "--split", "test", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["id"] == "trace/retail-v0/test/1000000002/0"
    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert "(default: test)" in " ".join(capsys.readouterr().out.split())


def test_info_shows_knobs_tools_and_reward(capsys):
    assert main(["info", "trace/precondition_verification-v0", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"name": "forbidden_rate", "type": "float", "default": 0.6} in info["knobs"]
    assert {"cancel_reservation", "get_order_details"} <= {t["name"] for t in info["tools"]}
    assert info["reward"].startswith("Reward. Allowed request: 1 when the final database")
    assert main(["info", "trace/airline-v0"]) == 0
    shown = capsys.readouterr().out
    assert "max_requests" in shown and "get_user_details" in shown and "target env, builtin" in shown


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
])
def test_counts_out_of_range_are_refused_naming_the_flag(capsys, argv, words):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and words in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["tiny-agent", "build", "--threads", "0"], "TinyAgentConfig.threads=0 is invalid: must be an integer >= 1"),
    (["base-agent", "build", "--lr", "-1"], "BaseAgentConfig.lr=-1.0 is invalid"),
    (["train", "--env", "trace/retail-v0", "--out", "x", "--group-size", "0"], "GRPOConfig.group_size=0 is invalid"),
    (["train", "--env", "trace/retail-v0", "--out", "x", "--backend", "tpu"], "GRPOConfig.backend='tpu' is invalid"),
    (["compose", "--adapters", "a", "--envs", "e", "--out", "x", "--held-out", "1.5"], "ComposeConfig.held_out=1.5"),
    (["compose", "--adapters", "a", "--envs", "e", "--out", "x", "--epochs", "0"], "GateConfig.epochs=0 is invalid"),
    (["analyze", "x.jsonl", "--out", "x", "--workers", "0"], "AnalysisConfig.workers=0 is invalid"),
    (["analyze", "x.jsonl", "--out", "x", "--labeller", "oracle"], "AnalysisConfig.labeller='oracle' is invalid"),
    (["tiny-agent", "build", "--seed", "-1"], "TinyAgentConfig.seed=-1 is invalid: must be an integer >= 0"),
    (["audit", "trace/retail-v0", "--examples", "0", "--no-record"], "KitSettings.examples=0 is invalid"),
    (["compose", "--adapters", "a", "--envs", "e", "--out", "x", "--seed", "-1"], "GateConfig.seed=-1 is invalid"),
    (["calibrate", "trace/retail-v0", "--mean", "0.5,0.1"], "Bands.mean_reward=(0.5, 0.1) is invalid"),
    (["calibrate", "trace/retail-v0", "--mean", "0.1,0.2,0.3"], "Bands.mean_reward=(0.1, 0.2, 0.3) is invalid"),
])
def test_a_config_flag_is_checked_by_its_dataclass_before_any_work(capsys, argv, words, tmp_path, monkeypatch):
    """Flags built from a config dataclass are validated by it, in one place: one line naming
    the field and the rule, exit 2, nothing run."""
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("trace-gym: error: ") and words in err[0], err
    assert list(tmp_path.iterdir()) == []


def test_a_flag_of_the_other_base_agent_recipe_is_refused(capsys):
    assert main(["base-agent", "build", "--preset", "fixture"]) == 2
    assert "--preset: not a setting of the pretrained recipe" in capsys.readouterr().err
    assert main(["tiny-agent", "build", "--method", "lora"]) == 2
    assert "--method: not a setting of the from-scratch recipe" in capsys.readouterr().err


def test_every_config_field_a_flag_can_carry_is_a_flag(capsys):
    """No hand-copied subset: a field added to GRPOConfig is a `trace-gym train` flag, its
    docstring the help."""
    import dataclasses

    from trace_gym.trainer import GRPOConfig

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    shown = capsys.readouterr().out
    wanted = {"--" + f.name.replace("_", "-") for f in dataclasses.fields(GRPOConfig)} - {"--env-id", "--env-kwargs"}
    assert {flag for flag in wanted if not re.search(rf"{flag}(?![\w-])", shown)} == set()
    assert "K: rollouts per seed" in " ".join(shown.split())


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


def test_every_field_a_command_reads_is_documented_for_its_help():
    """A flag's help is its field's docstring: every field of the configs the commands build
    flags from has one."""
    from trace_gym.analysis import AnalysisConfig
    from trace_gym.analysis.aggregate import Params
    from trace_gym.baseagent.build import BaseAgentConfig
    from trace_gym.baseagent.scratch import TinyAgentConfig
    from trace_gym.calibration import Bands
    from trace_gym.cli.flags import field_docs
    from trace_gym.moe import ComposeConfig, GateConfig
    from trace_gym.testing import KitSettings
    from trace_gym.trainer import GRPOConfig

    configs = (GRPOConfig, ComposeConfig, GateConfig, AnalysisConfig, Params, BaseAgentConfig, TinyAgentConfig,
               Bands, KitSettings)
    undocumented = {c.__name__: [name for name, doc in field_docs(c).items() if not doc] for c in configs}
    assert undocumented == {c.__name__: [] for c in configs}


def test_a_knob_flag_sets_an_env_knob_over_the_config(capsys, tmp_path):
    """`--knob KEY=VALUE` reaches gym.make over --config's knobs: the value read as JSON; a
    knob the env lacks is one line naming it, and a flag without '=' is refused by the parser."""
    out = tmp_path / "r.jsonl"
    argv = ["rollout", "trace/retail-v0", "--seeds", "0:3", "--policy", "oracle", "--quiet", "--config", "embedded",
            "--knob", 'kinds=["order_info"]', "--knob", "prompt_style=compact", "--out", str(out)]
    assert main(argv) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["task_kind"] for r in records} == {"order_info"}  # the config's four kinds, overridden
    assert main(["rollout", "trace/retail-v0", "--seeds", "0:1", "--policy", "oracle", "--quiet",
                 "--knob", "bogus=1", "--out", str(tmp_path / "b.jsonl")]) == 2
    assert "unknown argument(s) ['bogus']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["rollout", "trace/retail-v0", "--seeds", "0:1", "--knob", "bogus", "--out", str(out)])
    assert "is not KEY=VALUE" in capsys.readouterr().err
