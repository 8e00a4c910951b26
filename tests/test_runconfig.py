"""Run configurations under configs/: the shipped ones load and every knob they set is one
the env accepts; malformed files are refused with the file and the problem named."""

from __future__ import annotations

import gymnasium as gym
import pytest

from tests.conftest import REPO
from trace_gym.errors import InvalidConfig
from trace_gym.runconfig import env_knobs, load

CONFIGS = sorted((REPO / "configs").glob("*.toml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_shipped_configurations_make_their_envs(path):
    for env_id, knobs in load(path).get("env_knobs", {}).items():
        env = gym.make(env_id, **knobs)
        env.reset(seed=0)
        assert env_knobs(path, env_id) == knobs


def test_an_env_without_knobs_gets_none(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[env_knobs."trace/airline-v0"]\nmax_requests = 1\n')
    assert env_knobs(path, "trace/retail-v0") == {}
    assert env_knobs(path, "trace/airline-v0") == {"max_requests": 1}


@pytest.mark.parametrize("text, match", [("[env_knobs\n", "not valid TOML"),
                                         ('[env_knobs]\n"trace/airline-v0" = 3\n', "must be a table")])
def test_malformed_configurations_are_refused(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InvalidConfig, match=match):
        load(path)
    with pytest.raises(InvalidConfig, match="no run configuration"):
        load(tmp_path / "missing.toml")


def test_a_table_no_stage_has_is_refused_by_every_command_that_takes_a_config(tmp_path, capsys):
    from trace_gym.cli import main

    path = tmp_path / "bad.toml"
    path.write_text("[trian]\nlr = 1\n")
    for argv in (["train", "--env", "trace/precondition_verification-v0", "--out", str(tmp_path / "o"), "--config",
                  str(path)],
                 ["pipeline", "--dry-run", "--config", str(path)]):
        assert main(argv) == 2
        assert f"{path}: unknown table(s) ['trian']; allowed: pipeline, base_agent" in capsys.readouterr().err


def test_shipped_configurations_are_found_by_name_and_unknown_names_refused(tmp_path):
    from trace_gym.errors import TraceGymError
    from trace_gym.resources import SHIPPED_CONFIGS, config_path, embedded_config

    assert sorted(f"{n}.toml" for n in SHIPPED_CONFIGS) == [p.name for p in CONFIGS]
    assert embedded_config() == REPO / "configs" / "embedded.toml" == config_path("embedded")
    assert load("embedded") == load(REPO / "configs" / "embedded.toml")
    assert env_knobs("embedded", "trace/airline-v0") == env_knobs(embedded_config(), "trace/airline-v0")
    with pytest.raises(TraceGymError, match="no run configuration 'embeded'.*embedded, gpu-qwen3-30b-a3b\\)"):
        config_path("embeded")


def test_the_embedded_config_is_the_base_agents_and_the_trainers_recipe(tmp_path):
    """The build's default recipe, the trainer's --config embedded and the pipeline read the
    same tables; an unknown recipe key is refused with the file and the key."""
    from trace_gym.baseagent.build import BaseAgentConfig, default_agent_dir, default_out, embedded_recipe
    from trace_gym.pipeline.config import load as pipeline_load
    from trace_gym.trainer.config import GRPOConfig

    table = load("embedded")["base_agent"]
    recipe = embedded_recipe()
    assert recipe == BaseAgentConfig.from_table(table)
    assert recipe.episodes == table["episodes"] and list(recipe.weak_kinds) == table["weak_kinds"]
    assert recipe.env_kwargs == table["env_kwargs"]
    assert default_agent_dir() == default_out(recipe)
    assert embedded_recipe(episodes=3).episodes == 3
    assert GRPOConfig.from_toml("embedded").backend == load("embedded")["train"]["backend"]
    from trace_gym.pipeline.stages.base_agent import BaseAgentTable

    section = pipeline_load("embedded").table(BaseAgentTable).recipe
    assert BaseAgentConfig.from_table(section, seed=0) == recipe  # what the pipeline's first stage builds
    other = tmp_path / "other.toml"
    other.write_text('[base_agent]\nepisodes = 5\nweak_kinds = ["baggage"]\n')
    import trace_gym.resources

    with pytest.MonkeyPatch.context() as m:  # the recipe follows the file, not the dataclass's defaults
        m.setattr(trace_gym.resources, "embedded_config", lambda: other)
        assert embedded_recipe().episodes == 5 and embedded_recipe().weak_kinds == ("baggage",)
        assert default_agent_dir() != default_out(recipe)
    bad = tmp_path / "bad.toml"
    bad.write_text('[base_agent]\nepisodez = 3\n')
    with pytest.raises(InvalidConfig, match=r"bad.toml \[base_agent\]: unknown key\(s\) \['episodez'\]"):
        BaseAgentConfig.from_table(load(bad)["base_agent"], where=f"{bad} [base_agent]")


def test_the_embedded_targets_are_a_miniature_named_openly_that_keeps_the_weak_kinds():
    """The embedded default plays a miniature of each target: one request, never compound, no
    distractor, the request given in the first message, four kinds with a weak one among them;
    every knob that differs from the full target is named (strict scoring is not one), and its
    demonstrations are drawn from the same profile."""
    from trace_gym.baseagent.build import embedded_recipe
    from trace_gym.runconfig import target_knobs
    from trace_gym.targets.config import TargetConfig, scaled_knobs

    recipe = embedded_recipe()
    full = TargetConfig()
    for env_id in ("trace/airline-v0", "trace/retail-v0"):
        knobs = env_knobs("embedded", env_id)
        scaled = {name: (value, default) for name, value, default in scaled_knobs(knobs)}
        assert scaled["max_requests"] == (1, full.max_requests) and scaled["compound_rate"] == (0.0, full.compound_rate)
        assert scaled["distractors"] == (0, full.distractors) and scaled["opening"] == ("given", full.opening)
        assert "strict" not in scaled and "prompt_style" not in scaled  # strict scoring stays on
        env = gym.make(env_id, **knobs)
        kinds = env.unwrapped.config.kinds
        assert len(kinds) >= 3 and set(recipe.weak_kinds) & set(kinds), kinds  # the weak kinds stay in
        env.close()
        demo = target_knobs(env_id, recipe.env_kwargs)  # the demonstrations: the same profile
        assert {k: demo[k] for k in knobs if k != "kinds"} == {k: v for k, v in knobs.items() if k != "kinds"}
        assert set(demo["kinds"]) == set(knobs["kinds"])
    # gym.make keeps the full targets
    assert gym.make("trace/airline-v0").unwrapped.config == TargetConfig()


def test_the_miniature_takes_the_oracle_at_most_five_assistant_turns():
    """The miniature's aim: a conversation a 135M model can learn, at most 5 oracle assistant
    turns an episode on average (every one of them passed)."""
    from trace_gym.agents import make_policy
    from trace_gym.driver import EpisodeRequest, play
    from trace_gym.seeding import SPLITS

    oracle = make_policy("oracle")
    for env_id in ("trace/airline-v0", "trace/retail-v0"):
        played = [p.record() for p in play([EpisodeRequest(SPLITS["test"].start + i) for i in range(32)], oracle,
                                            env_id=env_id, env_kwargs=env_knobs("embedded", env_id), in_flight=32)]
        turns = [sum(m["role"] == "assistant" for m in r["messages"]) for r in played]
        assert all(r["passed"] for r in played)
        assert sum(turns) / len(turns) <= 5, (env_id, turns)


def test_scaled_knobs_name_each_difference_from_the_full_target():
    from trace_gym.targets.config import scaled_knobs

    assert scaled_knobs({"prompt_style": "compact", "distractors": 2, "kinds": ["book"]}) == [
        ("kinds", ["book"], None)]
    assert scaled_knobs({"max_requests": 1, "strict": False}) == [("max_requests", 1, 3), ("strict", False, True)]
    assert scaled_knobs({}) == []


def test_the_embedded_prompt_style_is_set_in_one_place(monkeypatch):
    """Every default that plays the embedded agent reads `runconfig.EMBEDDED_PROMPT_STYLE`:
    changing it there changes them all."""
    from trace_gym import runconfig
    from trace_gym.baseagent.build import BaseAgentConfig
    from trace_gym.baseagent.scratch import TinyAgentConfig
    from dataclasses import replace

    from trace_gym.pipeline.config import load as pipeline_load
    from trace_gym.trainer import GRPOConfig

    monkeypatch.setattr(runconfig, "EMBEDDED_PROMPT_STYLE", "full")
    styles = {
        "trainer": GRPOConfig().env_kwargs["prompt_style"],
        "pretrained recipe": BaseAgentConfig().env_kwargs["prompt_style"],
        "scratch recipe": TinyAgentConfig().env_kwargs["prompt_style"],
        "pipeline": replace(pipeline_load(), env_knobs={}).knobs("trace/retail-v0")["prompt_style"],
    }
    assert styles == dict.fromkeys(styles, "full")
    given = replace(pipeline_load(), env_knobs={"trace/retail-v0": {"prompt_style": "compact"}})
    assert given.knobs("trace/retail-v0") == {"prompt_style": "compact"}


def test_the_knobs_before_the_miniature_still_make_a_recipe_and_targets():
    """benchmarks/base_agent.py --scaling builds an agent at the knobs the miniature replaced:
    their config stays a valid recipe with scaled, not miniature, targets."""
    from trace_gym.baseagent.build import BaseAgentConfig

    before = REPO / "benchmarks" / "configs" / "embedded-before-miniature.toml"
    recipe = BaseAgentConfig.from_table(load(before)["base_agent"], where=str(before))
    assert recipe.max_tokens == 1536 and "opening" not in recipe.env_kwargs
    for env_id in ("trace/airline-v0", "trace/retail-v0"):
        knobs = env_knobs(before, env_id)
        assert knobs["max_requests"] == 2 and "opening" not in knobs
        gym.make(env_id, **knobs).close()
