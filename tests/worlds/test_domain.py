"""The domain records (`trace_gym.worlds.DOMAINS`) are the one source of each domain's facts:
every reader's view equals its record's, an unknown domain is refused by name, and the
target and capability envs open their system prompts with one and the same intro."""

from __future__ import annotations

import dataclasses
import re

import gymnasium as gym
import pytest

import trace_gym
from tests.conftest import REPO
from trace_gym import capability_env, rates, registry
from trace_gym.analysis import programmatic
from trace_gym.errors import InvalidConfig
from trace_gym.synthesis.tools import target_tools
from trace_gym.testing.properties import KitSettings
from trace_gym.worlds import DOMAINS, PROMPT_STYLES, Domain, airline, domain_named, retail

RECORDS = list(DOMAINS.values())
CAPABILITY_ENV = "trace/precondition_verification-v0"
"""A shipped capability env that draws tasks in both domains."""


def test_each_world_package_defines_its_record_and_the_table_lists_them():
    assert DOMAINS == {"airline": airline.DOMAIN, "retail": retail.DOMAIN}
    assert [d.name for d in RECORDS] == list(DOMAINS)
    for d in RECORDS:
        assert isinstance(d, Domain)
        assert len(d.tools) > 0
        assert d.write_tools and d.write_tools <= set(d.tools)


def test_records_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        airline.DOMAIN.intro = "changed"  # type: ignore[misc]
    with pytest.raises(TypeError):
        airline.DOMAIN.can_need["new_kind"] = ()  # type: ignore[index]


@pytest.mark.parametrize("d", RECORDS, ids=lambda d: d.name)
def test_capability_views_are_the_records(d):
    assert capability_env.DOMAIN_TOOLS[d.name] is d.tools
    assert capability_env.WRITE_TOOLS[d.name] == d.write_tools
    assert capability_env.INTRO[d.name] == d.intro
    for style in PROMPT_STYLES:
        assert capability_env.POLICIES[(d.name, style)] == d.policy_text(style)
        assert capability_env.system_prompt(d.name, style) == d.system_prompt(style)
    assert (set(capability_env.DOMAIN_TOOLS) == set(capability_env.WRITE_TOOLS) == set(capability_env.INTRO)
            == set(DOMAINS))
    assert set(capability_env.POLICIES) == {(name, style) for name in DOMAINS for style in PROMPT_STYLES}


@pytest.mark.parametrize("style", PROMPT_STYLES)
@pytest.mark.parametrize("d", RECORDS, ids=lambda d: d.name)
def test_the_target_env_reads_its_record(d, style):
    env = gym.make(d.target_env_id, prompt_style=style)
    target = env.unwrapped
    assert target.DOMAIN is d and target.domain == d.name and target.records == d.records
    _, info = env.reset(seed=0)
    assert info["system_prompt_unhinted"] == d.system_prompt(style)
    assert target.toolset is d.tools and info["tools"] == d.tools.schemas
    assert isinstance(target.world_size, d.world_size)
    assert target.episode.initial_world.tables["users"][target.task.user_id][d.records]
    # the task module drafts exactly the record's kinds; its tables are the record's
    tasks = target.tasks
    assert set(tasks.KINDS) == set(d.kinds)
    with pytest.raises(InvalidConfig, match="allowed: " + re.escape(", ".join(d.kinds))):
        gym.make(d.target_env_id, kinds=("no_such_kind",))


@pytest.mark.parametrize("d", RECORDS, ids=lambda d: d.name)
def test_the_two_intros_are_one(d):
    """A capability env's task in a domain opens with the same system prompt as the domain's
    target env: the record's intro, then its policy."""
    share = 1.0 if d.name == "airline" else 0.0
    for style in PROMPT_STYLES:
        cap_env = gym.make(CAPABILITY_ENV, airline_share=share, prompt_style=style)
        _, cap_info = cap_env.reset(seed=1)
        assert cap_env.unwrapped.task.domain == d.name
        _, target_info = gym.make(d.target_env_id, prompt_style=style).reset(seed=1)
        assert cap_info["system_prompt_unhinted"] == target_info["system_prompt_unhinted"] == d.system_prompt(style)
        assert d.system_prompt(style).split("\n\n", 1)[0] == d.intro


