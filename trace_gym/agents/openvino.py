"""Rollouts on OpenVINO GenAI: a transformers causal LM exported to an OpenVINO IR and run by
`openvino_genai.ContinuousBatchingPipeline` behind the driver's batched policy interface
(`trace_gym.driver.BatchedPolicy`).

**Export** (`trace_gym.agents.openvino_export`: `export`, `tempered`) converts the model
directory into the IR this runs, once, into trace-gym's cache.

**Sampling.** Each submitted turn is one pipeline request: the chat template's token ids,
stop token `<|im_end|>`, greedy at temperature 0, else top-p sampling from a generator seeded
per episode turn (GenAI seeds each request's own generator, so a turn's tokens do not depend
on which others share its batch: measured). GenAI reports each sampled token's
log-probability under the *raw* logits, before temperature and top-p (measured: at T = 0.7
its values match `log_softmax(logits)` to 5e-6 and differ from `log_softmax(logits / T)` by up
to 2.1 nats). A policy-gradient loss needs them under the sampler, so at a temperature other
than 0 or 1 the policy runs a copy of the IR that divides the final hidden state by T before
the LM head (logits / T, exactly), samples at temperature 1, and GenAI's log-probabilities
are then `log_softmax(logits / T)`, the torch engine's. That copy is cached inside the IR
directory, one per temperature.

**Caching between turns** is GenAI's prefix caching: a conversation's next prompt starts with
its earlier turns, whose key/value blocks are found by their tokens and not recomputed.

**Memory.** With prefix caching GenAI keeps every key/value block it has computed until the
cache is full, so a cache left to grow (`cache_size` 0) grows with every turn of every
episode: 64 target episodes in flight passed 8 GiB resident. The cache is therefore fixed
(`cache_gb`, default `auto_cache_gb`): the keys and values of 64 sequences of the model's
full context, at most 4 GB and a quarter of the machine's memory, at least 1 GB. Blocks of
finished turns kept for reuse are evicted as needed; but when the turns being generated
themselves outgrow the cache, GenAI drops every one of them (`GenerationStatus.IGNORED`,
out of memory: 64 airline episodes in flight with f32 keys and values in 4 GB did). So the
policy admits a turn only while the turns in flight fit (`cache_tokens`: their prompts and
`max_new_tokens` each, in whole blocks); the others wait, in the order they came, for one to
end. A new episode starts only when, besides, every conversation under way fits with it: a
cache shared by more conversations than it holds evicts each one's prefix before its next
turn, and every turn then prefills its whole conversation again. A turn that could not fit
alone is refused with its size and the cache's.

**LoRA.** The adapter is fused into the weights when the pipeline is built
(`AdapterConfig.Mode.MODE_FUSE`: no per-token cost), with alpha = lora_alpha / r, the scaling
peft applies and GenAI does not. Measured with GenAI 2026.4.1: the pipeline ignores the
`adapters` of a request given to `add_request` (only `generate()` switches the adapter of a
dynamic-mode pipeline, for every request at once), and switching it in place keeps prefix-cache
blocks computed under the previous adapter, so `set_adapter` builds a new pipeline.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import math
import os
import time
from pathlib import Path
from typing import Any

from trace_gym.agents.hardware import DTYPES, cpu_flags, placement
from trace_gym.agents.openvino_export import (  # noqa: F401  (re-exported: the export is this engine's first step)
    INSTALL,
    MARKER,
    STOP_TOKEN,
    WEIGHT_FORMATS,
    checked_model_dir,
    default_ir_dir,
    export,
    require_openvino,
    tempered,
)
from trace_gym.driver import Live, Reply, Turn
from trace_gym.errors import InvalidConfig, PolicyError

logger = logging.getLogger(__name__)

__all__ = ["DTYPES", "OpenVINOPolicy", "adapter_alpha", "auto_cache_gb", "export", "tempered"]


def adapter_alpha(adapter_dir: str | os.PathLike) -> float:
    """The scale peft gives a LoRA adapter's update (lora_alpha / r, or / sqrt(r) with
    rsLoRA), which GenAI takes as the adapter's alpha. Refuses what one scalar cannot say."""
    path = Path(adapter_dir)
    config_path, weights = path / "adapter_config.json", path / "adapter_model.safetensors"
    if not (config_path.is_file() and weights.is_file()):
        raise InvalidConfig(f"adapter={str(path)!r} is not a peft adapter directory "
                            "(adapter_config.json and adapter_model.safetensors)")
    config = json.loads(config_path.read_text())
    if config.get("peft_type", "LORA") != "LORA":
        raise InvalidConfig(f"adapter={str(path)!r}: peft_type {config.get('peft_type')!r} is not LORA")
    for key in ("rank_pattern", "alpha_pattern"):
        if config.get(key):
            raise InvalidConfig(f"adapter={str(path)!r}: per-module {key} cannot be applied (OpenVINO takes one "
                                "alpha per adapter)")
    if config.get("use_dora") or config.get("modules_to_save"):
        raise InvalidConfig(f"adapter={str(path)!r}: DoRA and modules_to_save are not supported by OpenVINO")
    r, lora_alpha = config["r"], config["lora_alpha"]
    return float(lora_alpha) / (math.sqrt(r) if config.get("use_rslora") else float(r))


