"""Exporting a transformers causal LM to the OpenVINO IR that `trace_gym.agents.openvino`
runs.

**Export** (`export`) converts the model directory with OpenVINO's own PyTorch converter
(`openvino.convert_model`) and makes its keys and values model state, the layout optimum-intel
produces and GenAI expects (inputs `input_ids`, `attention_mask`, `position_ids`, `beam_idx`;
output `logits`), plus the tokenizer IRs from `openvino_tokenizers`. optimum-intel is not
used: every release that runs with this project's transformers (>= 5.17) pins transformers
< 5.6, and its import fails on 5.24. The IR is cached in trace-gym's cache,
`<cache>/openvino/<model name>-<sha256 prefix>.<format>/` (outside the model directory, whose
sha256 every run records, and outside its parent, which need not be writable), written to a
temporary directory and renamed into place, and skipped while its recorded source sha256
still matches.

**Tempered copies** (`tempered`): GenAI reports log-probabilities under the raw logits, so
for a sampling temperature T other than 0 or 1 the policy runs a copy of the IR that divides
the final hidden state by T before the LM head (logits / T, exactly), cached inside the IR
directory, one per temperature.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

from trace_gym.errors import InvalidConfig

WEIGHT_FORMATS = ("fp16", "fp32")
STOP_TOKEN = "<|im_end|>"
INSTALL = "pip install 'trace-gym[openvino]'"
EXPORTER_VERSION = 1
"""Bumped when the exported IR changes, so that older exports are redone."""
MARKER = "trace_gym_export.json"
_CONFIG_FILES = ("config.json", "generation_config.json")
_TOKENIZER_FILES = ("openvino_tokenizer.xml", "openvino_tokenizer.bin",
                    "openvino_detokenizer.xml", "openvino_detokenizer.bin")


def require_openvino() -> Any:
    """The `openvino_genai` module, or InvalidConfig saying how to install it."""
    try:
        import openvino  # noqa: F401
        import openvino_genai
        import openvino_tokenizers  # noqa: F401
    except ImportError as exc:
        raise InvalidConfig(f"the OpenVINO backend needs openvino-genai and openvino-tokenizers ({exc.name} is "
                            f"missing); install them with `{INSTALL}`") from None
    return openvino_genai


def checked_model_dir(model_dir: str | os.PathLike) -> Path:
    """`model_dir` as a path, or InvalidConfig when it holds no config.json."""
    path = Path(model_dir)
    if not (path / "config.json").is_file():
        raise InvalidConfig(f"model_dir={str(path)!r} is not a model directory (no config.json)")
    return path


def default_ir_dir(model_dir: str | os.PathLike, weight_format: str = "fp16") -> Path:
    """Where `export` caches a model's IR when no `out_dir` is given: in trace-gym's cache
    (`$TRACE_GYM_HOME`, else `~/.cache/trace-gym`), keyed by the model's sha256."""
    from trace_gym.baseagent.weights import cache_home
    from trace_gym.provenance import dir_sha256

    path = Path(model_dir).resolve()
    return cache_home() / "openvino" / f"{path.name}-{dir_sha256(path)[:16]}.{weight_format}"


def _marker(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None


def export(model_dir: str | os.PathLike, out_dir: str | os.PathLike | None = None,
           weight_format: str = "fp16") -> Path:
    """The OpenVINO IR of a transformers causal-LM directory, for `OpenVINOPolicy`: exported
    into `out_dir` (default `default_ir_dir(model_dir, weight_format)`), or left as it is when
    its recorded source sha256, format and exporter version are current. Returns `out_dir`.

    `weight_format` "fp16" stores the weights in float16 (computed at the precision hint),
    "fp32" keeps them in float32."""
    from trace_gym.provenance import dir_sha256

    if weight_format not in WEIGHT_FORMATS:
        raise InvalidConfig(f"weight_format={weight_format!r} is invalid; allowed: {', '.join(WEIGHT_FORMATS)}")
    source = checked_model_dir(model_dir)
    require_openvino()
    dest = Path(out_dir) if out_dir is not None else default_ir_dir(source, weight_format)
    if dest.resolve().is_relative_to(source.resolve()):
        # the model's sha256 (what says the export is current, and every run's record of the
        # model) would then cover the export itself
        raise InvalidConfig(f"out_dir={str(dest)!r} is inside the model directory; put the IR elsewhere")
    want = {"exporter": EXPORTER_VERSION, "source_sha256": dir_sha256(source), "weight_format": weight_format}
    have = _marker(dest)
    if have is not None and all(have.get(k) == v for k, v in want.items()):
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=dest.parent))
    try:
        started = time.perf_counter()
        versions = _convert(source, tmp, weight_format)
        (tmp / MARKER).write_text(json.dumps({**want, "source": str(source.resolve()), **versions,
                                              "export_s": round(time.perf_counter() - started, 3)}, indent=2) + "\n")
        _publish(tmp, dest, want)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _publish(tmp: Path, dest: Path, want: dict[str, Any]) -> None:
    """Rename `tmp` to `dest`, replacing a stale `dest`; a current one that another process
    published meanwhile is kept."""
    if dest.exists():
        have = _marker(dest)
        if have is not None and all(have.get(k) == v for k, v in want.items()):
            return
        stale = Path(tempfile.mkdtemp(prefix=f".{dest.name}.stale-", dir=dest.parent))
        os.replace(dest, stale / "ir")
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.replace(tmp, dest)
    except OSError:
        # another process renamed its own export into place first: keep it if it is current
        have = _marker(dest)
        if have is None or any(have.get(k) != v for k, v in want.items()):
            raise


