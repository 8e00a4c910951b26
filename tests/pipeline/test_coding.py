"""`trace-gym pipeline --domain coding`: the domain picks the coding target and the coding
capability envs; the coding domain refuses the embedded customer-service recipe; on CPU its
plumbing runs end to end with the committed fixture (the shipped `coding` configuration's
smoke budget, smaller still), and the base agent's own episodes go to an endpoint when
`[base_agent] base_url` names one (a scripted local server stands in for vLLM)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from trace_gym import capabilities as cap
from trace_gym.coding import DOMAIN
from trace_gym.errors import InvalidConfig
from trace_gym.pipeline.config import load
from trace_gym.pipeline.contract import Run, State
from trace_gym.pipeline.stages import STAGES
from trace_gym.pipeline.stages.base_agent import STAGE as BASE_AGENT
from trace_gym.pipeline.stages.base_agent import BaseAgentTable
from trace_gym.sandbox.jail import sandbox_available

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"
MICRO = {"rollout": {"episodes": 2}, "calibrate": {"seeds": 1, "samples": 2},
         "train": {"iterations": 2, "checkpoint_every": 1}, "compose": {"episodes": 2}, "eval": {"seeds": 2}}
"""The smoke budget smaller still (as tests/test_pipeline.py's MICRO): each coding episode runs
sandboxed commands."""

needs_sandbox = pytest.mark.skipif(not sandbox_available()[0],
                                   reason=f"coding episodes run in the sandbox: {sandbox_available()[1]}")


def _state(config, tmp_path: Path, **records) -> State:
    """A run's state on `config` with these stages' records (name -> record)."""
    state = State(config, Run(tmp_path / "run", log=lambda m: None), list(STAGES))
    state.records.update(records)
    return state


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "run.toml"
    path.write_text(text)
    return path


# -- configuration ----------------------------------------------------------------------------

def test_an_unknown_domain_is_refused_naming_the_file_the_table_and_the_allowed_values(tmp_path):
    path = _toml(tmp_path, '[pipeline]\ndomain = "cooking"\n')
    with pytest.raises(InvalidConfig, match=rf"{path}: \[pipeline\] domain='cooking'; "
                                            r"allowed: customer_service, coding"):
        load(path)
    with pytest.raises(InvalidConfig, match=r"--domain 'cooking' is not known; allowed: customer_service, coding"):
        load(domain="cooking")


def test_the_domain_picks_the_targets_unless_the_file_names_them(tmp_path):
    default = load()  # customer service, as before the key existed
    assert default.domain == "customer_service"
    assert default.targets == ("trace/airline-v0", "trace/retail-v0")
    assert load(_toml(tmp_path, "[pipeline]\nseed = 1\n")).targets == ("trace/airline-v0", "trace/retail-v0")

    coding = load(domain="coding")  # --domain coding without --config: the shipped coding configuration
    assert coding.source == str(REPO / "configs" / "coding.toml")
    assert coding.domain == "coding" and coding.targets == (DOMAIN.target_env_id,)
    assert load("coding").targets == (DOMAIN.target_env_id,)

    # the flag over the file: a file that names no targets gets the flag's domain's
    path = _toml(tmp_path, "[base_agent]\nfixture = true\n")
    assert load(path, domain="coding").targets == (DOMAIN.target_env_id,)
    # a file that names targets keeps them; another domain's are refused, naming them
    named = _toml(tmp_path, '[pipeline]\ndomain = "coding"\ntargets = ["trace/coding-v0"]\n[base_agent]\n'
                            "fixture = true\n")
    assert load(named).targets == ("trace/coding-v0",)
    with pytest.raises(InvalidConfig, match=r"embedded\.toml: \[pipeline\] targets \['trace/airline-v0', "
                                            r"'trace/retail-v0'\] are not targets of domain 'coding'"):
        load("embedded", domain="coding")


def test_the_coding_domain_refuses_the_embedded_recipe_and_takes_a_given_model_or_the_fixture(tmp_path):
    path = _toml(tmp_path, '[pipeline]\ndomain = "coding"\n')
    with pytest.raises(InvalidConfig, match=r"domain='coding' needs a base agent that can code: the \[base_agent\] "
                                            r"recipe builds the embedded SmolLM2-135M customer-service agent\. "
                                            r"Set \[base_agent\] model .* or fixture = true"):
        load(path)
    assert load(path, "default", {"base_agent": {"fixture": True}}).table(BaseAgentTable).fixture is True
    given = load(path, "default", {"base_agent": {"model": str(FIXTURE)}})
    assert given.table(BaseAgentTable).model == str(FIXTURE)
    with pytest.raises(InvalidConfig, match=r"\[base_agent\] base_url='http://gpu:8000/v1' needs model"):
        load(path, "default", {"base_agent": {"fixture": True, "base_url": "http://gpu:8000/v1"}})
    # the customer-service recipe table stays the recipe's alone when the new keys are absent
    assert not {"model", "base_url", "served_model"} & set(load().table(BaseAgentTable).values())


def test_the_shipped_coding_configuration_is_model_scale_and_its_smoke_budget_the_fixture():
    config = load("coding")
    agent = config.table(BaseAgentTable)
    assert agent.model and agent.base_url and not agent.fixture
    assert config.train["backend"] == "vllm"
    smoke = load("coding", "smoke")
    assert smoke.table(BaseAgentTable).fixture is True and smoke.train["backend"] != "vllm"
    from trace_gym.pipeline.stages.train import train_config

    for env_id in DOMAIN.capability_env_ids:  # both recipes are valid trainer configs for the coding envs
        assert train_config(config, env_id).env_kwargs["prompt_style"] == "full"
        assert train_config(smoke, env_id).lora_target_parameters == ()


def test_the_dry_run_plans_the_coding_target_and_the_coding_capability_envs(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRACE_GYM_HOME", str(tmp_path / "home"))
    from trace_gym import rates
    from trace_gym.cli import main
    from trace_gym.pipeline.estimates import player
    from trace_gym.pipeline.plan import dry_run

    assert main(["pipeline", "--domain", "coding", "--dry-run"]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"plan of {REPO / 'configs' / 'coding.toml'} (budget default)")
    assert "the given model /models/Qwen3-30B-A3B" in text and "at most 2 shipped ones" in text
    assert "played on the endpoint http://localhost:8000/v1 (Qwen/Qwen3-30B-A3B)" in text  # rollouts, calibration
    assert "the task router only (no mixture" in text  # a served run composes what the server plays
    assert "4 policies x 32 greedy test episodes" in text and "every row plays on the endpoint" in text

    rates.record(player(1.0), "trace/code_localization-v0", 40, 60 * 10)  # 4 a minute
    smoke = dry_run(domain="coding", budget="smoke")
    calibrate = next(line for line in smoke.splitlines() if line.strip().startswith("calibrate"))
    assert "2.0 min" in calibrate  # 2 coding envs x 2 seeds x 2 samples at 4 a minute; no customer-service env
    assert "the committed test fixture" in smoke

    customer_service = dry_run()
    assert "at most 4 shipped ones" in customer_service


# -- the analysis's capabilities and their envs ------------------------------------------------

def _canned_analysis(monkeypatch, names):
    """`analyze` replaced by one that selects `names` (every shipped capability's status)."""
    import trace_gym.analysis.pipeline as analysis

    def analyze(inputs, out_dir, config):
        return {"capabilities": [{"name": n, "status": "SHIPPED", "mean_delta": 0.5, "mean_cov": 0.5} for n in names]}

    monkeypatch.setattr(analysis, "analyze", analyze)


@pytest.mark.parametrize("domain", ["coding", "customer_service"])
def test_the_analysis_selects_only_the_domains_capabilities_and_each_maps_to_its_shipped_env(tmp_path, monkeypatch,
                                                                                            domain):
    from trace_gym.pipeline.stages import analysis, audit, envs
    from trace_gym.pipeline.stages.rollouts import Rollouts

    config = load(None, overrides={"base_agent": {"fixture": True}}, domain=domain)
    _canned_analysis(monkeypatch, [cap.LOCALIZATION, cap.PRECISION, cap.REPRODUCTION])
    state = _state(config, tmp_path, rollouts=Rollouts({}))
    selected = state.records["analysis"] = analysis.STAGE.run(tmp_path, state)
    status = {c.name: c.status for c in selected.capabilities}
    ours, other = ((cap.CODING, cap.CUSTOMER_SERVICE) if domain == "coding" else (cap.CUSTOMER_SERVICE, cap.CODING))
    assert all(status[n] == "SHIPPED" for n in status if n in ours)
    assert all(status[n] == "NOT_SELECTED" for n in status if n in other)
    assert all(f"another domain than {domain!r}" in note for note in selected.notes or [])

    chosen = state.records["envs"] = envs.STAGE.run(tmp_path, state)
    expected = ({cap.LOCALIZATION: "trace/code_localization-v0", cap.REPRODUCTION: "trace/issue_reproduction-v0"}
                if domain == "coding" else {cap.PRECISION: "trace/tool_calling_precision-v0"})
    assert {e.capability: e.env_id for e in chosen.envs} == expected
    if domain == "coding":  # the domain record's envs
        assert set(expected.values()) == set(DOMAIN.capability_env_ids)
    assert chosen.notes == (selected.notes or [])  # the report says why the other domain's were left out
    audited = audit.STAGE.run(tmp_path, state)
    assert [e.env_id for e in audited.trainable] == list(expected.values())  # shipped: trusted


# -- end to end on CPU --------------------------------------------------------------------------

@needs_sandbox
@pytest.mark.slow
def test_the_coding_pipeline_runs_end_to_end_on_the_fixture_and_reuses_every_stage(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from trace_gym.pipeline.run import run_pipeline

    started = time.perf_counter()
    state = run_pipeline(None, tmp_path / "run", "smoke", overrides=MICRO, domain="coding")
    assert time.perf_counter() - started < 180, "the micro budget's coding pipeline takes at most 3 minutes"
    from trace_gym.pipeline.stages import analysis, calibrate, compose, eval, rollouts, train

    assert state.config.source == str(REPO / "configs" / "coding.toml")
    agent = state.get(BASE_AGENT)
    assert Path(agent.path) == FIXTURE and "served_model" not in agent.to_json()
    assert list(state.get(rollouts.STAGE).files) == [DOMAIN.target_env_id]
    records = [json.loads(line) for line in Path(state.get(rollouts.STAGE).files[DOMAIN.target_env_id].path)
               .read_text().splitlines()]
    assert len(records) == 2 and all(r["capabilities_needed"] == list(cap.CODING) for r in records)
    selected = [c.name for c in state.get(analysis.STAGE).capabilities if c.status != "NOT_SELECTED"]
    assert selected and set(selected) <= set(cap.CODING)
    trained = set(state.get(train.STAGE).adapters)
    assert trained and trained <= set(DOMAIN.capability_env_ids)
    assert set(state.get(calibrate.STAGE).envs) == trained and state.find(compose.STAGE) is not None
    order = state.get(eval.STAGE).order
    assert order[0] == "base" and {"router", "mixture"} <= set(order)
    assert set(state.get(eval.STAGE).table["base"]) == {DOMAIN.target_env_id}
    report = (tmp_path / "run" / "report.md").read_text()
    assert "(greedy, full prompts)" in report and "| trace/coding-v0 | mixture vs base |" in report

    again = run_pipeline(None, tmp_path / "run", "smoke", overrides=MICRO, domain="coding")
    assert set(again.run.skipped) == set(again.run.seconds)


def _scripted(body):
    """A scripted coding agent behind the endpoint: report a wrong location where it can,
    else submit at once."""
    from tests.agents.fake_server import tool_call

    names = {t["function"]["name"] for t in body.get("tools") or []}
    if "report_location" in names:
        return "ok", tool_call("report_location", {"file": "nowhere.py", "function": "nothing"})
    return "ok", tool_call("submit", {})


@needs_sandbox
def test_the_base_agents_own_episodes_play_on_the_endpoint_and_the_adapters_on_its_weights(tmp_path):
    pytest.importorskip("torch")
    from tests.agents.fake_server import FakeServer
    from trace_gym.pipeline.stages import audit, calibrate, eval, rollouts, train

    with FakeServer(_scripted) as server:
        config = load("coding", "smoke", {**MICRO, "base_agent": {
            "fixture": False, "model": str(FIXTURE), "base_url": server.url, "served_model": "coder"}})
        state = _state(config, tmp_path)
        agent = state.records["base_agent"] = BASE_AGENT.run(tmp_path / "agent", state)
        assert agent.path == str(FIXTURE) and agent.served_model == "coder"
        runs = rollouts.STAGE.run(tmp_path / "rollouts", state)
        after_rollouts = len(server.requests)
        env_id = "trace/code_localization-v0"
        trainable = audit.AuditedEnv(cap.LOCALIZATION, env_id, "shipped", "in process", "")
        state.records["audit"] = audit.Audited([trainable], [trainable])
        calibration = calibrate.STAGE.run(tmp_path / "calibrate", state).envs
        state.records["train"] = train.Adapters({env_id: train.Adapter("unused", "", 0, "")})
        policies = {**BASE_AGENT.contenders(state, 16), **train.STAGE.contenders(state, 16)}
        state.stages = [BASE_AGENT, eval.STAGE]  # the base row alone
        table = eval.STAGE.run(tmp_path / "eval", state).table
    assert len(server.requests) == after_rollouts + 2 + 2  # 2 calibration samples, 2 test seeds: one turn each
    assert {r["model"] for r in server.requests} == {"coder"} and {r["max_tokens"] for r in server.requests} == {16}
    temperatures = [r["temperature"] for r in server.requests]
    assert set(temperatures[:after_rollouts]) == {0.0} and temperatures[after_rollouts:after_rollouts + 2] == [1.0] * 2
    assert runs.files[DOMAIN.target_env_id].pass_rate == 0.0  # submitted without a fix
    assert calibration[env_id].mean_reward == 0.0 and table["base"][DOMAIN.target_env_id].episodes == 2
    record = json.loads(Path(runs.files[DOMAIN.target_env_id].path).read_text().splitlines()[0])
    assert record["run"]["policy"]["name"] == "endpoint" and record["run"]["policy"]["model"] == "coder"
    assert record["run"]["env_kwargs"]["prompt_style"] == "full"
    # the adapters play on the server too, which loads each at runtime
    adapter = policies[f"adapter {cap.LOCALIZATION}"].spec
    assert adapter.name == "endpoint" and adapter.kwargs["adapter"] == "unused"
    assert adapter.kwargs["model"] == "coder" and adapter.kwargs["base_url"] == server.url


@needs_sandbox
def test_a_served_run_composes_the_router_only_and_plays_adapters_and_router_on_the_server(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from tests.trainer.fake_vllm import FakeVLLM
    from trace_gym.agents.endpoint import adapter_name
    from trace_gym.pipeline.stages import compose, eval, train

    torch.manual_seed(0)
    get_peft_model(AutoModelForCausalLM.from_pretrained(FIXTURE), LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)).save_pretrained(
        tmp_path / "adapter")
    env_id = "trace/code_localization-v0"
    adapters = {env_id: train.Adapter(str(tmp_path / "adapter"), "", 0, "")}
    with FakeVLLM(FIXTURE, served_name="coder") as server:
        config = load("coding", "smoke", {**MICRO, "base_agent": {
            "fixture": False, "model": str(FIXTURE), "base_url": server.url, "served_model": "coder"}})
        state = _state(config, tmp_path)
        state.records["base_agent"] = BASE_AGENT.run(tmp_path / "agent", state)
        state.records["train"] = train.Adapters(adapters)
        composed = state.records["compose"] = compose.STAGE.run(tmp_path / "compose", state)
        state.stages = [BASE_AGENT, train.STAGE, compose.STAGE, eval.STAGE]
        policies = {**BASE_AGENT.contenders(state, 16), **train.STAGE.contenders(state, 16),
                    **compose.STAGE.contenders(state, 16)}
        table = eval.STAGE.run(tmp_path / "eval", state).table
    assert composed.routing["note"] == compose.SERVED_MIXTURE and not (tmp_path / "compose" / "mixture").exists()
    router = json.loads((tmp_path / "compose" / "router.json").read_text())
    assert router["adapters"] == {cap.LOCALIZATION: str((tmp_path / "adapter").resolve())}
    assert list(policies) == ["base", f"adapter {cap.LOCALIZATION}", "router"]  # no mixture: it needs the weights here
    name = adapter_name(tmp_path / "adapter")
    assert server.events == [("load", name)]
    assert {c["model"] for c in server.chats} == {"coder", name}  # the base's and the router's rows, the adapter's
    assert sum(bool(c.get("structured_outputs")) for c in server.chats) == 2  # the router: one decision per seed
    assert all(table[label][DOMAIN.target_env_id].episodes == 2 for label in policies)
