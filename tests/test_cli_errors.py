"""Bad input to every command ends in one line that names it and a non-zero exit, never a
traceback: missing paths, unknown env ids, malformed files and TOML, an output directory
that holds someone else's files."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from trace_gym.cli import command_names, main

PRECONDITION = "trace/precondition_verification-v0"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "bad.toml").write_text("not [valid toml\n")
    (tmp_path / "bad.json").write_text('{"x":\n')
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("the user's own file\n")
    return tmp_path


# (command line with {d} for the test's directory, what the message must say)
CASES = [
    ("play trace/nope-v0 --seed 0", "unknown environment 'trace/nope-v0'"),
    ("play trace/retail-v0 --seed 0 --policy endpoint --base-url http://127.0.0.1:9/v1", "needs the model's name"),
    ("view {d}/missing.jsonl", "no such file"),
    ("info trace/nope-v0", "unknown environment 'trace/nope-v0'"),
    ("view {d}/bad.json", "bad.json: line 1 is not a JSON record"),
    ("audit {d}/missing_env.py --no-record", "no such module file"),
    ("audit trace/nope-v0 --no-record", "unknown environment"),
    ("rollout trace/nope-v0 --seeds 0:1 --out {d}/o.jsonl", "unknown environment"),
    ("rollout trace/retail-v0 --seeds x --out {d}/o.jsonl", "--seeds must look like A:B"),
    ("eval trace/retail-v0 --seeds 0:1 --policy local --model-path {d}/missing", "is not a model directory"),
    ("eval trace/retail-v0 --seeds 0:1 --policy mixture --model-path {d}/missing", "needs compose_dir"),
    ("analyze {d}/missing.jsonl --out {d}/a", "no such file"),
    ("analyze {d}/bad.json --out {d}/bad.toml", "bad.toml is a file; give the folder"),
    ("rollout trace/retail-v0 --seeds 0:1 --out {d}/mine", "mine is a folder; give the JSON Lines file"),
    ("rollout trace/retail-v0 --seeds 0:1 --out {d}/no/such/o.jsonl", "no/such does not exist; create it first"),
    ("eval trace/retail-v0 --seeds 0:1 --out {d}/no/e.jsonl", "/no does not exist; create it first"),
    ("import-tau2 {d}/bad.json --out {d}/no/t.jsonl", "/no does not exist; create it first"),
    ("import-swebench {d}/missing.traj --report {d}/bad.json --out {d}/no/s.jsonl", "/no does not exist"),
    ("analyze {d}/bad.json --out {d}/a", "bad.json: cannot read"),
    ("synthesize {d}/missing.json --base-url http://127.0.0.1:9/v1 --model m", "cannot read a selected_capabilities"),
    ("synthesize {d}/bad.json --base-url http://127.0.0.1:9/v1 --model m", "cannot read a selected_capabilities"),
    ("calibrate trace/nope-v0", "unknown environment"),
    ("export trace/nope-v0 --seeds 0:1 --out {d}/t.jsonl", "unknown environment"),
    ("export trace/retail-v0 --seeds 0:1 --out {d}/no/t.jsonl", "/no does not exist; create it first"),
    ("eval trace/retail-v0 --seeds 0:1 --policy endpoint --base-url http://127.0.0.1:9/v1 --out {d}/e.jsonl",
     "policy 'endpoint' needs the model's name"),
    ("import-tau2 {d}/missing.json --out {d}/t.jsonl", "cannot read a tau2 results file"),
    ("import-tau2 {d}/bad.json --out {d}/t.jsonl", "cannot read a tau2 results file"),
    ("import-swebench {d}/missing.traj --report {d}/bad.json --out {d}/s.jsonl", "bad.json: line 2: not valid JSON"),
    ("train --env trace/nope-v0 --out {d}/tr", "unknown environment"),
    ("train --env trace/retail-v0 --out {d}/tr --config {d}/bad.toml", "bad.toml is not valid TOML"),
    ("train --env trace/retail-v0 --out {d}/tr --config {d}/missing.toml", "no run configuration at"),
    ("train --env trace/retail-v0 --out {d}/tr --base {d}/missing", "is not a model directory"),
    ("pipeline --config {d}/bad.toml --dry-run", "bad.toml is not valid TOML"),
    ("pipeline --config {d}/missing.toml --dry-run", "no run configuration at"),
    ("pipeline --config embeded --dry-run", "did you mean 'embedded'?"),
    (f"compose --adapters {{d}}/missing --envs {PRECONDITION} --out {{d}}/c", "not a peft adapter directory"),
    (f"compose --adapters {{d}}/a1,{{d}}/a2 --envs {PRECONDITION} --out {{d}}/c", "one env per adapter"),
    ("base-agent build --config {d}/bad.toml", "bad.toml is not valid TOML"),
    ("base-agent build --out {d}/mine", "exists and is not an agent build"),
    ("tiny-agent build --preset fixture --out {d}/mine", "exists and is not an agent build"),
]


@pytest.mark.parametrize("line, says", CASES, ids=[c[0].split(" {")[0][:40] for c in CASES])
def test_bad_input_is_one_line_and_a_non_zero_exit(line, says, files, capsys):
    code = main([part.format(d=files) for part in line.split()])
    err = capsys.readouterr().err.strip().splitlines()
    assert code != 0
    assert err and err[-1].startswith("trace-gym: error: ") and says in err[-1], err
    assert not any("Traceback" in line for line in err)
    assert (files / "mine" / "notes.txt").is_file()  # a refused build deleted nothing
    assert not (files / "no").exists()  # a refused --out made no folder


def test_every_command_is_fed_bad_input():
    """A new command gets a case here."""
    fed = {line.split()[0] for line, _ in CASES} | {"list"}  # list takes no input
    assert set(command_names()) <= fed, set(command_names()) - fed


def test_front_doors_version_and_a_bare_command(capsys):
    from trace_gym.cli import version

    assert main(["--version"]) == 0 and capsys.readouterr().out.strip() == f"trace-gym {version()}"
    assert main([]) == 0
    shown = capsys.readouterr().out
    assert all(name in shown for name in command_names())


def test_a_missing_extra_is_one_line_naming_it(monkeypatch, capsys, tmp_path):
    """A command whose work needs an extra that is not installed (here torch, as if absent)."""
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now fails as if not installed
    code = main(["train", "--env", "trace/retail-v0", "--out", str(tmp_path / "x"), "--base", "tests/fixtures/tiny_agent"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert "needs torch" in err[0] and "pip install 'trace-gym[train]'" in err[0]


def test_every_extra_named_is_one_of_pyprojects():
    import tomllib

    from tests.conftest import REPO
    from trace_gym.cli import EXTRAS

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert set(EXTRAS.values()) <= set(extras)
    for module, extra in EXTRAS.items():  # the module's distribution is listed in that extra
        names = " ".join(extras[extra]).replace("-", "_").lower()
        assert module.split("_")[0] in names, (module, extra)


def test_ctrl_c_exits_130_without_a_traceback(monkeypatch, capsys):
    from trace_gym.cli import list_envs

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(list_envs, "run", interrupted)
    assert main(["list"]) == 130
    assert capsys.readouterr().err.strip() == "trace-gym: interrupted"


def test_a_closed_pipe_ends_quietly():
    """`trace-gym list --json | head -c 10` with more output than a pipe holds: the reader goes
    away mid-write; exit 141, no traceback."""
    import subprocess
    import sys

    script = ("from trace_gym.cli import list_envs, main\n"
              "def run(args):\n    for _ in range(2000): print('x' * 1000)\n    return 0\n"
              "list_envs.run = run\nraise SystemExit(main(['list', '--json']))\n")
    writer = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    writer.stdout.read(10)
    writer.stdout.close()  # the reader is gone long before the 2 MB are written
    err = writer.stderr.read().decode()
    assert writer.wait() == 141 and "Traceback" not in err, err


def test_the_model_libraries_stay_quiet_unless_verbose(tmp_path):
    """A command that loads a model prints its own progress on stderr, not transformers'
    loading bars; `-v` lets them through."""
    import shutil
    import subprocess

    pytest.importorskip("transformers")
    cli = shutil.which("trace-gym")
    assert cli, "the trace-gym command is not installed"
    play = [cli, "play", "trace/retail-v0", "--seed", "0", "--policy", "local", "--engine", "torch",
            "--model-path", str(REPO / "tests" / "fixtures" / "tiny_agent"), "--max-new-tokens", "4"]
    import os

    # the suite's own process may have set these (an in-process command quiets the libraries)
    env = {k: v for k, v in os.environ.items()
           if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_NO_ADVISORY_WARNINGS")}
    quiet = subprocess.run(play, cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert quiet.returncode == 0, quiet.stderr
    assert "local model tiny_agent" in quiet.stderr and "Loading weights" not in quiet.stderr, quiet.stderr
    loud = subprocess.run([*play, "-v"], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert loud.returncode == 0 and "Loading weights" in loud.stderr, loud.stderr
