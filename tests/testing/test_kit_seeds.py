"""The kit plays seeds drawn from a base over the whole of each split, hinted and unhinted
resets, refuses rewards that are not finite numbers, and compares tool schemas without
compiling (or fetching) anything a worker sent."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import socket
import subprocess
import sys
import urllib.request
from dataclasses import dataclass, replace
from typing import Any

import pytest

from tests.audit.mutants import (
    HINTED_PAYS,
    NAN_REWARD,
    OFF_OLD_SAMPLE,
    REMOTE_REF_IN_TITLE,
    REMOTE_REF_URL,
    TEMPLATE,
    mutant,
)
from tests.testing.test_kit_mutants import FAST
from trace_gym.sandbox.pool import WorkerLost
from trace_gym.schema import UnsafeSchema, compile_arguments_validator
from trace_gym.seeding import SPLITS
from trace_gym.testing import EnvRef, KitSettings, PropertyFailed, policies, run_kit, run_property, seeds
from trace_gym.testing.kitenv import KitEnv
from trace_gym.testing.properties import _shape

# -- (a) seeds from a base -------------------------------------------------------------------


def test_a_base_draws_the_same_seeds_and_another_base_others():
    a, again, b = seeds.plan(0, "adversaries", 400), seeds.plan(0, "adversaries", 400), seeds.plan(1, "adversaries", 400)
    assert a == again
    assert len(set(a.seeds) & set(b.seeds)) < 5  # the test split holds 100,000 seeds: a few may meet
    assert len(set(a.seeds)) == 400
    train, test = SPLITS["train"], SPLITS["test"]
    drawn = a.groups()
    assert len(drawn["train"]) == len(drawn["test"]) == 200 and len(drawn["hinted"]) == len(drawn["unhinted"]) == 200
    assert all(s in test for s in drawn["test"])
    assert max(drawn["train"]) > train.stop // 2 > min(drawn["train"])  # spread over the whole split
    assert max(drawn["test"]) > test.start + len(test) // 2 > min(drawn["test"])
    assert seeds.plan(0, "oracle", 40).seeds != a.seeds[:40]  # each purpose its own draw
    assert KitSettings(seed_base=1).hypothesis_seed != KitSettings().hypothesis_seed


def test_a_base_draws_the_same_seeds_in_another_process():
    code = "from trace_gym.testing import seeds; print(list(seeds.plan(7, 'adversaries', 6).seeds))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "123"}).stdout
    assert json.loads(out) == list(seeds.plan(7, "adversaries", 6).seeds)


def test_seed_base_must_be_a_non_negative_integer():
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="seed_base"):
            KitSettings(seed_base=bad)


def test_a_verifier_paying_off_the_old_fixed_sample_fails(tmp_path):
    """Paying 1.0 on every train seed that is not a multiple of 7919 (the old fixed sample's
    train seeds all were) gives a random policy 1.0 on most train seeds the kit now plays."""
    path = mutant(tmp_path, "off_old_sample", **OFF_OLD_SAMPLE)
    for base in (0, 1):
        result = run_property("degenerate_policies", EnvRef(path=str(path)), replace(FAST, seed_base=base))
        assert not result.passed, result.detail
        assert "scored 1.0 on seed" in result.detail or "on average" in result.detail


# -- (b) hinted and unhinted resets --------------------------------------------------------


def test_a_verifier_paying_after_hinted_resets_fails(tmp_path):
    path = mutant(tmp_path, "hinted_pays", **HINTED_PAYS)
    result = run_property("degenerate_policies", EnvRef(path=str(path)), FAST)
    assert not result.passed, result.detail
    assert run_property("oracle_solves", EnvRef(path=str(path)), FAST).passed  # an env that works otherwise


class _Recorder:
    """A one-step env that records the hint of each reset and ends with `reward`."""

    def __init__(self, reward: Any = 1.0) -> None:
        self.reward, self.hints = reward, []

    def reset(self, *, seed=None, options=None):
        self.hints.append(bool((options or {}).get("hint")))
        return [], {}

    def step(self, action):
        return [], self.reward, True, False, {"verdict": None}


def test_the_kit_plays_hinted_and_unhinted_resets():
    plan = seeds.plan(0, "oracle", 8)
    env = _Recorder()
    kit_env = KitEnv(env, plan)
    for seed in plan.seeds:
        policies.play(kit_env, seed, lambda e, obs: "hi")
    assert env.hints == [plan.hint(s) for s in plan.seeds] and sorted(env.hints) == [False] * 4 + [True] * 4
    policies.play(kit_env, plan.seeds[0], lambda e, obs: "hi", hint=True)  # an explicit hint is kept
    assert env.hints[-1] is True


# -- (c) rewards that are not finite numbers -----------------------------------------------


@pytest.mark.parametrize("reward", [float("nan"), float("inf"), "1.0", None, True])
def test_play_refuses_a_reward_that_is_not_a_finite_number(reward):
    with pytest.raises(PropertyFailed, match="not a finite number"):
        policies.play(_Recorder(reward), 3, lambda e, obs: "hi")


@dataclass(frozen=True)
class _InProcess(EnvRef):
    """A ref whose env the kit makes in this process (the kit's own reward check, before any
    check on the wire between an env worker and the kit)."""

    cls: Any = None

    def make(self, **extra: Any) -> Any:
        return self.cls(**{**self.kwargs, **extra})


def _load(path, monkeypatch) -> Any:
    """The env class of a module file, imported in this process (test code: trusted)."""
    name = f"kit_test_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module.TemplateEnv


def test_an_oracle_paid_nan_fails_oracle_solves(tmp_path, monkeypatch):
    path = mutant(tmp_path, "nan_reward", **NAN_REWARD)
    result = run_property("oracle_solves", _InProcess(path=str(path), cls=_load(path, monkeypatch)), FAST)
    assert not result.passed
    assert "nan" in result.detail and "not a finite number" in result.detail, result.detail
    template = _InProcess(path=str(TEMPLATE), cls=_load(TEMPLATE, monkeypatch))
    assert run_property("oracle_solves", template, FAST).passed
    # Through an env worker, the client refuses a NaN on the wire before the kit sees it: the
    # worker counts as lost, which stops the kit (the audit reports it); else the kit fails it.
    try:
        assert not run_property("oracle_solves", EnvRef(path=str(path)), FAST).passed
    except WorkerLost as exc:
        assert "not finite" in str(exc)


# -- (d) tool schemas: compared, never compiled, nothing fetched ------------------------------


@pytest.fixture
def fetches(monkeypatch):
    """Every URL opened and every network connection made in this process (a URL opened
    gets a valid schema back, as a red team's server would send)."""
    calls: list[Any] = []

    class _Response(io.BytesIO):
        def info(self):
            return self

        def get_content_charset(self):
            return "utf-8"

    def urlopen(url, *args, **kwargs):
        calls.append(url)
        return _Response(b'{"type": "string"}')

    real_connect = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            calls.append(address)
            raise ConnectionRefusedError("no network in this test")
        return real_connect(self, address)

    monkeypatch.setattr(urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(socket.socket, "connect", connect)
    return calls


def test_a_remote_ref_in_a_property_named_title_fails_and_fetches_nothing(tmp_path, fetches):
    path = mutant(tmp_path, "remote_ref_in_title", **REMOTE_REF_IN_TITLE)
    result = run_property("tool_schemas", EnvRef(path=str(path)), FAST)
    assert not result.passed and "cancel_pending_order: parameters differ" in result.detail, result.detail
    assert fetches == []
    assert run_property("tool_schemas", EnvRef(path=str(TEMPLATE)), FAST).passed


def test_shape_drops_only_the_words_of_schema_nodes():
    schema = {"type": "object", "title": "Args", "description": "what", "properties": {
        "title": {"type": "string", "description": "a property named title"},
        "description": {"type": "string", "title": "Description"},
        "n": {"type": "integer", "description": {"$ref": "http://x/"}}},
        "required": ["title"]}
    assert _shape(schema) == {"type": "object", "properties": {
        "title": {"type": "string"}, "description": {"type": "string"},
        "n": {"type": "integer", "description": {"$ref": "http://x/"}}}, "required": ["title"]}


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"title": {"$ref": REMOTE_REF_URL}}},
    {"type": "object", "properties": {"a": {"anyOf": [{"$ref": "ftp://example.com/x.json"}]}}},
    {"type": "object", "properties": {"a": {"$ref": "file:///etc/passwd"}}},
    {"type": "object", "properties": {"a": {"$ref": "data:application/json,{}"}}},
    {"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}},
    {"type": "object", "$id": "http://example.com/", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {}}},
    {"type": "object", "properties": {"a": {"id": "http://example.com/", "$ref": "#/x"}}},
])
def test_compile_arguments_validator_refuses_refs_outside_the_schema(schema, fetches):
    with pytest.raises(UnsafeSchema) as caught:
        compile_arguments_validator(schema)
    assert "$ref" in str(caught.value) or "id" in str(caught.value)
    assert fetches == []


def test_compile_arguments_validator_takes_local_refs():
    schema = {"type": "object", "$defs": {"A": {"type": "string"}},
              "properties": {"a": {"$ref": "#/$defs/A"}, "id": {"type": "string"}}}
    validate = compile_arguments_validator(schema)
    validate({"a": "x", "id": "y"})


def test_the_template_passes_the_kit_with_another_base():
    report = run_kit(EnvRef(path=str(TEMPLATE)), replace(FAST, seed_base=12345))
    assert report.passed, report.failures()
