"""The OpenVINO GenAI rollout backend (`trace_gym.agents.openvino`) on the committed tiny
fixture, exported as a float32 IR and run with the f32 precision hint: the same greedy
transcripts as the torch engine, log-probabilities under the sampler at T = 1 and T = 0.7,
seeded sampling that reproduces itself, LoRA adapters as peft applies them, and whole
episodes through the driver. Skipped (with the reason) where openvino-genai is not installed."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from tests.conftest import REPO
from trace_gym.driver import EpisodeRequest, play
from trace_gym.errors import InvalidConfig

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"
RETAIL = {"env_id": "trace/retail-v0", "env_kwargs": {"prompt_style": "compact"}}
PRECONDITION = "trace/precondition_verification-v0"
TOKENS = 16


def _needs_openvino() -> None:
    for module in ("openvino_genai", "openvino_tokenizers"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install 'trace-gym[openvino]')")
    pytest.importorskip("torch")
    pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def ir(tmp_path_factory):
    """The fixture's fp32 IR, exported once for the module (into a temporary directory, so
    that each run exports it afresh)."""
    _needs_openvino()
    from trace_gym.agents.openvino import export

    return export(FIXTURE, tmp_path_factory.mktemp("ov") / "tiny_agent.openvino-fp32", "fp32")


def _policy(ir, **kwargs):
    from trace_gym.agents.openvino import OpenVINOPolicy

    kwargs = {"temperature": 0.0, "max_new_tokens": TOKENS, "dtype": "float32", "weight_format": "fp32",
              "threads": 2, **kwargs}
    return OpenVINOPolicy(FIXTURE, ir_dir=ir, **kwargs)


def _played(episodes, policy, **kwargs):
    return sorted(play(episodes, policy, **{**RETAIL, "in_flight": 3, **kwargs}), key=lambda p: (p.seed, p.episode.sample))


def _tokens(played):
    return [[t.completion_ids for t in p.turns] for p in played]


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """A random LoRA on every projection of the fixture (lora_alpha / r = 2, so a wrong alpha
    would show)."""
    _needs_openvino()
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32)
    lora = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, init_lora_weights=False, target_modules=[
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    path = tmp_path_factory.mktemp("lora") / "adapter"
    lora.save_pretrained(path)
    return path


def _hf_greedy(model, prompt, stop):
    """Greedy tokens of a transformers (or peft) model, through its own `generate`."""
    import torch

    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                             max_new_tokens=TOKENS, do_sample=False, eos_token_id=stop, pad_token_id=stop)
    return [int(t) for t in out[0, len(prompt):]]


def _logprobs(model, prompt, completion, temperature):
    """log_softmax(logits / T) of each completion token, teacher-forced through transformers."""
    import torch

    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + completion])).logits[0].float()
    logits = logits[len(prompt) - 1: len(prompt) - 1 + len(completion)]
    logp = torch.log_softmax(logits / temperature, -1)
    return logp.gather(-1, torch.tensor(completion)[:, None])[:, 0]


# -- packaging and export ------------------------------------------------------------------------

def test_missing_openvino_says_how_to_install(monkeypatch):
    from trace_gym.agents import openvino

    monkeypatch.setitem(sys.modules, "openvino_genai", None)  # import fails as if not installed
    with pytest.raises(InvalidConfig, match=r"pip install 'trace-gym\[openvino\]'"):
        openvino.export(FIXTURE)


def test_export_is_cached_and_redone_when_stale(ir, tmp_path):
    from trace_gym.agents.openvino import MARKER, export
    from trace_gym.provenance import dir_sha256

    marker = json.loads((ir / MARKER).read_text())
    assert marker["source_sha256"] == dir_sha256(FIXTURE) and marker["weight_format"] == "fp32"
    assert {"openvino_model.xml", "openvino_model.bin", "openvino_tokenizer.xml", "openvino_detokenizer.xml",
            "config.json"} <= {p.name for p in ir.iterdir()}
    started = time.perf_counter()
    assert export(FIXTURE, ir, "fp32") == ir
    assert time.perf_counter() - started < 2.0  # current: nothing converted
    assert [p.name for p in ir.parent.iterdir() if p.name.startswith(".")] == []  # no temporary left

    stale = tmp_path / "stale"
    stale.mkdir()
    (stale / MARKER).write_text(json.dumps({**marker, "source_sha256": "0" * 64}))
    (stale / "leftover").write_text("from an older export")
    assert export(FIXTURE, stale, "fp32") == stale
    assert json.loads((stale / MARKER).read_text())["source_sha256"] == marker["source_sha256"]
    assert not (stale / "leftover").exists()  # replaced whole, not patched
    assert [p.name for p in tmp_path.iterdir()] == ["stale"]


def test_export_refuses_a_place_inside_the_model(ir, tmp_path):
    from trace_gym.agents.openvino import export

    with pytest.raises(InvalidConfig, match="inside the model directory"):
        export(FIXTURE, FIXTURE / "openvino-fp32", "fp32")
    assert not (FIXTURE / "openvino-fp32").exists()


@pytest.mark.parametrize("kwargs, match", [({"weight_format": "int4"}, "weight_format"),
                                           ({"dtype": "float16"}, "dtype"),
                                           ({"temperature": -1.0}, "temperature"),
                                           ({"cache_gb": 0}, "cache_gb")])
def test_invalid_settings_are_refused(ir, kwargs, match):
    with pytest.raises(InvalidConfig, match=match):
        _policy(ir, **kwargs)


# -- agreement with the torch engine ------------------------------------------------------------

def test_greedy_transcripts_equal_the_torch_engine(ir):
    """Multi-turn episodes (the prefix cache serves each conversation's earlier turns)."""
    from trace_gym.agents.local import LocalModelPolicy

    episodes = [EpisodeRequest(seed) for seed in range(2)]
    ours = _played(episodes, _policy(ir))
    torch_engine = _played(episodes, LocalModelPolicy(FIXTURE, temperature=0.0, max_new_tokens=TOKENS,
                                                      dtype="float32", threads=2))
    assert all(len(p.turns) >= 2 for p in ours)
    assert [p.messages for p in ours] == [p.messages for p in torch_engine]
    assert _tokens(ours) == _tokens(torch_engine)
    gap = max(abs(a - b) for p, q in zip(ours, torch_engine) for s, t in zip(p.turns, q.turns)
              for a, b in zip(s.logprobs, t.logprobs))
    assert gap < 1e-4, gap  # raw log_softmax at temperature 0, in both


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_are_the_samplers(ir, temperature):
    """log_softmax(logits / T) of the sampled tokens, as torch computes it."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32).eval()
    played = _played([EpisodeRequest(seed) for seed in range(2)], _policy(ir, temperature=temperature))
    gap = 0.0
    for turn in (t for p in played for t in p.turns):
        expected = _logprobs(model, turn.prompt_ids, turn.completion_ids, temperature)
        assert len(turn.logprobs) == len(turn.completion_ids)
        gap = max(gap, float((expected - torch.tensor(turn.logprobs)).abs().max()))
    assert gap < 1e-4, gap


def test_genai_reports_logprobs_before_temperature(ir):
    """Why the policy divides the logits inside the graph: GenAI's own log-probabilities at
    T = 0.7 are log_softmax(logits), not log_softmax(logits / T) (2026.4.1)."""
    import numpy as np
    import openvino as ov
    import openvino_genai as g
    import torch
    from transformers import AutoModelForCausalLM

    policy = _policy(ir)
    prompt = policy.tokenizer.encode("<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n")
    config = policy._config(seed=3)
    config.do_sample, config.temperature, config.max_new_tokens = True, 0.7, 12
    handle = policy.pipeline.add_request(0, ov.Tensor(np.asarray([prompt], dtype=np.int64)), config)
    while policy.pipeline.has_non_finished_requests():
        policy.pipeline.step()
    out = handle.read_all()[0]
    tokens, reported = list(out.generated_ids), torch.tensor(list(out.generated_log_probs))
    model = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32).eval()
    assert float((_logprobs(model, prompt, tokens, 1.0) - reported).abs().max()) < 1e-4
    assert float((_logprobs(model, prompt, tokens, 0.7) - reported).abs().max()) > 0.05
    assert g.GenerationStatus.FINISHED == handle.get_status()


def test_seeded_sampling_reproduces_itself(ir):
    policy = _policy(ir, temperature=1.0, seed=5)
    episodes = [EpisodeRequest(seed, sample) for seed in range(2) for sample in range(2)]
    first = _played(episodes, policy)
    assert _tokens(_played(episodes, policy)) == _tokens(first)
    # an episode's tokens do not depend on what else is in flight
    alone = _played(episodes, _policy(ir, temperature=1.0, seed=5), in_flight=1)
    assert _tokens(alone) == _tokens(first)
    assert [p.messages for p in alone] == [p.messages for p in first]
    # the group's samples differ from each other, and another policy seed gives other tokens
    assert _tokens(first)[0] != _tokens(first)[1]
    assert _tokens(_played(episodes, _policy(ir, temperature=1.0, seed=6))) != _tokens(first)


# -- LoRA -----------------------------------------------------------------------------------------

def test_adapter_is_applied_as_peft_applies_it(ir, adapter):
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from trace_gym.agents.chat import render_prompt
    from trace_gym.agents.openvino import adapter_alpha
    from trace_gym.driver import make_env

    assert adapter_alpha(adapter) == 2.0
    policy = _policy(ir, adapter=adapter)
    assert policy.name == "openvino:tiny_agent+adapter" and policy.adapter_alpha == 2.0
    peft = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32),
                                     str(adapter)).eval()
    base = AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32).eval()
    env = make_env(RETAIL["env_id"], **RETAIL["env_kwargs"])
    episodes = [EpisodeRequest(seed) for seed in range(3)]
    first_turns = [p.turns[0] for p in _played(episodes, policy)]
    differs = 0
    for episode, turn in zip(episodes, first_turns):
        obs, info = env.reset(seed=episode.seed)
        prompt = render_prompt(policy.tokenizer, obs, info["tools"])
        assert turn.prompt_ids == prompt
        assert turn.completion_ids == _hf_greedy(peft, prompt, policy.stop_id)
        differs += turn.completion_ids != _hf_greedy(base, prompt, policy.stop_id)
    assert differs > 0


def test_set_adapter_swaps_between_iterations(ir, adapter):
    """A new pipeline each time: the first transcripts come back exactly."""
    policy = _policy(ir)
    episodes = [EpisodeRequest(seed) for seed in range(2)]
    base = _tokens(_played(episodes, policy))
    policy.set_adapter(adapter)
    assert policy.name == "openvino:tiny_agent+adapter"
    adapted = _tokens(_played(episodes, policy))
    assert adapted != base
    assert adapted == _tokens(_played(episodes, _policy(ir, adapter=adapter)))
    policy.set_adapter(None)
    assert policy.name == "openvino:tiny_agent" and _tokens(_played(episodes, policy)) == base


def test_adapter_settings_one_alpha_cannot_express_are_refused(ir, adapter, tmp_path):
    from trace_gym.agents.openvino import adapter_alpha

    (tmp_path / "adapter_model.safetensors").write_bytes((adapter / "adapter_model.safetensors").read_bytes())
    config = json.loads((adapter / "adapter_config.json").read_text())
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "alpha_pattern": {"q_proj": 4}}))
    with pytest.raises(InvalidConfig, match="alpha_pattern"):
        adapter_alpha(tmp_path)
    (tmp_path / "adapter_config.json").write_text(json.dumps({**config, "use_rslora": True}))
    assert adapter_alpha(tmp_path) == pytest.approx(16 / 8 ** 0.5)
    with pytest.raises(InvalidConfig, match="not a peft adapter"):
        _policy(ir, adapter=tmp_path / "nowhere")


# -- through the driver -----------------------------------------------------------------------------

def test_play_returns_finished_episodes_with_turns(ir):
    from trace_gym.driver import BatchedPolicy

    policy = _policy(ir, temperature=1.0)
    assert isinstance(policy, BatchedPolicy)
    episodes = [EpisodeRequest(seed, hint=seed % 2 == 0) for seed in range(5)]
    played = list(play(episodes, policy, env_id=PRECONDITION, in_flight=3))
    assert sorted(p.seed for p in played) == list(range(5))
    for p in played:
        assert p.error is None and p.termination_reason is not None and p.turns
        assert p.policy == "openvino:tiny_agent"
        for turn in p.turns:
            assert len(turn.logprobs) == len(turn.completion_ids) <= TOKENS
            assert all(x <= 0.0 for x in turn.logprobs)
            assert (turn.loss_prompt_ids != turn.prompt_ids) == p.episode.hint
    assert policy._pending == {}


def test_fingerprint_names_what_decides_the_outputs(ir, adapter):
    from trace_gym.provenance import dir_sha256

    fingerprint = _policy(ir, adapter=adapter, temperature=0.7, top_p=0.9).fingerprint()
    assert fingerprint["model_sha256"] == dir_sha256(FIXTURE)
    assert fingerprint["adapter_sha256"] == dir_sha256(adapter)
    assert {k: fingerprint[k] for k in ("temperature", "top_p", "max_new_tokens", "dtype", "adapter_alpha")} == \
        {"temperature": 0.7, "top_p": 0.9, "max_new_tokens": TOKENS, "dtype": "float32", "adapter_alpha": 2.0}


def test_a_local_policy_runs_on_openvino_by_default(tmp_path, monkeypatch):
    """`make_policy("local")` (what `--policy local` builds) is an OpenVINO policy unless
    `engine="torch"`; the engine is part of a run's fingerprint; settings only the torch
    engine has, and unknown engines, are refused by name."""
    _needs_openvino()

    from trace_gym.agents import make_policy
    from trace_gym.agents.local import LocalModelPolicy
    from trace_gym.agents.openvino import OpenVINOPolicy, default_ir_dir
    from trace_gym.agents.spec import PolicySpec
    from trace_gym.runs import policy_fingerprint

    monkeypatch.setenv("TRACE_GYM_HOME", str(tmp_path))
    policy = make_policy("local", model_path=FIXTURE, temperature=0.0, max_new_tokens=4, kv_reuse=False)
    assert isinstance(policy, OpenVINOPolicy) and not policy.kv_reuse
    assert policy.ir_dir == default_ir_dir(FIXTURE) and policy.ir_dir.is_relative_to(tmp_path)  # not in the checkout
    assert isinstance(make_policy("local", engine="torch", model_path=FIXTURE, threads=1), LocalModelPolicy)
    with pytest.raises(InvalidConfig, match="lockstep exists only on engine='torch'"):
        make_policy("local", model_path=FIXTURE, lockstep=True)
    with pytest.raises(InvalidConfig, match="engine='onnx' is invalid; allowed: openvino, torch"):
        make_policy("local", engine="onnx", model_path=FIXTURE)
    default = policy_fingerprint(PolicySpec("local", {"model_path": str(FIXTURE)}))
    torch_engine = policy_fingerprint(PolicySpec("local", {"model_path": str(FIXTURE), "engine": "torch"}))
    assert default["engine"] == "openvino" and torch_engine["engine"] == "torch"


def test_constrained_tool_calls_are_valid_calls_of_the_offered_tools(ir):
    """With `constrain_calls`, every tool call the fixture finishes names an offered tool and
    has arguments valid against its schema; without it, the same episodes write calls that are
    not (so the check can fail). A call cut by `max_new_tokens` is unfinished either way."""
    import fastjsonschema

    from trace_gym.actions import parse_text
    from trace_gym.schema import compile_arguments_validator

    def finished_calls(constrain: bool) -> tuple[int, int]:
        policy = _policy(ir, temperature=1.0, max_new_tokens=64, constrain_calls=constrain)
        valid = invalid = 0
        for p in _played([EpisodeRequest(seed) for seed in range(8)], policy, in_flight=8):
            schemas = {t["function"]["name"]: t["function"]["parameters"] for t in _tools(p)}
            for turn in p.turns:
                text = policy.tokenizer.decode(turn.completion_ids, skip_special_tokens=False)
                if "<tool_call>" not in text or turn.completion_ids[-1] != policy.stop_id:
                    continue
                for call in parse_text(text.removesuffix("<|im_end|>")).calls:
                    try:
                        compile_arguments_validator(schemas[call.name])(call.arguments)
                    except (KeyError, fastjsonschema.JsonSchemaValueException):  # no such tool, bad arguments
                        invalid += 1
                    else:
                        valid += call.valid
                        invalid += not call.valid
        return valid, invalid

    valid, invalid = finished_calls(True)
    assert valid > 0 and invalid == 0
    assert finished_calls(False)[1] > 0


def _tools(played):
    from trace_gym.driver import make_env

    env = make_env(RETAIL["env_id"], **RETAIL["env_kwargs"])
    _, info = env.reset(seed=played.seed)
    env.close()
    return info["tools"]


def _config_dir(tmp_path, **config):
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_the_cache_is_sized_from_the_models_keys_and_values(tmp_path):
    from trace_gym.agents.openvino import auto_cache_gb

    # SmolLM2-135M's shape: 2 x 30 layers x 3 heads x 64 x 2 bytes = 23,040 bytes a token;
    # 64 sequences of 8,192 tokens want 12.08 GB, so 13 GB before the caps
    smol = _config_dir(tmp_path, num_hidden_layers=30, num_key_value_heads=3, num_attention_heads=9,
                       head_dim=64, hidden_size=576, max_position_embeddings=8192)
    quarter = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4 // 10**9
    assert auto_cache_gb(smol, most_gb=100) == max(1, min(13, quarter))
    assert auto_cache_gb(smol) == max(1, min(4, quarter))  # the bound that keeps 64 episodes in 8 GiB
    assert auto_cache_gb(smol, kv_bytes=4, sequences=16, most_gb=100) == max(1, min(7, quarter))  # 6.04 GB
    assert auto_cache_gb(FIXTURE) == 1  # a tiny model gets the least


def test_the_pipeline_is_built_with_the_sized_cache(ir):
    from trace_gym.agents.openvino import auto_cache_gb

    assert _policy(ir).cache_gb == auto_cache_gb(FIXTURE, kv_bytes=4) == 1
    assert _policy(ir, cache_gb=2).cache_gb == 2


def test_a_new_episode_waits_until_the_conversations_under_way_fit_with_it(ir):
    """Between its turns an episode's earlier turns stay in GenAI's prefix cache; a new episode
    admitted into a cache those conversations already fill evicts them, and each of their
    turns is prefilled whole again. So a new episode starts only while the conversations
    under way (in flight or between turns) fit with it; the transcripts do not change."""
    from trace_gym.agents.openvino import BLOCK

    episodes = [EpisodeRequest(seed) for seed in range(6)]
    roomy = _played(episodes, _policy(ir), in_flight=6)
    assert max(len(p.turns) for p in roomy) >= 2  # episodes do come back between turns
    tight = _policy(ir)
    first = _played(episodes[:1], _policy(ir))[0].turns[0]
    room = -(-(len(first.prompt_ids) + TOKENS) // BLOCK) * BLOCK * 2 + BLOCK  # about two turns
    tight.cache_tokens = room
    admitted, released = tight._admit, tight.release
    under_way, most = set(), [0]  # episodes with a turn started and not yet ended

    def admit():
        admitted()
        under_way.update(id(live) for live, _, _, _ in tight._pending.values())
        most[0] = max(most[0], len(under_way))

    def release(live):
        released(live)
        under_way.discard(id(live))

    tight._admit, tight.release = admit, release
    played = _played(episodes, tight, in_flight=6)
    assert most[0] == 2  # two conversations fill the cache: a third waits for one to end
    assert _tokens(played) == _tokens(roomy)


def test_turns_wait_for_room_in_the_cache_and_play_as_they_would_with_room(ir):
    """GenAI drops every turn in flight when they outgrow its cache (IGNORED): the policy
    admits a turn only while the turns in flight fit, and the transcripts do not change."""
    from trace_gym.agents.openvino import BLOCK

    episodes = [EpisodeRequest(seed) for seed in range(6)]
    roomy = _played(episodes, _policy(ir), in_flight=6)
    tight = _policy(ir)
    first = _played(episodes[:1], _policy(ir))[0].turns[0]
    room = -(-(len(first.prompt_ids) + TOKENS) // BLOCK) * BLOCK * 2 + BLOCK  # about two turns
    tight.cache_tokens = room
    admitted, most = tight._admit, [0]

    def watched():
        admitted()
        in_use = sum(tight._need(prompt) for _, _, prompt, _ in tight._pending.values())
        assert in_use <= room
        most[0] = max(most[0], len(tight._pending))

    tight._admit = watched
    played = _played(episodes, tight, in_flight=6)
    assert most[0] == 2 and not tight._waiting and not tight._pending  # at most two in flight, none left
    assert _tokens(played) == _tokens(roomy)

    # a turn that could not fit alone is refused with both sizes, not dropped by GenAI
    tight.cache_tokens = BLOCK
    with pytest.raises(InvalidConfig, match=r"needs \d+ tokens of key/value cache .* raise cache_gb"):
        _played(episodes[:1], tight)


def test_one_thread_on_an_amx_cpu_computes_in_f32(monkeypatch, tmp_path):
    # OpenVINO's CPU plugin died of SIGFPE compiling a bf16 model for one thread on an AMX Xeon.
    _needs_openvino()
    from trace_gym.agents import openvino

    monkeypatch.setattr(openvino, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16", "amx_bf16"}))
    policy = openvino.OpenVINOPolicy(FIXTURE, dtype="bfloat16", threads=1, ir_dir=tmp_path / "ir")
    assert policy.dtype == "float32" and policy.properties()["INFERENCE_PRECISION_HINT"] == "f32"
    monkeypatch.setattr(openvino, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    assert openvino.OpenVINOPolicy(FIXTURE, dtype="bfloat16", threads=2, ir_dir=tmp_path / "ir").dtype == "bfloat16"
