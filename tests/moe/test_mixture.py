"""The mixture of LoRA experts: gate sizes, the base at init, one expert forced equals that
adapter alone, routed tokens get their own expert's delta only, and save/load."""

from __future__ import annotations

import pytest

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from trace_gym.moe.mixture import Mixture, Route, RoutedLoRALinear, gate_parameter_count

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _base():
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(FIXTURE, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def adapters(tmp_path_factory):
    """Two adapters with non-zero A and B, one on every projection, one on attention only."""
    from peft import LoraConfig, get_peft_model

    out = []
    for i, targets in enumerate((TARGETS, ["q_proj", "v_proj", "o_proj"])):
        torch.manual_seed(i)
        model = get_peft_model(_base(), LoraConfig(r=4, lora_alpha=8, target_modules=targets,
                                                   init_lora_weights=False))
        path = tmp_path_factory.mktemp(f"adapter{i}")
        model.save_pretrained(path)
        out.append(path)
    return out


IDS = torch.tensor([[5, 17, 300, 41, 9, 77, 123, 8, 64, 99, 12, 3]])


def test_gate_sizes_of_the_paper_and_of_the_embedded_default():
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    qwen = Qwen3MoeConfig(num_hidden_layers=48, hidden_size=2048, num_attention_heads=32, num_key_value_heads=4,
                          head_dim=128, moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8,
                          vocab_size=151936, intermediate_size=6144)
    with torch.device("meta"):
        assert gate_parameter_count(Qwen3MoeForCausalLM(qwen), 4) == 491_760
        smol = LlamaConfig(num_hidden_layers=30, hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                           num_key_value_heads=3, vocab_size=49152, tie_word_embeddings=True)
        assert gate_parameter_count(LlamaForCausalLM(smol), 4) == 86_550


def test_at_init_the_mixture_is_the_base_model(adapters):
    reference = _base()(IDS).logits
    mixture = Mixture.from_dirs(_base(), adapters)
    assert torch.equal(mixture.model(IDS).logits, reference)
    assert all((r.logits.argmax(-1) == 0).all() for r in mixture.routes)


def test_forcing_an_expert_is_that_adapter_alone(adapters):
    from peft import PeftModel

    mixture = Mixture.from_dirs(_base(), adapters)
    for e, path in enumerate(adapters, 1):
        single = PeftModel.from_pretrained(_base(), str(path)).eval()
        expected = single(IDS).logits
        mixture.force(e)
        got = mixture.model(IDS).logits
        assert (got - expected).abs().max().item() < 1e-5
        assert (got - _base()(IDS).logits).abs().max().item() > 1e-3  # the adapter does change the output
    mixture.force(0)
    assert torch.equal(mixture.model(IDS).logits, _base()(IDS).logits)


def test_routed_tokens_get_only_their_own_experts_delta(adapters):
    mixture = Mixture.from_dirs(_base(), adapters)
    generator = torch.Generator().manual_seed(3)
    for g in mixture.gates:  # gates that spread the tokens over all three slots
        torch.nn.init.normal_(g.linear.weight, std=3.0, generator=generator)
        g.linear.bias.data.zero_()
    hard = mixture.model(IDS).logits
    choices = [r.logits.argmax(-1) for r in mixture.routes]
    assert len(torch.unique(torch.cat(choices))) == 3
    # the same choices as one-hot weights of the dense mixture, which runs every expert on every token
    mixture.soft(True)
    for g, c in zip(mixture.gates, choices):
        g.linear.weight.data.zero_()
        g.linear.bias.data.zero_()
    onehot = [torch.nn.functional.one_hot(c, 3).float() for c in choices]
    handles = [layer.input_layernorm.register_forward_hook(lambda m, i, o, r=r, p=p: setattr(r, "probs", p))
               for layer, r, p in zip(mixture.model.model.layers, mixture.routes, onehot)]
    try:
        dense = mixture.model(IDS).logits
    finally:
        for h in handles:
            h.remove()
    assert (hard - dense).abs().max().item() < 1e-5


def test_a_routed_module_adds_each_tokens_expert_delta_to_that_token_only():
    torch.manual_seed(0)
    base = torch.nn.Linear(8, 6)
    A = [torch.randn(2, 8), None, torch.randn(3, 8)]
    B = [torch.randn(6, 2), None, torch.randn(6, 3)]
    route = Route()
    module = RoutedLoRALinear(base, route, A, B, [0.5, 1.0, 2.0])
    x = torch.randn(2, 3, 8)
    choice = torch.tensor([0, 1, 3, 3, 2, 1])  # per flat token: 0 base, e = expert e (2 has no delta here)
    route.index = [(choice == e + 1).nonzero()[:, 0] for e in range(3)]
    y = module(x).reshape(6, 6)
    flat = x.reshape(6, 8)
    for t, e in enumerate(choice.tolist()):
        expected = base(flat[t])
        if e in (1, 3):
            expected = expected + flat[t] @ A[e - 1].T @ B[e - 1].T * [0.5, 1.0, 2.0][e - 1]
        assert torch.allclose(y[t], expected, atol=1e-6)


def test_gates_save_and_load_with_their_adapters(adapters, tmp_path):
    mixture = Mixture.from_dirs(_base(), adapters, ["precondition", "precision"])
    torch.nn.init.normal_(mixture.gates[1].linear.weight, generator=torch.Generator().manual_seed(1))
    mixture.save_gates(tmp_path / "moe")
    again = Mixture.load(_base(), tmp_path / "moe")
    assert again.names == ["base", "precondition", "precision"]
    assert torch.equal(again.model(IDS).logits, mixture.model(IDS).logits)
    size = (tmp_path / "moe" / "gates.safetensors").stat().st_size
    assert size < 10_000  # the gates only, the adapters are referenced


def _examples(tokenizer, n_per_label=3):
    """Scripted trajectories: label 1 talks about cancellations, label 2 about addresses (no
    spaces: the fixture's tokenizer makes each space a token of its own, which both share)."""
    from trace_gym.moe.gates import example

    out = []
    for label, words in ((1, "Cancelled,refunded."), (2, "Addresschanged:newstreet!")):
        for i in range(n_per_label):
            messages = [{"role": "system", "content": "You help customers."},
                        {"role": "user", "content": f"Request {i}."},
                        {"role": "assistant", "content": words}]
            out.append(example(tokenizer, messages, [], label, 512))
    return out


def test_gate_training_moves_only_the_gates_and_learns_the_labels(adapters, tmp_path):
    from transformers import AutoTokenizer

    from trace_gym.moe.gates import GateConfig, heatmap, routing, train_gates

    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    mixture = Mixture.from_dirs(_base(), adapters, ["cancel", "address"])
    frozen = {n: p.detach().clone() for n, p in mixture.model.named_parameters()}
    data = _examples(tokenizer)
    assert all(any(ex.assistant) for ex in data)
    before = routing(mixture, data)
    assert before["accuracy"] == {"cancel": 0.0, "address": 0.0}  # the base takes every token at init
    history = train_gates(mixture, data, GateConfig(epochs=20, lr=5e-2))
    assert history[-1]["label"] < history[0]["label"]
    assert all(torch.equal(p, frozen[n]) for n, p in mixture.model.named_parameters())
    after = routing(mixture, data)
    # every token but the shared end-of-turn one can be told apart
    assert after["accuracy"]["cancel"] > 0.75 and after["accuracy"]["address"] > 0.75
    assert len(after["load"]) == len(mixture.gates) and abs(sum(after["load"][0]) - 1.0) < 1e-6
    png = heatmap(mixture, data[0], tmp_path / "routing.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_gate_training_refuses_a_trainable_backbone(adapters):
    from transformers import AutoTokenizer

    from trace_gym.moe.gates import train_gates

    mixture = Mixture.from_dirs(_base(), adapters)
    mixture.model.lm_head.weight.requires_grad_(True)
    with pytest.raises(AssertionError, match="trainable parameters"):
        train_gates(mixture, _examples(AutoTokenizer.from_pretrained(FIXTURE), 1))


# -- fused MoE experts (peft target_parameters, the GPU recipe's shape) ---------------------

MOE_IDS = torch.tensor([[5, 17, 300, 41, 9, 77, 123, 8]])


@pytest.fixture(scope="module")
def moe(tmp_path_factory):
    """A tiny Qwen3-MoE and two adapters on its attention and its fused experts (non-zero
    A and B), with the GPU recipe's targets."""
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

    from trace_gym.runconfig import load

    recipe = load(REPO / "configs" / "gpu-qwen3-30b-a3b.toml")["train"]
    torch.manual_seed(0)
    config = Qwen3MoeConfig(vocab_size=512, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                            num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                            num_experts=4, num_experts_per_tok=2)
    base = tmp_path_factory.mktemp("moe") / "base"
    Qwen3MoeForCausalLM(config).save_pretrained(base)
    adapters = []
    for i in range(2):
        torch.manual_seed(10 + i)
        model = get_peft_model(_moe(base), LoraConfig(r=4, lora_alpha=8, target_modules=recipe["lora_targets"],
                                                      target_parameters=recipe["lora_target_parameters"],
                                                      init_lora_weights=False))
        with torch.no_grad():  # peft draws B at zero even so for parameters: a visible delta
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 0.5)
        path = tmp_path_factory.mktemp(f"moe-adapter{i}")
        model.save_pretrained(path)
        adapters.append(path)
    return base, adapters


def _moe(path):
    from trace_gym.agents.causal_lm import load_causal_lm

    return load_causal_lm(path, torch.float32).eval()


def test_fused_experts_load_and_one_forced_expert_equals_its_adapter_alone(moe):
    from peft import PeftModel

    base, adapters = moe
    plain = _moe(base)(MOE_IDS).logits
    mixture = Mixture.from_dirs(_moe(base), adapters)
    assert any(a.P for a in mixture.adapters)  # the experts' parameters were read, not skipped
    with torch.no_grad():
        assert torch.equal(mixture.model(MOE_IDS).logits, plain)  # at init: the base
        for e, path in enumerate(adapters, 1):
            alone = PeftModel.from_pretrained(_moe(base), str(path)).eval()(MOE_IDS).logits
            assert not torch.allclose(alone, plain, atol=1e-3)
            mixture.force(e)
            torch.testing.assert_close(mixture.model(MOE_IDS).logits, alone, atol=1e-5, rtol=1e-5)
            mixture.soft(True)  # soft with all weight on expert e: the same outputs
            for g in mixture.gates:
                with torch.no_grad():
                    g.linear.bias.zero_()
                    g.linear.bias[e] = 50.0
            mixture.force(None)
            torch.testing.assert_close(mixture.model(MOE_IDS).logits, alone, atol=1e-4, rtol=1e-4)
            mixture.soft(False)
            for g in mixture.gates:
                with torch.no_grad():
                    g.linear.bias.zero_()
                    g.linear.bias[0] = 5.0


def test_an_adapter_the_mixture_cannot_take_is_refused_before_any_episode(moe, adapters, tmp_path, monkeypatch):
    from trace_gym.errors import InvalidConfig
    from trace_gym.moe import composition as composing

    base, moe_adapters = moe
    played = []
    monkeypatch.setattr(composing, "play_successes", lambda *a, **k: played.append(a) or [])
    envs = ["trace/precondition_verification-v0", "trace/tool_calling_precision-v0"]
    cases = [([str(tmp_path / "missing"), str(moe_adapters[1])], base, r"not a peft adapter directory"),
             ([str(adapters[0]), str(adapters[1])], base, r"is not a linear module|another base"),
             ([str(moe_adapters[0]), str(moe_adapters[1])], FIXTURE, r"another base|not a .*module"),
             ([str(moe_adapters[0]), str(moe_adapters[1])], tmp_path / "nowhere", r"is not a model directory")]
    for paths, model, match in cases:
        with pytest.raises(InvalidConfig, match=match):
            composing.compose(model, paths, envs, tmp_path / "out")
    assert played == []