def _convert(source: Path, dest: Path, weight_format: str) -> dict[str, str]:
    """Convert the model in `source` into `dest`; returns the versions that made it."""
    try:
        import torch
        import transformers
        from transformers import AutoTokenizer
        from transformers.cache_utils import Cache, DynamicLayer

        from trace_gym.agents.causal_lm import load_causal_lm
    except ImportError as exc:
        raise InvalidConfig(f"exporting to OpenVINO needs torch and transformers ({exc.name} is missing); "
                            "install them with `pip install 'trace-gym[train,openvino]'`") from None
    import numpy as np
    import openvino as ov
    from openvino import opset13
    from openvino._offline_transformations import apply_make_stateful_transformation
    from openvino_tokenizers import convert_tokenizer

    model = load_causal_lm(source, torch.float32, attn_implementation="sdpa").eval()
    with torch.no_grad():  # the cache layout (layers, kv heads, head size), read off a forward
        probe = model(input_ids=torch.zeros(1, 2, dtype=torch.long), use_cache=True)
    probe_cache = getattr(probe, "cache", None) or probe.past_key_values
    shapes = [tuple(layer.keys.shape) for layer in probe_cache.layers]
    layers, kv_heads, head_dim = len(shapes), shapes[0][1], shapes[0][3]

    class PastLayer(DynamicLayer):
        """A cache layer that starts from given keys and values (transformers' own starts
        from an empty 1-D tensor, whose concatenation the converter cannot express)."""

        keys: torch.Tensor  # set at construction: never None, unlike a DynamicLayer's before its first update
        values: torch.Tensor

        def __init__(self, keys: torch.Tensor, values: torch.Tensor) -> None:
            super().__init__()
            self.keys, self.values, self.device, self.is_initialized = keys, values, keys.device, True

        def get_seq_length(self) -> int:
            return self.keys.shape[-2]

    class Decoder(torch.nn.Module):
        """The model as a function of flat tensors: (ids, mask, positions, past k/v per layer)
        -> (logits, present k/v per layer). The causal mask is built here from the 2-D mask,
        so the traced graph has no data-dependent branch (transformers skips the mask when it
        sees none is needed, a decision tracing would freeze)."""

        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                    *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
            cache = Cache(layers=[PastLayer(past[2 * i], past[2 * i + 1]) for i in range(layers)])
            q, kv = input_ids.shape[1], attention_mask.shape[1]
            causal = torch.arange(kv)[None, :] <= torch.arange(kv - q, kv)[:, None]              # (q, kv)
            mask = causal[None, None] & attention_mask[:, None, None, :].bool()                  # (B, 1, q, kv)
            out = self.inner(input_ids=input_ids, attention_mask=mask, position_ids=position_ids, cache=cache,
                             use_cache=True)
            present = getattr(out, "cache", None) or out.past_key_values
            return (out.logits, *[t for layer in present.layers for t in (layer.keys, layer.values)])

    batch, past_len, new_len = 2, 3, 4
    example = (torch.randint(0, model.config.vocab_size, (batch, new_len)),
               torch.ones(batch, past_len + new_len, dtype=torch.int64),
               torch.arange(past_len, past_len + new_len)[None].repeat(batch, 1),
               *[torch.randn(batch, kv_heads, past_len, head_dim) for _ in range(2 * layers)])
    kv_names = [f"past_key_values.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    present_names = [f"present.{i}.{kind}" for i in range(layers) for kind in ("key", "value")]
    inputs = [(ov.PartialShape([-1, -1]), ov.Type.i64)] * 3 + \
        [(ov.PartialShape([-1, kv_heads, -1, head_dim]), ov.Type.f32)] * (2 * layers)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about Python branches on shapes: none is data-dependent here
        ov_model = ov.convert_model(Decoder(model), example_input=example, input=inputs)
    # GenAI finds a LoRA's layers by name (`model.layers.0.self_attn.q_proj` inside the node's
    # name); the wrapper's attribute would add `inner.` to every name
    for op in ov_model.get_ops():
        name = op.get_friendly_name()
        for wrapped, plain in (("self.inner.", "self."), ("__module.inner.", "__module.")):
            if name.startswith(wrapped):
                op.set_friendly_name(plain + name[len(wrapped):])
    for port, name in zip(ov_model.inputs, ["input_ids", "attention_mask", "position_ids", *kv_names]):
        port.get_tensor().set_names({name})
    for port, name in zip(ov_model.outputs, ["logits", *present_names]):
        port.get_tensor().set_names({name})
    # keys and values as model state, as optimum-intel's `patch_stateful` does: a beam_idx
    # input reorders them, the state is initialised to zeros of length 0
    beam_idx = opset13.parameter(name="beam_idx", dtype=ov.Type.i32, shape=ov.PartialShape([-1]))
    beam_idx.output(0).get_tensor().add_names({"beam_idx"})
    ov_model.add_parameters([beam_idx])
    for name in kv_names:
        port = ov_model.input(name)
        consumers = port.get_target_inputs()
        gather = opset13.gather(port, beam_idx, opset13.constant(0))
        for consumer in consumers:
            consumer.replace_source_output(gather.output(0))
    ov_model.validate_nodes_and_infer_types()
    apply_make_stateful_transformation(ov_model, dict(zip(kv_names, present_names)))
    ids = ov_model.input("input_ids")
    rows = opset13.gather(opset13.shape_of(ids, output_type="i64"), opset13.constant([0]), opset13.constant(0))
    for op in ov_model.get_ops():
        if op.get_type_name() == "ReadValue":
            dims = [d.min_length for d in op.get_output_partial_shape(0)]
            parts = [rows if i == 0 else opset13.constant(np.array([d], dtype=np.int64)) for i, d in enumerate(dims)]
            zeros = opset13.broadcast(opset13.constant(0.0, dtype=op.get_output_element_type(0)),
                                      opset13.concat(parts, axis=0))
            op.set_arguments([zeros])
    ov_model.validate_nodes_and_infer_types()
    ov.save_model(ov_model, dest / "openvino_model.xml", compress_to_fp16=weight_format == "fp16")
    tokenizer, detokenizer = convert_tokenizer(AutoTokenizer.from_pretrained(source), with_detokenizer=True)
    ov.save_model(tokenizer, dest / "openvino_tokenizer.xml")
    ov.save_model(detokenizer, dest / "openvino_detokenizer.xml")
    for name in _CONFIG_FILES:
        if (source / name).is_file():
            shutil.copy2(source / name, dest / name)
    import openvino_tokenizers

    return {"openvino": ov.__version__, "openvino_tokenizers": openvino_tokenizers.__version__,
            "torch": torch.__version__, "transformers": transformers.__version__}


def tempered(ir_dir: str | os.PathLike, temperature: float) -> Path:
    """A copy of an exported IR whose logits are divided by `temperature` (the final hidden
    state is scaled before the LM head, which keeps GenAI's "compute only the sampled
    positions' logits" rewrite of that MatMul working); cached in `ir_dir/temperature-<T>/`."""
    import numpy as np
    import openvino as ov
    from openvino import opset13

    base = Path(ir_dir)
    base_marker = _marker(base)
    if base_marker is None:
        raise InvalidConfig(f"{str(base)!r} is not an IR made by `export` (no {MARKER})")
    dest = base / f"temperature-{float(temperature)!r}"
    want = {"exporter": EXPORTER_VERSION, "base_sha256": base_marker["source_sha256"],
            "weight_format": base_marker["weight_format"], "temperature": float(temperature)}
    have = _marker(dest)
    if have is not None and all(have.get(k) == v for k, v in want.items()):
        return dest
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=base))
    try:
        model = ov.Core().read_model(base / "openvino_model.xml")
        head = model.output("logits").get_node().input_value(0).get_node()
        if head.get_type_name() != "MatMul":
            raise InvalidConfig(f"{str(base)!r}: the logits do not come straight from a MatMul "
                                f"({head.get_type_name()}); re-export the model")
        hidden = head.input_value(0)
        scale = opset13.constant(np.array(1.0 / temperature, dtype=np.float32))
        if hidden.get_element_type() != ov.Type.f32:
            scale = opset13.convert(scale, hidden.get_element_type())
        head.input(0).replace_source_output(opset13.multiply(hidden, scale).output(0))
        model.validate_nodes_and_infer_types()
        ov.save_model(model, tmp / "openvino_model.xml", compress_to_fp16=base_marker["weight_format"] == "fp16")
        for name in (*_TOKENIZER_FILES, *_CONFIG_FILES):
            if (base / name).is_file():
                shutil.copy2(base / name, tmp / name)
        (tmp / MARKER).write_text(json.dumps(want, indent=2) + "\n")
        _publish(tmp, dest, want)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


__all__ = ["EXPORTER_VERSION", "MARKER", "WEIGHT_FORMATS", "default_ir_dir", "export", "tempered"]