def _stream_seed(*parts: int) -> int:
    """A 63-bit seed from integers (a policy seed, an episode's stream, a turn index)."""
    digest = hashlib.sha256(":".join(str(int(p)) for p in parts).encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


KV_BYTES = {"f32": 4.0, "bf16": 2.0, "f16": 2.0, "u8": 1.125}
"""Bytes a key or value element takes in the cache, by `KV_CACHE_PRECISION` (u8 carries a
scale and a zero point per group of 64)."""
BLOCK = 32
"""Tokens a key/value block holds on the CPU (the admission count rounds each turn up to it)."""


def kv_token_bytes(model_path: str | os.PathLike, kv_bytes: float) -> float:
    """Bytes of keys and values one token takes across the model's layers."""
    config = json.loads((Path(model_path) / "config.json").read_text())
    heads = config.get("num_key_value_heads") or config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return 2 * config["num_hidden_layers"] * heads * head_dim * kv_bytes


def cache_tokens(model_path: str | os.PathLike, cache_gb: int, kv_bytes: float) -> int:
    """Tokens a cache of `cache_gb` GB holds, with a twentieth kept back for what the count
    does not see (a partly filled block of a prefix shared between turns)."""
    return int(cache_gb * 10**9 * 0.95 // kv_token_bytes(model_path, kv_bytes))


def auto_cache_gb(model_path: str | os.PathLike, kv_bytes: float = 2, sequences: int = 64,
                  most_gb: int = 4) -> int:
    """The key/value cache, in whole GB, for `sequences` sequences of the model's full context
    (`max_position_embeddings`) with `kv_bytes` a value, kept within [1, min(`most_gb`, a
    quarter of physical memory)]: a bound on resident memory (see "Memory" above)."""
    config = json.loads((Path(model_path) / "config.json").read_text())
    want = kv_token_bytes(model_path, kv_bytes) * config.get("max_position_embeddings", 4096) * sequences
    quarter = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    return max(1, min(most_gb, quarter // 10**9, math.ceil(want / 10**9)))


class OpenVINOPolicy:
    """A `trace_gym.driver.BatchedPolicy` on one OpenVINO GenAI continuous-batching pipeline.

    `model_path` is a transformers model directory (exported on first use, see `export`);
    `adapter` a peft LoRA directory. Sampling is like `LocalModelPolicy`'s: `temperature` 0
    is greedy, else softmax(logits / T) cut to `top_p`, at most `max_new_tokens` a turn.
    `dtype` sets the precision hint ("float32": f32; "bfloat16": bf16; "auto": bf16 where the
    CPU computes it natively, `trace_gym.agents.hardware`, which is also OpenVINO's own CPU
    default there, read back with `get_property`). `kv_cache_precision` None keeps keys and
    values in f32 for float32 (OpenVINO's CPU default is u8, which moved log-probabilities by
    up to 0.004 nats on the fixture) and leaves the plugin's default (u8) otherwise. `threads`
    defaults to every core this process may run on; `cache_gb` fixes the KV cache size (None:
    `auto_cache_gb`); `max_num_batched_tokens` caps the tokens one step computes (GenAI's
    default 256); `ir_dir` is where the IR is cached (default: `default_ir_dir`); `kv_reuse`
    False turns GenAI's prefix caching off (every prompt prefilled whole); `constrain_calls`
    constrains what follows `<tool_call>` to a call of one of the offered tools, valid
    against its schema, then `</tool_call>` (GenAI's structural tags over
    `trace_gym.schema.tool_call_schema`; replies stay free text); `announce` prints the
    precision and threads at start."""

    def __init__(self, model_path: str | os.PathLike, adapter: str | os.PathLike | None = None, *,
                 temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 192, seed: int = 0,
                 dtype: str = "auto", weight_format: str = "fp16", threads: int | None = None,
                 kv_cache_precision: str | None = None, cache_gb: int | None = None,
                 max_num_batched_tokens: int | None = None, ir_dir: str | os.PathLike | None = None,
                 kv_reuse: bool = True, constrain_calls: bool = False, announce: bool = False) -> None:
        from trace_gym.agents.sampling import check_sampling

        check_sampling("openvino policy", temperature, top_p, max_new_tokens)
        self.placement = placement(dtype, threads, owner="openvino policy")
        if self.placement.dtype == "bfloat16" and self.placement.threads == 1 and "amx_bf16" in cpu_flags():
            # OpenVINO 2026.4's CPU plugin dies of SIGFPE compiling a bf16 model for one
            # inference thread on an AMX CPU (measured on an AMX Xeon, with and without an
            # adapter; two threads run): one thread computes in f32 there.
            self.placement = placement("float32", 1, owner="openvino policy")
        if cache_gb is not None and not (type(cache_gb) is int and cache_gb >= 1):
            raise InvalidConfig(f"openvino policy: cache_gb={cache_gb!r} is invalid: must be an integer >= 1 or None")
        model_path = checked_model_dir(model_path)
        if cache_gb is None:
            cache_gb = auto_cache_gb(model_path, kv_bytes=4 if self.placement.dtype == "float32" else 2)
        self.genai = require_openvino()
        from transformers import AutoTokenizer

        self.model_path = checked_model_dir(model_path)
        self.dtype, self.threads = self.placement.dtype, self.placement.threads
        self.temperature, self.top_p, self.max_new_tokens = float(temperature), float(top_p), max_new_tokens
        self.seed, self.weight_format = seed, weight_format
        self.kv_cache_precision = kv_cache_precision or ("f32" if self.dtype == "float32" else None)
        self.cache_gb, self.max_num_batched_tokens = cache_gb, max_num_batched_tokens
        self.kv_reuse = bool(kv_reuse)
        self.constrain_calls = bool(constrain_calls)
        self._grammars: dict[str, Any] = {}
        if announce:
            logger.info(f"local model {self.model_path.name} on OpenVINO: {self.placement.describe()}")
        self.ir_dir = export(self.model_path, ir_dir, weight_format)
        # logits / T inside the graph, so that the reported log-probabilities are the sampler's
        self.run_dir = self.ir_dir if self.temperature in (0.0, 1.0) else tempered(self.ir_dir, self.temperature)
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_path)
        self.stop_id = self.tokenizer.convert_tokens_to_ids(STOP_TOKEN)
        if self.stop_id is None or self.stop_id == self.tokenizer.unk_token_id:
            raise InvalidConfig(f"the tokenizer of {str(self.model_path)!r} has no {STOP_TOKEN} token")
        self._pending: dict[int, tuple[Live, Any, list[int], list[int]]] = {}
        self._waiting: collections.deque[tuple[Live, list[int], list[int]]] = collections.deque()
        self._resident: dict[int, int] = {}  # id(live) of each episode under way: its last turn's need
        kv = KV_BYTES[self.kv_cache_precision or "u8"]  # None: the plugin's default, u8
        self.cache_tokens = cache_tokens(self.model_path, self.cache_gb, kv)
        self._ids = 0
        self.adapter: Path | None = None
        self.adapter_alpha: float | None = None
        self.pipeline: Any = None
        self.build_s = 0.0
        self.set_adapter(adapter)

    # -- the pipeline ---------------------------------------------------------------------

    def properties(self) -> dict[str, Any]:
        """The OpenVINO properties the pipeline is compiled with."""
        hint = {"float32": "f32", "bfloat16": "bf16"}[self.dtype]
        props: dict[str, Any] = {"INFERENCE_NUM_THREADS": self.threads, "INFERENCE_PRECISION_HINT": hint}
        if self.kv_cache_precision is not None:
            props["KV_CACHE_PRECISION"] = self.kv_cache_precision
        return props

    def set_adapter(self, adapter: str | os.PathLike | None) -> None:
        """Use this peft LoRA adapter (None: the base model) from the next turn on: the
        pipeline is rebuilt with the adapter fused into its weights (about 0.5 s on the fixture).

        Rebuilding is required, not a precaution: GenAI 2026.4.1's continuous-batching pipeline
        ignores a request's own adapters, and an adapter switched in place (through
        `generate()`, the one call that switches it) is applied, but the prefix cache still
        serves key/value blocks computed under the previous adapter, so prompts that share
        cached blocks continue as the old adapter would (measured on the fixture)."""
        if self._pending or self._waiting:
            raise InvalidConfig(f"openvino policy: cannot change the adapter while "
                                f"{len(self._pending) + len(self._waiting)} turn(s) "
                                "are being generated")
        g = self.genai
        path = Path(adapter) if adapter is not None else None
        alpha = adapter_alpha(path) if path is not None else None
        self.pipeline = None  # free the old pipeline's memory before compiling the new one
        started = time.perf_counter()
        scheduler = g.SchedulerConfig()
        scheduler.enable_prefix_caching = self.kv_reuse
        scheduler.cache_size = self.cache_gb
        if self.max_num_batched_tokens is not None:
            scheduler.max_num_batched_tokens = self.max_num_batched_tokens
        props = self.properties()
        if path is not None:
            props["adapters"] = g.AdapterConfig(g.Adapter(str(path / "adapter_model.safetensors")), alpha,
                                                g.AdapterConfig.Mode.MODE_FUSE)
        self.pipeline = g.ContinuousBatchingPipeline(str(self.run_dir), scheduler, "CPU", props)
        self.build_s = time.perf_counter() - started
        self.adapter, self.adapter_alpha = path, alpha
        self.name = f"openvino:{self.model_path.name}" + (f"+{path.name}" if path is not None else "")

    def metadata(self) -> dict[str, Any]:
        """How the model runs here (recorded with each episode)."""
        return {**self.placement.as_dict(), "backend": "openvino", "properties": self.properties(),
                "ir": str(self.run_dir)}

    def close(self) -> None:
        """Drop the pipeline and whatever is still being generated."""
        self._pending.clear()
        self._waiting.clear()
        self._resident.clear()
        self.pipeline = None

    # -- BatchedPolicy ----------------------------------------------------------------------

    def _structured(self, tools: list[dict[str, Any]]) -> Any:
        """The structural tags that constrain a tool call to `tools` (built once per tool list)."""
        from trace_gym.schema import tool_call_schema

        key = json.dumps(tools, sort_keys=True)
        if key not in self._grammars:
            s = self.genai.StructuredOutputConfig
            config = s()
            config.structural_tags_config = s.TriggeredTags(
                triggers=["<tool_call>"], tags=[s.Tag(begin="<tool_call>", end="</tool_call>",
                                                      content=s.JSONSchema(json.dumps(tool_call_schema(tools))))],
                at_least_one=False, stop_after_first=False)
            self._grammars[key] = config
        return self._grammars[key]

    def _config(self, seed: int, tools: list[dict[str, Any]] | None = None) -> Any:
        config = self.genai.GenerationConfig()
        config.max_new_tokens = self.max_new_tokens
        config.apply_chat_template = False
        config.stop_token_ids = {self.stop_id}
        config.eos_token_id = self.stop_id  # the model's own eos (if another) does not end a turn, as in the engine
        config.logprobs = 1
        if self.temperature > 0:
            config.do_sample = True
            config.temperature = 1.0  # T is applied inside the graph (see `tempered`)
            config.top_p = self.top_p
            config.rng_seed = seed
        if self.constrain_calls and tools:
            config.structured_output_config = self._structured(tools)
        return config

    def submit(self, live: Live) -> None:
        """Queue `live`'s next turn: it starts at once if the turns in flight leave it room in
        the key/value cache, else when enough of them have ended (see "Memory" above)."""
        from trace_gym.agents.chat import render_prompt, unhinted

        if self.pipeline is None:
            raise InvalidConfig("openvino policy: closed")
        prompt = render_prompt(self.tokenizer, live.messages, live.tools)
        loss_prompt = prompt
        if live.episode.hint and live.system_prompt_unhinted is not None:
            loss_prompt = render_prompt(self.tokenizer, unhinted(live.messages, live.system_prompt_unhinted),
                                        live.tools)
        need = self._need(prompt)
        if need > self.cache_tokens:
            raise InvalidConfig(f"openvino policy: a turn of episode {live.episode} needs {need} "
                                f"tokens of key/value cache (a prompt of {len(prompt)} and max_new_tokens="
                                f"{self.max_new_tokens}), more than cache_gb={self.cache_gb} holds "
                                f"({self.cache_tokens}): raise cache_gb")
        self._waiting.append((live, prompt, loss_prompt))
        self._admit()

    def _need(self, prompt: list[int]) -> int:
        """Cache tokens a turn may take: its prompt and its longest reply, in whole blocks."""
        return -(-(len(prompt) + self.max_new_tokens) // BLOCK) * BLOCK

    def _admit(self) -> None:
        """Start waiting turns while they fit (see "Memory" above): an episode's next turn when
        the turns in flight leave it room; a new episode's first turn only when, besides, every
        conversation under way (in flight or between turns) and its own fit in the cache. The
        conversations under way then keep their blocks for their next turns: a cache shared
        by more conversations than it holds evicts each one's prefix before its next turn, and
        every turn prefills the whole conversation again. Each kind waits in the order it came."""
        import numpy as np
        import openvino as ov

        used = sum(self._need(prompt) for _, _, prompt, _ in self._pending.values())
        resident = sum(self._resident.values())
        waiting, self._waiting = self._waiting, collections.deque()
        blocked = {False: False, True: False}  # by "is a new episode"
        for live, prompt, loss_prompt in waiting:
            need, new = self._need(prompt), id(live) not in self._resident
            fits = used + need <= self.cache_tokens
            if new:
                fits = fits and resident + need <= self.cache_tokens
            if blocked[new] or not fits:
                blocked[new] = True
                self._waiting.append((live, prompt, loss_prompt))
                continue
            used += need
            resident += need - self._resident.get(id(live), 0)
            self._resident[id(live)] = need
            self._ids += 1
            seed = _stream_seed(self.seed, live.episode.stream(), live.turn)
            handle = self.pipeline.add_request(self._ids, ov.Tensor(np.asarray([prompt], dtype=np.int64)),
                                               self._config(seed, live.tools))
            self._pending[self._ids] = (live, handle, prompt, loss_prompt)

    def collect(self) -> list[tuple[Live, Reply]]:
        """Step the pipeline until at least one submitted turn is done; return all that are."""
        g = self.genai
        if not self._pending and not self._waiting:
            return []
        out: list[tuple[Live, Reply]] = []
        while not out:
            self._admit()
            self.pipeline.step()
            for request_id, (live, handle, prompt, loss_prompt) in list(self._pending.items()):
                status = handle.get_status()
                if status == g.GenerationStatus.RUNNING:
                    continue
                del self._pending[request_id]
                if status != g.GenerationStatus.FINISHED:
                    raise PolicyError(f"openvino policy: the turn of episode {live.episode} ended as {status} "
                                       f"(prompt of {len(prompt)} tokens)")
                result = handle.read_all()[0]
                ids = [int(t) for t in result.generated_ids]
                body = ids[:-1] if ids and ids[-1] == self.stop_id else ids
                text = self.tokenizer.decode(body, skip_special_tokens=False)
                turn = Turn(prompt, loss_prompt, ids, [float(x) for x in result.generated_log_probs])
                out.append((live, Reply(text, turn)))
        self._admit()  # the room the ended turns left
        return out

    def release(self, live: Live) -> None:
        """Forget `live` (a turn still in flight or waiting for it is dropped)."""
        for request_id, (other, handle, _, _) in list(self._pending.items()):
            if other is live:
                handle.cancel()
                del self._pending[request_id]
        self._waiting = collections.deque(w for w in self._waiting if w[0] is not live)
        self._resident.pop(id(live), None)

    # -- identity ---------------------------------------------------------------------------

    def fingerprint(self) -> dict[str, Any]:
        """What decides this policy's outputs: the weights, the adapter, the sampling, the precision."""
        from trace_gym.provenance import dir_sha256

        return {"name": "openvino", "model_sha256": dir_sha256(self.model_path),
                "adapter_sha256": dir_sha256(self.adapter) if self.adapter is not None else None,
                "adapter_alpha": self.adapter_alpha, "temperature": self.temperature, "top_p": self.top_p,
                "max_new_tokens": self.max_new_tokens, "seed": self.seed, "dtype": self.dtype,
                "weight_format": self.weight_format, "kv_cache_precision": self.kv_cache_precision,
                "constrain_calls": self.constrain_calls, "openvino_genai": self.genai.__version__}
