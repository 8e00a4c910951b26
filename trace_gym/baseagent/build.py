"""Build the embedded base agent: a pretrained small model, warm-started by SFT on oracle
demonstrations of the two target envs (compact prompts), with chosen task kinds left out.

The start is SmolLM2-135M-Instruct (`weights.pretrained`: fetched from the package registry
and converted once), or any local causal-LM directory. A pretrained model already copies ids
from the conversation; SFT teaches it this project's format (hermes tool calls, the compact
tool list) and the shape of a customer-service conversation. Kinds listed in `weak_kinds`
are left out of the demonstrations, so the agent stays weak on them and analysis has
recurring failures to find.

Full fine-tuning by default: in trial runs at this scale (about ten minutes of SFT on two
cores) a LoRA merged afterwards (r16, lr 3e-4) still wrote malformed tool-call JSON on first
turns, where full fine-tuning wrote well-formed calls with the conversation's ids; and full
fine-tuning of 135 M parameters costs about the same per token on CPU. `method="lora"`
stays, for the comparison on other machines and models. The embedding matrix (tied to the
output layer, a fifth of the parameters) stays frozen: the vocabulary does not change and
a few dozen demonstrations cannot improve it (`freeze_share` freezes the lowest decoder
layers too). Weights and optimiser are fp32; matrix products run under bf16 autocast where
the CPU has native bf16.

The loop is plain PyTorch, `accumulate` demonstrations of one target per step, loss on the
agent's tokens only (the chat template's generation markers), logits computed only where there
is a loss (the output layer over a 49 k vocabulary is otherwise a fifth of the compute), and
the system prompt and tools the step's demonstrations share run once
(`trace_gym.agents.prefix`, an exact gradient). Fixed step counts,
a seeded data order and deterministic algorithms make the weights a function of the seed,
the thread count and the torch version.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trace_gym.errors import InvalidConfig
from trace_gym.runconfig import embedded_knobs

if TYPE_CHECKING:
    from trace_gym.targets.env import TargetEnv

logger = logging.getLogger(__name__)

METHODS = ("full", "lora")


@dataclass(frozen=True)
class BaseAgentConfig:
    """How the base agent is built. Every field is validated at construction."""

    source: str = "smollm2-135m-instruct"
    """The model to start from: a known release name (fetched with pip) or a local
    transformers causal-LM directory."""
    seed: int = 0
    """Seed of the demonstrations and the data order."""
    weak_kinds: tuple[str, ...] = ("compensation", "cancel_order")
    """Request kinds left out of the demonstrations, so the agent stays weak on them (the
    embedded default is weak on two kinds that always need precondition checks, so that
    analysis has recurring failures to find); none: () in a config, '' as a flag."""
    weak_share: float = 0.0
    """Share of demonstrations with a weak kind that are kept anyway (in [0, 1])."""
    episodes: int = 72
    """Oracle demonstrations per target env (none with a weak kind in any of its requests)."""
    epochs: int = 1
    """Passes over the demonstrations."""
    accumulate: int = 4
    """Demonstrations per optimiser step."""
    lr: float = 1e-4
    """Peak AdamW learning rate (linear warm-up over the first tenth, then cosine decay to a tenth)."""
    method: str = "full"
    """'full' fine-tuning (embeddings frozen) or 'lora' (rank `lora_rank`, merged into the saved weights)."""
    lora_rank: int = 16
    """Rank of the LoRA merged into the weights when method='lora'."""
    lora_lr: float = 3e-4
    """Learning rate when method='lora'."""
    bf16: bool | str = "auto"
    """Run matrix products under bf16 autocast (weights and optimiser stay fp32): a gain only
    on CPUs with native bf16 (avx512_bf16 / AMX), where SFT runs 1.7 times as fast; elsewhere
    it is emulated and slower. 'auto': on where the CPU has it (the build record says which)."""
    max_tokens: int = 1536
    """Demonstrations are cut to this many tokens (the agent's first turns are what most
    tasks hinge on). Measured with the lowest third frozen: cut at 3,072 (most demonstrations
    whole), SFT ran at 290 tokens/s against 422 at 1,536, and the agent passed 1 of 16
    airline test tasks at either cut."""
    freeze_share: float = 0.0
    """Share of the decoder layers, the lowest, that stay frozen with the embeddings (1/3:
    10 of SmolLM2's 30). Nothing back-propagates below the first layer that trains, so SFT
    is faster (422 tokens/s against 365 in the builds measured), but the one agent built with
    1/3 (with 88 demonstrations per target, 2 per step at lr 2e-4) parsed 0.71 of its retail
    turns against 0.94, so every layer trains by default."""
    call_weight: float = 2.0
    """Loss weight of tokens inside tool calls, against 1 for the agent's other tokens."""
    threads: int = 2
    """Torch threads while building (the weights are reproducible for a given count)."""
    capability_episodes: int = 0
    """Oracle demonstrations per shipped capability env added to the SFT mix (0: none), on
    train seeds, with the targets' prompt style; a task of a weak kind, or whose oracle writes
    with a tool that a weak kind writes with, is left out, so that the agent still lacks what
    the capability envs teach on the weak kinds."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: embedded_knobs({
        "compound_rate": 0.1, "unknown_id_rate": 0.4, "distractors": 1}))
    """How the demonstration episodes are drawn (target env knobs): mostly one request (a
    demonstration is cut to `max_tokens` anyway), customers who do not know their record's id
    as often as the targets' default, a distractor record beside each."""

    def __post_init__(self) -> None:
        from trace_gym.validation import require

        object.__setattr__(self, "weak_kinds", tuple(self.weak_kinds))
        require(self, "seed", isinstance(self.seed, int) and self.seed >= 0, "must be an integer >= 0")
        require(self, "episodes", isinstance(self.episodes, int) and 1 <= self.episodes <= 100_000, "must be in 1..100000")
        require(self, "capability_episodes", isinstance(self.capability_episodes, int)
                and 0 <= self.capability_episodes <= 100_000, "must be in 0..100000")
        require(self, "epochs", isinstance(self.epochs, int) and self.epochs >= 1, "must be an integer >= 1")
        require(self, "accumulate", isinstance(self.accumulate, int) and self.accumulate >= 1, "must be an integer >= 1")
        require(self, "weak_share", 0.0 <= self.weak_share <= 1.0, "must be in [0, 1]")
        require(self, "method", self.method in METHODS, f"allowed: {', '.join(METHODS)}")
        for name in ("lr", "lora_lr"):
            value = getattr(self, name)
            require(self, name, isinstance(value, (int, float)) and value > 0, "must be a number > 0")
        require(self, "lora_rank", isinstance(self.lora_rank, int) and self.lora_rank >= 1, "must be an integer >= 1")
        require(self, "bf16", isinstance(self.bf16, bool) or self.bf16 == "auto", "must be true, false or 'auto'")
        require(self, "threads", isinstance(self.threads, int) and self.threads >= 1, "must be an integer >= 1")
        require(self, "freeze_share", isinstance(self.freeze_share, (int, float)) and 0 <= self.freeze_share < 1,
                "must be a number in [0, 1)")
        require(self, "call_weight", isinstance(self.call_weight, (int, float)) and self.call_weight >= 0,
                "must be a number >= 0")
        require(self, "max_tokens", isinstance(self.max_tokens, int) and 256 <= self.max_tokens <= 8192,
                "must be in 256..8192")
        from trace_gym.worlds import DOMAINS

        known = {kind for d in DOMAINS.values() for kind in d.kinds}
        bad = [k for k in self.weak_kinds if k not in known]
        require(self, "weak_kinds", not bad, f"unknown kind(s) {bad}; allowed: {', '.join(sorted(known))}")

    @classmethod
    def from_table(cls, table: dict[str, Any], where: str = "[base_agent]", **overrides: Any) -> BaseAgentConfig:
        """A recipe from a run configuration's `[base_agent]` table, then `overrides` (None
        values ignored); an unknown key is refused, naming `where` and the key."""
        from dataclasses import fields

        known = {f.name for f in fields(cls)}
        unknown = sorted(set(table) - known)
        if unknown:
            raise InvalidConfig(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(sorted(known))}")
        return cls(**{**table, **{k: v for k, v in overrides.items() if v is not None}})

    def identity(self) -> dict[str, Any]:
        """Every field, but those added after agents were cached while they keep the value that
        adds nothing (`_ADDED_LATER`): an agent built before such a field existed is still the
        one its recipe names."""
        return {k: v for k, v in asdict(self).items() if not (k in _ADDED_LATER and v == _ADDED_LATER[k])}

    def key(self) -> str:
        """A short digest of the recipe (`identity`): the cache key of the build."""
        text = json.dumps(self.identity(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


_ADDED_LATER = {"capability_episodes": 0}


def default_out(config: BaseAgentConfig) -> Path:
    """Where a recipe's agent is cached: named by its source, seed and weak kinds, keyed by
    the whole recipe (`BaseAgentConfig.key`)."""
    from trace_gym.baseagent.weights import cache_home

    name = Path(config.source).name if "/" in config.source else config.source
    weak = ("-weak-" + "-".join(config.weak_kinds)) if config.weak_kinds else ""
    return cache_home() / "base-agent" / f"{name}-seed{config.seed}{weak}-{config.key()}"


def embedded_recipe(**overrides: Any) -> BaseAgentConfig:
    """The embedded default's recipe: the `[base_agent]` table of `configs/embedded.toml`."""
    from trace_gym.resources import embedded_config
    from trace_gym.runconfig import load

    path = embedded_config()
    return BaseAgentConfig.from_table(load(path).get("base_agent", {}), where=f"{path} [base_agent]", **overrides)


def default_agent_dir() -> Path:
    """Where the embedded default agent is built (`trace-gym base-agent build` with no flags)."""
    return default_out(embedded_recipe())


# -- training data ------------------------------------------------------------------------

def examples(tokenizer, demos: list[dict[str, Any]], config: BaseAgentConfig,
             lengths: list[int] | None = None) -> list[tuple[list[int], list[float]]]:
    """(token ids, per-token loss weight) per demonstration, cut to `max_tokens`: weight 0
    outside the agent's turns, `call_weight` inside `<tool_call>...</tool_call>`, 1 elsewhere.
    `lengths`, where given, receives each demonstration's whole length (before the cut)."""
    import re

    out = []
    for demo in demos:
        rendered = tokenizer.apply_chat_template(demo["messages"], tools=demo["tools"], tokenize=True,
                                                 return_dict=True, return_assistant_tokens_mask=True)
        text = tokenizer.apply_chat_template(demo["messages"], tools=demo["tools"], tokenize=False)
        encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if encoded["input_ids"] != rendered["input_ids"]:
            raise InvalidConfig("the tokenizer does not give the chat template's tokens back from its text")
        calls = [m.span() for m in re.finditer(r"<tool_call>.*?</tool_call>", text, flags=re.DOTALL)]
        weights = []
        for (start, _), m in zip(encoded["offset_mapping"], rendered["assistant_masks"]):
            inside = any(a <= start < b for a, b in calls)
            weights.append(0.0 if not m else config.call_weight if inside else 1.0)
        if lengths is not None:
            lengths.append(len(rendered["input_ids"]))
        ids, weights = rendered["input_ids"][: config.max_tokens], weights[: config.max_tokens]
        if any(weights[1:]):
            out.append((ids, weights))
    return out


def weak_writes(weak_kinds: tuple[str, ...]) -> frozenset[str]:
    """The write tools the weak kinds' requests use, read off a few allowed requests of each."""
    import gymnasium as gym

    from trace_gym.worlds import DOMAINS

    names: set[str] = set()
    for domain in DOMAINS.values():
        env_id = domain.target_env_id
        for kind in (k for k in weak_kinds if k in domain.kinds):
            env = gym.make(env_id, kinds=[kind], forbidden_rate=0.0, compound_rate=0.0)
            for seed in range(8):
                env.reset(seed=seed)
                target = cast("TargetEnv", env.unwrapped)  # a domain's target env
                names |= {w["name"] for r in target.task.requests for w in r.writes}
            env.close()
    return frozenset(names)


def capability_demonstrations(config: BaseAgentConfig) -> list[dict[str, Any]]:
    """`capability_episodes` oracle episodes of each shipped customer-service capability env on train seeds,
    {'messages', 'tools', 'kinds'} each, none of a weak kind or writing as a weak kind does."""
    if not config.capability_episodes:
        return []
    import gymnasium as gym

    from trace_gym.agents.base import OraclePolicy
    from trace_gym.driver import EpisodeRequest, play
    from trace_gym.registry import list_envs
    from trace_gym.seeding import demonstration_seed

    avoid = weak_writes(config.weak_kinds)
    style = {"prompt_style": embedded_knobs(config.env_kwargs)["prompt_style"]}
    from trace_gym.capabilities import CUSTOMER_SERVICE

    # the customer-service agent's envs only (the coding envs are another domain's)
    envs = sorted(e.id for e in list_envs()
                  if e.kind == "capability" and e.trusted and e.capability in CUSTOMER_SERVICE)
    demos = []
    for index, env_id in enumerate(envs):
        seed = demonstration_seed(index + 3, config.seed)  # after the targets' blocks 1 and 2
        kept = 0
        while kept < config.capability_episodes:  # a batch of seeds at a time, in order
            batch = [EpisodeRequest(s) for s in range(seed, seed + config.capability_episodes)]
            seed += config.capability_episodes
            for played in play(batch, OraclePolicy(), env_id=env_id, make_env=lambda name: gym.make(name, **style)):
                if played.error:
                    raise RuntimeError(f"{env_id} seed {played.seed}: the oracle's episode failed ({played.error})")
                kind = played.task.get("kind")
                writes = {c["function"]["name"] for m in played.messages for c in m.get("tool_calls") or []}
                if kept < config.capability_episodes and kind not in config.weak_kinds and not writes & avoid:
                    demos.append({"messages": played.messages, "tools": played.info["tools"], "kinds": (kind,)})
                    kept += 1
    return demos


# -- the model ----------------------------------------------------------------------------

def load_start(path: Path, config: BaseAgentConfig):
    """The model to train and its tokenizer, with the trainable parameters set."""
    import torch
    from transformers import AutoTokenizer

    from trace_gym.agents.causal_lm import load_causal_lm
    from trace_gym.agents.prefix import decoder_layers

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = load_causal_lm(path, torch.float32)
    layers = decoder_layers(model)  # the loss runs the shared-prefix forward, which needs this shape
    if config.method == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(
            r=config.lora_rank, lora_alpha=config.lora_rank, lora_dropout=0.0,
            target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
    else:
        model.get_input_embeddings().weight.requires_grad_(False)  # tied to the output layer
        for layer in layers[: frozen_layers(model, config)]:
            layer.requires_grad_(False)
    return model, tokenizer


def frozen_layers(model, config: BaseAgentConfig) -> int:
    """How many of the lowest decoder layers `freeze_share` keeps frozen (full fine-tuning)."""
    from trace_gym.agents.prefix import decoder_layers

    if config.method != "full" or not config.freeze_share:
        return 0
    return int(len(decoder_layers(model)) * config.freeze_share + 1e-9)


def use_bf16(config: BaseAgentConfig) -> bool:
    """Whether the build runs its matrix products under bf16 autocast ("auto": where the CPU
    computes bf16 natively)."""
    from trace_gym.agents.hardware import native_bf16

    return native_bf16() if config.bf16 == "auto" else bool(config.bf16)


def steps_of(data: list[tuple[list[int], list[float]]], groups: list[int], config: BaseAgentConfig) -> list[list[int]]:
    """The optimiser steps of the build, each `accumulate` demonstrations of one target (they
    share the system prompt and tools, run once per step), in a seeded order per epoch."""
    import torch

    generator = torch.Generator().manual_seed(config.seed)
    steps: list[list[int]] = []
    for _ in range(config.epochs):
        epoch = []
        for group in sorted(set(groups)):
            members = [i for i, g in enumerate(groups) if g == group]
            order = [members[j] for j in torch.randperm(len(members), generator=generator).tolist()]
            epoch += [order[k: k + config.accumulate] for k in range(0, len(order), config.accumulate)]
        steps += [epoch[j] for j in torch.randperm(len(epoch), generator=generator).tolist()]
    return steps


def step_loss(model, batch: list[tuple[list[int], list[float]]]) -> float:
    """Back-propagate the mean over `batch` of each demonstration's weighted mean next-token
    loss on the agent's tokens (logits only where there is a loss, each prefix the
    demonstrations share run once: `trace_gym.agents.prefix`); return the loss."""
    import torch

    from trace_gym.agents.prefix import shared_prefix

    positions, coefficients = [], []
    for ids, weights in batch:
        where = [t for t in range(1, len(ids)) if weights[t] > 0]
        total = sum(weights[t] for t in where)
        positions.append(where)
        coefficients += [weights[t] / total / len(batch) for t in where]
    coefficient = torch.tensor(coefficients)
    value = [0.0]

    def token_loss(logp: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        loss = -(logp.float() * coefficient[index]).sum()
        value[0] += float(loss.detach())
        return loss

    shared_prefix(model, [ids for ids, _ in batch], token_loss=token_loss, positions=positions)
    return value[0]


def sft(model, data: list[tuple[list[int], list[float]]], config: BaseAgentConfig,
        groups: list[int] | None = None) -> dict[str, Any]:
    """`epochs` passes over the demonstrations in a seeded order, `accumulate` per step (of one
    target each, by `groups`)."""
    import contextlib

    import torch

    steps = steps_of(data, groups or [0] * len(data), config)
    params = [p for p in model.parameters() if p.requires_grad]
    lr = config.lora_lr if config.method == "lora" else config.lr
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    bf16 = use_bf16(config)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
    warmup = max(1, len(steps) // 10)
    model.train()
    losses, tokens, started = [], 0, time.perf_counter()
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from trace_gym.progress import progress_bar, shows_progress

    with progress_bar(logger, TextColumn("SFT"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[loss]}"),
                      TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), transient=True) as bar:
        task = bar.add_task("sft", total=len(steps), loss="")
        # off a terminal the bar does not draw: a line a minute instead
        minute = None if not shows_progress(logger) or bar.console.is_terminal else started
        for step, batch in enumerate(steps):
            scale = (step + 1) / warmup if step < warmup else \
                0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, len(steps) - warmup)))
            for group in optimizer.param_groups:
                group["lr"] = lr * scale
            with autocast:
                losses.append(step_loss(model, [data[i] for i in batch]))
            tokens += sum(len(data[i][0]) for i in batch)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            bar.update(task, advance=1, loss=f"loss {sum(losses[-5:]) / len(losses[-5:]):.3f}")
            now = time.perf_counter()
            if minute is not None and (now - minute >= 60 or step + 1 == len(steps)):
                minute = now
                left = (now - started) / (step + 1) * (len(steps) - step - 1)
                logger.info(f"SFT: step {step + 1}/{len(steps)}, loss {sum(losses[-5:]) / len(losses[-5:]):.3f}, "
                            f"{now - started:.0f} s elapsed, about {left:.0f} s left")
    model.eval()
    seconds = time.perf_counter() - started
    logger.info(f"SFT: {len(steps)} steps over {len(data)} demonstrations x {config.epochs} epoch(s), {tokens} "
                f"tokens in {seconds:.0f} s ({tokens / max(seconds, 1e-9):.0f} tokens/s"
                f"{', bf16 autocast' if bf16 else ''}); last loss {losses[-1]:.3f}")
    return {"steps": len(steps), "tokens": tokens, "examples": len(data), "bf16": bf16,
            "final_loss": round(sum(losses[-5:]) / len(losses[-5:]), 4), "first_loss": round(losses[0], 4)}


# -- the build ----------------------------------------------------------------------------

def build(config: BaseAgentConfig = BaseAgentConfig(), out: Path | None = None, *, wheel: Path | None = None,
          gguf: Path | None = None) -> Path:
    """Build the base agent into `out` (default: the cache, keyed by the config) and return
    its path; a finished build of the same config is returned as it is."""
    import torch

    from trace_gym.baseagent.scratch import demonstrations
    from trace_gym.baseagent.weights import pretrained, save_model_dir

    out = Path(out) if out else default_out(config)
    record = out / "trace_gym_build.json"
    if record.is_file() and json.loads(record.read_text()).get("config") == json.loads(json.dumps(config.identity())):
        logger.info(f"base agent: {out} is already built with this configuration")
        return out
    from trace_gym.baseagent.weights import check_build_out

    check_build_out(out)  # before the build's minutes, not after
    started = time.perf_counter()
    torch.set_num_threads(config.threads)
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(config.seed)  # LoRA's initialisation draws from the global generator
    from trace_gym.agents.hardware import vector_flags

    seen = vector_flags()
    logger.info(f"base agent: SFT in {'bf16 autocast (weights fp32)' if use_bf16(config) else 'fp32'} on "
                f"{config.threads} thread(s) (CPU flags: {seen})")
    start = pretrained(config.source, wheel=wheel, gguf=gguf)
    model, tokenizer = load_start(start, config)
    demos = demonstrations(config) + capability_demonstrations(config)
    data: list[tuple[list[int], list[float]]] = []
    groups: list[int] = []
    prompts: dict[str, int] = {}
    lengths: list[int] = []
    for demo in demos:  # demonstrations of one target share a system prompt: they train together
        kept = examples(tokenizer, [demo], config, lengths)
        data += kept
        groups += [prompts.setdefault(demo["messages"][0]["content"], len(prompts))] * len(kept)
    if not data:
        raise InvalidConfig(f"no demonstration has an agent token within max_tokens={config.max_tokens}")
    longest, cut = max(lengths), sum(n > config.max_tokens for n in lengths)
    logger.info(f"demonstrations: {len(demos)} oracle episodes of the targets and capability envs ({len(data)} used), "
                f"{sum(len(ids) for ids, _ in data)} tokens; {cut} cut at max_tokens={config.max_tokens} (the longest "
                f"{longest} tokens)")
    stats = {**sft(model, data, config, groups), "demonstrations": len(demos), "cut": cut, "longest": longest}
    if config.method == "lora":
        model = model.merge_and_unload()
    for p in model.parameters():
        p.requires_grad_(False)
    # the record goes in with the weights: a directory that has it is a finished build
    save_model_dir(model, tokenizer, out, files={record.name: json.dumps(
        {"config": config.identity(), "start": str(start), "sft": stats, "torch": torch.__version__,
         "precision": "bf16 autocast, fp32 weights" if use_bf16(config) else "fp32", "threads": config.threads,
         "cpu_flags": seen},
        indent=2, sort_keys=True) + "\n"})
    seconds = time.perf_counter() - started
    from trace_gym import rates

    # demonstrations a minute, the download and the export included: --dry-run's estimate
    rates.record("base-agent build", config.source, len(demos) * config.epochs, seconds)
    logger.info(f"built {out} in {seconds:.0f} s")
    return out
