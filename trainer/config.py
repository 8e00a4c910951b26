"""The trainer's configuration: every field with its default, what it allows and why.

Defaults are the paper's recipe (TRACE, step 3) where it gives one; `configs/` holds the CPU
recipe for the embedded default and the GPU recipe, each departure said beside it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from trace_gym.errors import InvalidConfig
from trace_gym.runconfig import embedded_knobs
from trace_gym.seeding import BANDS
from trace_gym.validation import require

LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
ADVANTAGE_STD = ("group", "batch")
LOSS_NORMALIZATION = ("sample", "turn", "token")
BACKENDS = ("local", "vllm", "openvino")
UPDATE_DTYPES = ("float32", "bfloat16", "auto")
MODEL_DTYPES = ("float32", "bfloat16", "auto")
OLD_LOGP = ("auto", "sampler", "trainer")
VALIDATION_SEEDS = len(BANDS["validation"])
"""The last seeds of the train split form its validation slice (`trace_gym.seeding.BANDS`):
never drawn for training."""
EXTENDABLE = ("iterations", "checkpoint_every", "eval_every", "eval_samples", "movement_samples")
"""Settings a resumed run may change: how far it goes and how often it saves and evaluates."""


@dataclass(frozen=True)
class GRPOConfig:
    """Group-by-seed GRPO with one LoRA adapter. Validated at construction: a bad value is an
    `InvalidConfig` naming the field, the value and the rule."""

    env_id: str = "trace/precondition_verification-v0"
    """The env to train on: any registered env, a target included (direct GRPO on the target
    is the paper's baseline)."""
    env_kwargs: dict[str, Any] = field(default_factory=embedded_knobs)
    """Knobs passed to `gym.make` (the base agent's compact prompts by default)."""
    iterations: int = 20
    """Rollout-and-update rounds (paper: 10-40)."""
    groups: int = 32
    """G: seeds drawn per iteration, one group each (paper: 32-64)."""
    group_size: int = 16
    """K: rollouts per seed; they share the seed's scenario and its prompt (paper: 16)."""
    temperature: float = 1.0
    """Rollout sampling temperature (paper: 1.0); the loss's log-probabilities use the same."""
    top_p: float = 1.0
    """Rollout nucleus sampling (1.0: the whole distribution, as the loss assumes)."""
    max_new_tokens: int = 256
    """Tokens per agent turn at most."""
    hint_fraction: float = 0.0
    """Share of each group's rollouts whose system prompt carries the env's hint (paper:
    25-50% when hints are used); the loss always sees the hint-free prompt."""
    advantage_std: str = "group"
    """'group': (r - mean_g) / (std_g + eps), the paper's formula; 'batch': the std over the
    whole batch's rewards, as the reference code does."""
    std_eps: float = 1e-4
    """The eps of the advantage's denominator."""
    min_informative: float = 0.5
    """Fresh seeds are drawn for constant groups until at least this share of the G groups
    has reward variance, or `max_resample_rounds` is spent."""
    max_resample_rounds: int = 2
    """Rounds of fresh seeds drawn for constant groups at most (0: none)."""
    clip_eps: float = 0.2
    """Lower clip of the ratio: 1 - clip_eps (paper: 0.2)."""
    clip_eps_high: float | None = None
    """Upper clip, 1 + clip_eps_high (None: clip_eps; the reference code uses 0.28)."""
    beta: float = 0.0
    """KL penalty weight against the adapter-disabled model (paper: none)."""
    loss_normalization: str = "sample"
    """'sample': each episode's tokens averaged (every agent turn of it: GRPO's o_i), then the
    episodes (1/G sum 1/|o_i|); 'turn': each agent turn's tokens averaged, then the turns (a
    long episode of many turns weighs more); 'token': every token of the batch weighs the
    same (DAPO)."""
    lr: float = 1e-5
    """AdamW learning rate (paper: 1e-5), constant."""
    weight_decay: float = 0.0
    """AdamW weight decay of the adapter's weights."""
    max_grad_norm: float = 1.0
    """Gradients are clipped to this global norm."""
    steps_per_batch: int = 1
    """Optimiser steps on each batch (paper: 1, so the ratio departs from 1 only where the
    rollout backend's log-probabilities differ from the trainer's)."""
    lora_rank: int = 16
    """The adapter's rank r."""
    lora_alpha: int = 16
    """LoRA's alpha: the update is scaled by alpha / r."""
    lora_dropout: float = 0.0
    """Dropout on the adapter's input."""
    lora_targets: tuple[str, ...] = LORA_TARGETS
    """Modules that get LoRA (every attention and MLP projection by default)."""
    lora_target_parameters: tuple[str, ...] = ()
    """Parameters (not modules) that get LoRA, through peft's `target_parameters`: for
    mixture-of-experts backbones whose experts are fused 3-D parameters in transformers
    (Qwen3-30B-A3B: `mlp.experts.gate_up_proj`, `mlp.experts.down_proj`), so that the
    experts' MLPs are adapted as the dense models' gate/up/down projections are."""
    shared_prefix: bool = True
    """Run each prefix the batch's samples share once (exact gradient); False runs every
    sample from its first token."""
    batch_episodes: int = 64
    """Episodes decoded together by the local backend."""
    seed: int = 0
    """Seeds every random stream: the seeds drawn, the sampling, the LoRA initialisation."""
    checkpoint_every: int = 5
    """Iterations between checkpoints (the last iteration always writes one)."""
    eval_every: int = 0
    """Iterations between evaluations on the validation slice (0: never); the best one's
    adapter is kept."""
    eval_seeds: int = 32
    """Validation seeds: the first ones of the train split's validation slice, which
    training never draws (test seeds stay for the final evaluation)."""
    eval_samples: int = 1
    """Episodes per validation seed: 1 plays it greedy; more sample at `temperature`, each
    with a sampling seed of its own derived from (seed, validation seed, sample), the same
    at every evaluation, so that two iterations' scores differ by the policy, not the draw."""
    movement: bool = True
    """Measure how far each update moved the policy on the batch's own tokens (`policy/*`):
    `movement_samples` of the batch's samples run three more times, in fp32 (before the
    update, after it, and with the adapter disabled)."""
    movement_samples: int = 8
    """Samples of the batch, evenly spaced, the movement is measured on (on a whole batch the
    extra passes cost nearly as much as the update's own)."""
    threads: int = 2
    """Torch threads of the local backend and the loss."""
    device: str = "auto"
    """Where the trained model lives: 'cpu', 'cuda' (or 'cuda:N'), or 'auto' (cuda when available)."""
    backend: str = "local"
    """'local' (the torch engine, on the trained model itself), 'openvino' (OpenVINO GenAI in
    this process, the adapter fused into it each iteration: the fastest on CPU; p_old is
    then the trainer's) or 'vllm' (OpenAI-compatible servers in VLLM_BASE_URLS that
    hot-swap the adapter)."""
    model_dtype: str = "float32"
    """Precision of the frozen base weights: 'float32', 'bfloat16' (half the memory: the
    paper's 30B model does not fit a GPU in fp32; the adapter's own weights stay fp32), or
    'auto' (bfloat16 on CUDA, float32 on CPU, where bf16 weights only save memory)."""
    update_dtype: str = "float32"
    """Precision of the update's matrix products: 'float32', 'bfloat16' (torch autocast: the
    weights, the adapter, the gradients and AdamW stay fp32, the log-softmax runs in fp32),
    or 'auto' (bfloat16 on CUDA and on CPUs that compute it natively,
    `trace_gym.agents.hardware.native_bf16`; float32 elsewhere, where it is emulated and
    slower). With old_logp 'trainer' p_old is taken under the same precision, so the
    clipped ratio stays exactly 1 at the batch's first step."""
    old_logp: str = "auto"
    """Where p_old comes from: 'sampler' (the rollout backend's log-probabilities, the
    paper's practice with vLLM), 'trainer' (the trainer's own, taken at the batch's first
    step: exact when the backend computes in another precision), or 'auto': 'trainer' with
    the openvino backend (bf16 sampling), 'sampler' otherwise. 'sampler' with openvino is
    refused."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        object.__setattr__(self, "lora_target_parameters", tuple(self.lora_target_parameters))
        object.__setattr__(self, "env_kwargs", dict(self.env_kwargs))
        positive = ("iterations", "groups", "group_size", "max_new_tokens", "steps_per_batch", "lora_rank",
                    "movement_samples",
                    "lora_alpha", "batch_episodes", "threads", "eval_seeds", "eval_samples", "checkpoint_every")
        for name in positive:
            value = getattr(self, name)
            require(self, name, type(value) is int and value >= 1, "must be an integer >= 1")
        for name in ("max_resample_rounds", "seed", "eval_every"):
            value = getattr(self, name)
            require(self, name, type(value) is int and value >= 0, "must be an integer >= 0")
        require(self, "group_size", self.group_size >= 2, "must be at least 2 (a group of one has no variance)")
        require(self, "eval_seeds", self.eval_seeds <= VALIDATION_SEEDS,
                f"must be at most {VALIDATION_SEEDS:,} (the train split's validation slice)")
        for name, lo, hi in (("temperature", 0.0, 10.0), ("hint_fraction", 0.0, 1.0), ("min_informative", 0.0, 1.0),
                             ("clip_eps", 0.0, 1.0), ("lora_dropout", 0.0, 1.0)):
            value = getattr(self, name)
            require(self, name, _number(value) and lo <= value <= hi, f"must be a number in [{lo}, {hi}]")
        require(self, "temperature", self.temperature > 0, "must be > 0 (GRPO needs sampled rollouts)")
        require(self, "top_p", _number(self.top_p) and 0 < self.top_p <= 1, "must be a number in (0, 1]")
        for name in ("std_eps", "lr"):
            require(self, name, _number(getattr(self, name)) and getattr(self, name) > 0, "must be a number > 0")
        for name in ("beta", "weight_decay"):
            require(self, name, _number(getattr(self, name)) and getattr(self, name) >= 0, "must be a number >= 0")
        require(self, "max_grad_norm", _number(self.max_grad_norm) and self.max_grad_norm > 0,
                "must be a number > 0 (gradients clipped to norm 0 would zero every update)")
        require(self, "clip_eps_high", self.clip_eps_high is None or (_number(self.clip_eps_high)
                                                                      and self.clip_eps_high >= 0),
                "must be None or a number >= 0")
        for name, allowed in (("advantage_std", ADVANTAGE_STD), ("loss_normalization", LOSS_NORMALIZATION),
                              ("backend", BACKENDS), ("old_logp", OLD_LOGP), ("update_dtype", UPDATE_DTYPES),
                              ("model_dtype", MODEL_DTYPES)):
            require(self, name, getattr(self, name) in allowed, f"allowed: {', '.join(allowed)}")
        bad = [t for t in self.lora_targets if not isinstance(t, str) or not t]
        require(self, "lora_targets", bool(self.lora_targets or self.lora_target_parameters) and not bad,
                "must be a list of module names (empty only with lora_target_parameters)")
        require(self, "old_logp", self.backend != "openvino" or self.old_logp != "sampler",
                "cannot be 'sampler' with backend 'openvino' (it samples in bf16: its log-probabilities are not the "
                "trainer's)")
        require(self, "top_p", self.backend != "vllm" or self.old_logp == "trainer" or self.top_p == 1.0,
                "must be 1.0 with backend 'vllm' unless old_logp is 'trainer' (vLLM's processed log-probabilities "
                "are renormalised over the top-p nucleus, so they are not the trainer's log_softmax(logits / T))")
        require(self, "env_id", isinstance(self.env_id, str) and bool(self.env_id), "must be an env id")
        require(self, "device", isinstance(self.device, str) and (self.device in ("auto", "cpu")
                                                                  or self.device.startswith("cuda")),
                "allowed: auto, cpu, cuda, cuda:N")

    def torch_device(self) -> str:
        """The torch device: `device`, with "auto" resolved to cuda when one is available,
        else cpu."""
        import torch

        if self.device == "auto":
            return "cuda" if torch.cuda.is_available() else "cpu"
        return self.device

    def torch_dtype(self) -> Any:
        """The base weights' torch dtype (`model_dtype` resolved for the device)."""
        import torch

        if self.model_dtype == "auto":
            return torch.bfloat16 if self.torch_device().startswith("cuda") else torch.float32
        return {"float32": torch.float32, "bfloat16": torch.bfloat16}[self.model_dtype]

    def autocast(self) -> bool:
        """Whether the update runs under bf16 autocast (`update_dtype` resolved for this machine)."""
        if self.update_dtype != "auto":
            return self.update_dtype == "bfloat16"
        if self.torch_device().startswith("cuda"):
            return True
        from trace_gym.agents.hardware import native_bf16

        return native_bf16()

    def p_old(self) -> str:
        """'sampler' or 'trainer': `old_logp` with 'auto' resolved for the backend."""
        if self.old_logp != "auto":
            return self.old_logp
        return "trainer" if self.backend == "openvino" else "sampler"

    @property
    def eps_high(self) -> float:
        """The upper clip: `clip_eps_high`, or `clip_eps` when that is None."""
        return self.clip_eps if self.clip_eps_high is None else self.clip_eps_high

    def hinted(self) -> int:
        """Rollouts of each group that get the hint."""
        return round(self.hint_fraction * self.group_size)

    def to_json(self) -> dict[str, Any]:
        """The config as a JSON object (tuples as lists)."""
        return json.loads(json.dumps(asdict(self)))

    def key(self) -> str:
        """A 12-character digest of every setting: the config's key."""
        return hashlib.sha256(json.dumps(self.to_json(), sort_keys=True).encode()).hexdigest()[:12]

    def trained(self) -> dict[str, Any]:
        """The settings that decide what the iterations already run trained: every field but
        `EXTENDABLE` (an iteration does not depend on how many follow it; the learning rate is
        constant). A run resumes under another value of those, and only of those."""
        return {k: v for k, v in self.to_json().items() if k not in EXTENDABLE}

    def resume_key(self) -> str:
        """A digest of `trained`: what a checkpoint must match to be resumed."""
        return hashlib.sha256(json.dumps(self.trained(), sort_keys=True).encode()).hexdigest()[:12]

    @classmethod
    def from_toml(cls, path: str | Path, **overrides: Any) -> GRPOConfig:
        """The `[train]` table of a TOML file, then `overrides` (None values ignored); an
        unknown key is refused, naming the file and the key."""
        from trace_gym.runconfig import load

        data = load(path)  # a shipped config by name, or a path; refused with where and why
        table = data.get("train", {})
        if not isinstance(table, dict):
            raise InvalidConfig(f"{path}: [train] must be a table")
        return cls.from_dict(table, where=f"{path} [train]", **overrides)

    @classmethod
    def for_env(cls, env_id: str, config: str | Path | None = None, **overrides: Any) -> GRPOConfig:
        """What `trace-gym train --env ENV [--config CONFIG] [flags]` trains: the run
        configuration's `[train]` table (none: the defaults), then `overrides` (None values
        ignored), the env's `env_knobs` over the default env_kwargs."""
        trained = cls.from_toml(config, env_id=env_id, **overrides) if config else \
            cls.from_dict({}, env_id=env_id, **overrides)
        if not config:
            return trained
        from trace_gym.runconfig import env_knobs

        knobs = env_knobs(config, env_id)
        return cls.from_dict({**trained.to_json(), "env_kwargs": {**trained.env_kwargs, **knobs}}) if knobs else trained

    @classmethod
    def from_dict(cls, table: dict[str, Any], where: str = "config", **overrides: Any) -> GRPOConfig:
        """A config from a table of fields, then `overrides` (None values ignored); an
        unknown key is refused, naming `where` and the key."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise InvalidConfig(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(known))}")
        values = {**table, **{k: v for k, v in overrides.items() if v is not None}}
        return cls(**values)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