def test_each_intro_is_written_once_in_the_source():
    """No module keeps its own copy of an intro (or the old capability wording)."""
    sources = {p: p.read_text(encoding="utf-8") for folder in ("trace_gym", "analysis", "generated_envs")
               for p in (REPO / folder).rglob("*.py")}
    for d in RECORDS:
        holders = [p.relative_to(REPO).as_posix() for p, text in sources.items() if d.intro in text]
        assert holders == [f"trace_gym/worlds/{d.name}/__init__.py"]
    assert [p for p, text in sources.items() if "Follow the policy below" in text] == []


def test_registry_and_rates_list_the_records_targets():
    from trace_gym.coding import DOMAIN as CODING

    assert list(registry.BUILTIN) == list(rates.TARGETS) == [*(d.target_env_id for d in RECORDS),
                                                             CODING.target_env_id]
    for d in (*RECORDS, CODING):
        entry = registry.entry(d.target_env_id)
        assert (entry.kind, entry.entry_point, entry.description) == (
            "target", d.target_entry_point, d.target_description)
        assert gym.spec(d.target_env_id).entry_point == d.target_entry_point


def test_synthesis_reads_the_records_tools():
    for d in RECORDS:
        record = {"env_id": d.tau2_env_id, "messages": []}
        assert target_tools([record]) == d.tools.schemas
        assert d.tau2_env_id == f"tau2/{d.name}"  # the env id trace_gym.tau2 gives this domain's results
    every = {s["function"]["name"]: s for d in RECORDS for s in d.tools.schemas}
    assert {s["function"]["name"] for s in target_tools([])} == set(every)


def test_the_kit_and_the_labeller_read_the_records():
    assert KitSettings().target_schemas() == tuple(s for d in RECORDS for s in d.tools.schemas)
    mine = ({"type": "function", "function": {"name": "x", "parameters": {"type": "object"}}},)
    assert KitSettings(target_tools=mine).target_schemas() == mine
    assert programmatic.WRITE_TOOLS == frozenset().union(*(d.write_tools for d in RECORDS))


def test_an_unknown_domain_is_refused_by_name():
    with pytest.raises(InvalidConfig, match=r"unknown domain 'airlines'\. Did you mean 'airline'\?"):
        domain_named("airlines")
    with pytest.raises(InvalidConfig, match="unknown domain 'telecom'.*airline, retail"):
        capability_env.system_prompt("telecom", "full")
    with pytest.raises(InvalidConfig, match="unknown domain 'telecom'"):
        capability_env.domain_toolsets({"telecom": ["calculate"]})
    with pytest.raises(InvalidConfig, match="prompt style 'long' is unknown; allowed: full, compact"):
        capability_env.system_prompt("airline", "long")
    assert isinstance(trace_gym.InvalidConfig("x"), ValueError)


@pytest.mark.parametrize(("field", "value", "rule"), [
    ("name", "Air Line", "identifier"),
    ("intro", "two\nlines", "one line"),
    ("tau2_env_id", "airline", "tau2/"),
    ("target_env_id", "airline-v0", "trace namespace"),
    ("target_entry_point", "trace_gym.targets.env", "module:Class"),
    ("plan_steps", 0, "positive integer"),
])
def test_a_record_is_checked_at_construction(field, value, rule):
    with pytest.raises(InvalidConfig, match=rf"Domain\.{field}={re.escape(repr(value))} is invalid: .*{rule}"):
        dataclasses.replace(airline.DOMAIN, **{field: value})


def test_a_kind_needing_an_unknown_capability_is_refused():
    with pytest.raises(InvalidConfig, match=r"can_need\['baggage'\].*allowed: "):
        dataclasses.replace(airline.DOMAIN, can_need={"baggage": ("guessing",)})


@pytest.mark.parametrize("d", RECORDS, ids=lambda d: d.name)
def test_the_world_readme_names_every_tool_and_kind(d):
    """The README of the world package lists the record's tools and task kinds (a test keeps
    the two from drifting apart)."""
    text = (REPO / "trace_gym" / "worlds" / d.name / "README.md").read_text(encoding="utf-8")
    missing = [name for name in (*d.tools, *d.kinds, d.target_env_id, d.tau2_env_id) if f"`{name}`" not in text]
    assert missing == []
