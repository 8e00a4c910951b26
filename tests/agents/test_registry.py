"""The policy registry: one `register_policy` line makes a policy playable by name, listed by
the CLI, and fingerprinted in run records; bad registrations are refused by name."""

from __future__ import annotations

import json

import pytest

from trace_gym.agents import make_policy, policy_entry, policy_names, register_policy
from trace_gym.agents.registry import _POLICIES
from trace_gym.errors import InvalidConfig


class Greeter:
    """A policy of one line: it always says the same thing."""

    name = "greeter"

    def __init__(self, text: str = "Hello, how can I help?", temperature: float = 1.0, timeout: float = 5.0) -> None:
        self.text = text

    def bind(self, env, seed: int = 0, sample: int = 0) -> None:
        pass

    def act(self, messages, tools):
        return self.text


@pytest.fixture
def greeter():
    register_policy("greeter", Greeter, summary="says hello", options=("temperature",), episode_keys=("text",))
    yield
    _POLICIES.pop("greeter", None)


def test_built_in_policies_are_registered_in_order():
    assert policy_names()[:6] == ["oracle", "random", "endpoint", "local", "mixture", "router"]
    assert policy_entry("local").local and policy_entry("endpoint").server and not policy_entry("oracle").local


def test_one_line_makes_a_policy_playable_listed_and_fingerprinted(greeter, tmp_path, capsys):
    from trace_gym.agents.spec import describe_policy
    from trace_gym.cli import main

    assert isinstance(make_policy("greeter"), Greeter)
    assert describe_policy("greeter", text="hi", timeout=9.0) == {"name": "greeter", "text": "hi"}
    assert describe_policy("greeter") == {"name": "greeter", "text": "Hello, how can I help?"}
    with pytest.raises(SystemExit):
        main(["rollout", "--help"])
    assert "greeter: says hello" in " ".join(capsys.readouterr().out.split())
    out = tmp_path / "greeter.jsonl"
    assert main(["rollout", "trace/retail-v0", "--seeds", "0:2", "--policy", "greeter", "--out", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 2 and all(r["run"]["policy"] == {"name": "greeter", "text": "Hello, how can I help?"}
                                     for r in records)
    assert records[0]["messages"][2] == {"role": "assistant", "content": "Hello, how can I help?"}


def test_a_factory_named_by_string_is_imported_when_first_made(greeter):
    register_policy("oracle_by_name", "trace_gym.agents.base:OraclePolicy", summary="the oracle, by name")
    try:
        assert make_policy("oracle_by_name").name == "oracle"
    finally:
        _POLICIES.pop("oracle_by_name")
    register_policy("missing", "trace_gym.agents.base:NoSuchPolicy", summary="nothing")
    try:
        with pytest.raises(InvalidConfig, match="'missing': cannot load 'trace_gym.agents.base:NoSuchPolicy'"):
            make_policy("missing")
    finally:
        _POLICIES.pop("missing")


@pytest.mark.parametrize("name, factory, message", [
    ("oracle", Greeter, "'oracle' is already registered"),
    ("two words", Greeter, "'two words' is invalid"),
    ("dotless", "trace_gym.agents.base", "must be a callable or 'module:attr'"),
])
def test_bad_registrations_are_refused_by_name(name, factory, message):
    with pytest.raises(InvalidConfig, match=message):
        register_policy(name, factory, summary="")
    assert "dotless" not in policy_names() and policy_entry("oracle").factory.__name__ == "OraclePolicy"


def test_an_unknown_policy_or_argument_is_named():
    with pytest.raises(InvalidConfig, match="unknown policy 'orcle'; registered: oracle, random, endpoint"):
        make_policy("orcle")
    with pytest.raises(InvalidConfig, match="policy 'random' takes no argument temprature"):
        make_policy("random", temprature=0.5)


def test_the_readmes_registration_example_runs():
    """The docs' block itself (docs/policies.md): executed, it registers a policy that then
    plays by name."""
    import re

    from tests.conftest import REPO

    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "policies.md").read_text(), flags=re.S)
    (code,) = [b for b in blocks if 'register_policy("greeter"' in b]
    _POLICIES.pop("greeter", None)
    namespace: dict = {}
    try:
        exec(compile(code, "docs/policies.md (policy registry)", "exec"), namespace)
        assert "greeter" in policy_names() and namespace["policy"].act([], []) == "Hello, how can I help?"
    finally:
        _POLICIES.pop("greeter", None)


def _plugin(tmp_path, body: str) -> dict[str, str]:
    """An installed distribution on a path of its own whose `trace_gym.policies` entry point is
    `greeting:register` (a module with `body`); the environment that puts it on the path."""
    import os

    (tmp_path / "greeting.py").write_text(body)
    meta = tmp_path / "greeting-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: greeting\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text("[trace_gym.policies]\ngreeter = greeting:register\n")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}


def test_a_package_adds_a_policy_to_the_installed_cli_through_its_entry_point(tmp_path):
    import shutil
    import subprocess

    env = _plugin(tmp_path, '''
from trace_gym.agents import register_policy

class Greeter:
    name = "greeter"
    def bind(self, env, seed=0, sample=0):
        pass
    def act(self, messages, tools):
        return "Hello from a plugin."

def register():
    register_policy("greeter", Greeter, summary="says hello")
''')
    cli = shutil.which("trace-gym")
    assert cli, "the trace-gym command is not installed"
    out = subprocess.run([cli, "play", "trace/retail-v0", "--seed", "0", "--policy", "greeter"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Hello from a plugin." in out.stdout
    listed = subprocess.run([cli, "play", "--help"], env=env, capture_output=True, text=True, timeout=120)
    assert "greeter" in listed.stdout


def test_a_plugin_that_fails_is_one_line_naming_it(tmp_path):
    import shutil
    import subprocess

    env = _plugin(tmp_path, "def register():\n    raise RuntimeError('no greeting today')\n")
    out = subprocess.run([shutil.which("trace-gym") or "trace-gym", "play", "trace/retail-v0", "--seed", "0"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith("trace-gym: error: the policy plugin 'greeter' (greeting:register") and \
        "no greeting today" in out.stderr
