"""The base agent's from-scratch recipe (`trace-gym base-agent build --from scratch`): a tiny
Qwen3-architecture model with a locally trained byte-level BPE tokenizer, warm-started by SFT
on oracle demonstrations of the target envs. It needs no download at all, which is why the
committed test fixture and the offline checks use it; the default recipe
(`trace_gym.baseagent.build`) starts from pretrained SmolLM2 weights instead.

No model hub is reachable here, so everything is made from the seed: the demonstrations
(oracle episodes on train seeds, compact prompts), the tokenizer (trained on their text),
the weights (initialised from the seed, trained with a fixed order on one thread). The same
seed gives the same files. The SFT mix is configurable: kinds listed as weak are left out
of the demonstrations (or kept at `weak_share`), which is how the embedded default gets
recurring failures for analysis to find.

The training loop is plain PyTorch rather than a trainer class: a tiny model on one CPU
thread for a fixed time budget, with loss on assistant tokens only (the chat template's
generation markers), needs twenty lines and no checkpoint machinery.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from trace_gym.baseagent.template import CHAT_TEMPLATE, EOS, PAD, SPECIAL_TOKENS
from trace_gym.errors import InvalidConfig
from trace_gym.runconfig import embedded_knobs, target_knobs
from trace_gym.worlds import DOMAINS

if TYPE_CHECKING:
    from trace_gym.targets.env import TargetEnv

logger = logging.getLogger(__name__)

PRESETS: dict[str, dict[str, int]] = {
    # ~0.9 M parameters (the build prints the count): the embedded default
    "default": {"vocab_size": 3072, "hidden_size": 128, "intermediate_size": 384, "num_hidden_layers": 3,
                "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32},
    # ~0.14 M parameters: the committed test fixture (under 2 MB with its tokenizer)
    "fixture": {"vocab_size": 1024, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 32},
}
FIXTURE_RECIPE: dict[str, object] = {"preset": "fixture", "episodes": 30, "steps": 40, "warmup_steps": 40,
                                     "threads": 1}
"""The recipe of the committed test fixture (tests/fixtures/tiny_agent/, whose build record
holds it): the pipeline's smoke budget builds it from this where no checkout is at hand."""
TARGETS = tuple(d.target_env_id for d in DOMAINS.values())
REPEAT_HALF = 24
"""Length of each half of a warm-up repeat row: the repeat always starts this many tokens
after the original (see `TinyAgentConfig.warmup_steps`)."""


@dataclass(frozen=True)
class TinyAgentConfig:
    """How the tiny agent is built. Every field is validated at construction."""

    seed: int = 0
    """Seed of everything: demonstrations, tokenizer, weights, data order."""
    preset: str = "default"
    """Model size: 'default' (~0.9 M parameters) or 'fixture' (~0.14 M, for tests)."""
    episodes: int = 400
    """Oracle demonstrations per target env."""
    weak_kinds: tuple[str, ...] = ()
    """Request kinds left out of the demonstrations, so the agent stays weak on them."""
    weak_share: float = 0.0
    """Share of demonstrations with a weak kind that are kept anyway (in [0, 1])."""
    steps: int = 600
    """SFT optimiser steps (a fixed count, so the build does not depend on the machine's speed;
    with the warm-up, a little over four minutes on two CPU cores for the default preset)."""
    max_tokens: int = 1536
    """Longest demonstration kept, in tokens."""
    lr: float = 4e-3
    """Peak AdamW learning rate (cosine decay after a short warm-up)."""
    batch_tokens: int = 2048
    """Tokens per optimiser step (demonstrations are packed into batches up to this)."""
    windows: bool = True
    """Also train on each agent turn with only its recent context (from the last customer
    message): short examples whose calls take ids and values said a few dozen tokens
    earlier, meant to teach carrying them into calls sooner than full demonstrations do
    (the default agent still does not copy them: see docs/base-agent.md)."""
    warmup_steps: int = 240
    """Steps before SFT: a third on a synthetic repeat task (random tokens shown twice),
    the rest on short lookup drills (`lookup_drills`). Neither teaches copying by content:
    the repeat, always `REPEAT_HALF` tokens after the original, is learned as a copy from
    that fixed distance (the model then repeats halves of that length and of no other),
    and the drills as templates. Builds without the warm-up, or without its repeat stage,
    parsed far fewer of their turns, so it stays."""
    call_weight: float = 4.0
    """Loss weight of tokens inside tool calls, against 1 for other assistant tokens: the
    ids and values a call copies are few tokens but decide the episode."""
    threads: int = 2
    """Torch threads while building (results are reproducible for a given count)."""
    env_kwargs: dict[str, Any] = field(default_factory=lambda: embedded_knobs({
        "compound_rate": 0.1, "unknown_id_rate": 0.2, "distractors": 0}))
    """How the demonstration episodes are drawn (target env knobs)."""

    def __post_init__(self) -> None:
        from trace_gym.validation import require

        require(self, "preset", self.preset in PRESETS, f"allowed: {', '.join(PRESETS)}")
        require(self, "episodes", isinstance(self.episodes, int) and 1 <= self.episodes <= 100_000, "must be in 1..100000")
        require(self, "weak_share", 0.0 <= self.weak_share <= 1.0, "must be in [0, 1]")
        require(self, "steps", isinstance(self.steps, int) and self.steps >= 0, "must be an integer >= 0")
        require(self, "warmup_steps", isinstance(self.warmup_steps, int) and self.warmup_steps >= 0,
                "must be an integer >= 0")
        require(self, "threads", isinstance(self.threads, int) and self.threads >= 1, "must be an integer >= 1")
        require(self, "seed", type(self.seed) is int and self.seed >= 0, "must be an integer >= 0")
        require(self, "windows", isinstance(self.windows, bool), "must be true or false")
        require(self, "batch_tokens", type(self.batch_tokens) is int and self.batch_tokens >= 1,
                "must be an integer >= 1")
        require(self, "lr", isinstance(self.lr, (int, float)) and self.lr > 0, "must be a number > 0")
        require(self, "call_weight", isinstance(self.call_weight, (int, float)) and self.call_weight >= 0,
                "must be a number >= 0")
        require(self, "max_tokens", type(self.max_tokens) is int and 256 <= self.max_tokens <= 8192,
                "must be an integer in 256..8192")
        object.__setattr__(self, "weak_kinds", tuple(self.weak_kinds))
        known = {kind for d in DOMAINS.values() for kind in d.kinds}
        bad = [k for k in self.weak_kinds if k not in known]
        require(self, "weak_kinds", not bad, f"unknown kind(s) {bad}; allowed: {', '.join(sorted(known))}")


def default_cache_dir() -> Path:
    """Where a from-scratch build goes without --out."""
    from trace_gym.baseagent.weights import cache_home

    return cache_home() / "tiny-agent"


# -- demonstrations --------------------------------------------------------------------

class DemonstrationConfig(Protocol):
    """What `demonstrations` reads of a recipe's config: these fields of `TinyAgentConfig`, or
    of `trace_gym.baseagent.build.BaseAgentConfig`."""

    @property
    def seed(self) -> int:
        """The build's seed."""
        ...
    @property
    def episodes(self) -> int:
        """Oracle episodes per target."""
        ...
    @property
    def weak_kinds(self) -> tuple[str, ...]:
        """Request kinds left out of the demonstrations but for `weak_share` of them."""
        ...
    @property
    def weak_share(self) -> float:
        """The share of the weak kinds' episodes kept."""
        ...
    @property
    def env_kwargs(self) -> dict[str, Any]:
        """The targets' knobs."""
        ...


def demonstrations(config: DemonstrationConfig) -> list[dict[str, Any]]:
    """Oracle episodes on train seeds: {'messages', 'tools', 'kinds'} per episode."""
    import gymnasium as gym
    import numpy as np

    import trace_gym  # noqa: F401
    from trace_gym.agents.base import OraclePolicy
    from trace_gym.driver import play
    from trace_gym.rng import Rng

    keep = Rng(np.random.default_rng([config.seed, 7]))
    demos = []
    for env_index, env_id in enumerate(TARGETS):
        kinds: dict[int, tuple[str, ...]] = {}
        episodes = _kept_episodes(env_id, env_index, config, keep, kinds)
        # one episode at a time, in seed order: the demonstrations keep the order of their seeds
        for played in play(episodes, OraclePolicy(), env_id=env_id,
                           make_env=lambda name: gym.make(name, **target_knobs(name, config.env_kwargs))):
            if played.error:
                raise RuntimeError(f"{env_id} seed {played.seed}: the oracle's episode failed ({played.error})")
            demos.append({"messages": played.messages, "tools": played.info["tools"],
                          "kinds": kinds.pop(played.seed)})
    return demos


def _kept_episodes(env_id: str, env_index: int, config: DemonstrationConfig, keep: Any,
                   kinds: dict[int, Any]) -> Iterator[Any]:
    """The next `config.episodes` train seeds whose task has no weak kind (or is kept anyway,
    at `weak_share`), found by resetting an env of their own: a seed left out is never played.
    Each seed's task kinds go in `kinds`."""
    import gymnasium as gym

    from trace_gym.driver import EpisodeRequest
    from trace_gym.seeding import demonstration_seed

    probe = gym.make(env_id, **target_knobs(env_id, config.env_kwargs))
    try:
        seed = demonstration_seed(env_index + 1, config.seed)
        made = 0
        while made < config.episodes:
            probe.reset(seed=seed)
            seed += 1
            task_kinds = cast("TargetEnv", probe.unwrapped).task.kinds  # env_id is one of the TARGETS
            if any(k in config.weak_kinds for k in task_kinds) and not keep.chance(config.weak_share):
                continue
            kinds[seed - 1] = task_kinds
            made += 1
            yield EpisodeRequest(seed - 1)
    finally:
        probe.close()


@functools.lru_cache(maxsize=1)  # compiling the template costs ten times a rendering
def _plain_template():
    import jinja2

    source = CHAT_TEMPLATE.replace("{%- generation %}", "").replace("{%- endgeneration %}", "")
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda v: json.dumps(v)
    return env.from_string(source)


def _plain_text(demo: dict[str, Any]) -> str:
    """A demonstration rendered with the template (for tokenizer training)."""
    return _plain_template().render(messages=demo["messages"], tools=demo["tools"], add_generation_prompt=False)


# -- tokenizer -------------------------------------------------------------------------

def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on `texts`, with the chat template set."""
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ.setdefault("RAYON_NUM_THREADS", "1")  # one thread: merges in a fixed order
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    # Digits one by one: ids and amounts are copied digit by digit, which a tiny model learns
    # far sooner than copying multi-digit chunks that BPE cuts differently each time.
    # Spaces apart: an id is the same tokens after "is " as after a quote in a call.
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(" ", behavior="isolated"), pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False)])
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, min_frequency=2,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=EOS, pad_token=PAD,
                                   additional_special_tokens=SPECIAL_TOKENS[3:])
    fast.chat_template = CHAT_TEMPLATE
    fast.padding_side = "left"
    return fast


# -- model -----------------------------------------------------------------------------

def new_model(preset: str, tokenizer, seed: int):
    """A freshly initialised Qwen3 model of the preset's size for the tokenizer's vocabulary,
    its weights drawn from `seed`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    dims: dict[str, Any] = dict(PRESETS[preset])
    dims["vocab_size"] = len(tokenizer)
    # rope_parameters: what transformers 5 reads the legacy rope_theta keyword into (the same config)
    config = Qwen3Config(**dims, max_position_embeddings=8192,
                         rope_parameters={"rope_theta": 10_000.0, "rope_type": "default"}, tie_word_embeddings=True,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, use_cache=True)
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config)


# -- SFT -------------------------------------------------------------------------------

def windows(demo: dict[str, Any]) -> list[dict[str, Any]]:
    """One short demonstration per agent turn: from the last customer message before it,
    with no system prompt and no tool list."""
    messages = demo["messages"]
    out = []
    for i, m in enumerate(messages):
        if m["role"] != "assistant":
            continue
        start = max(j for j in range(i) if messages[j]["role"] == "user")
        out.append({"messages": messages[start: i + 1], "tools": [], "kinds": demo["kinds"]})
    return out


def encode(tokenizer, demo: dict[str, Any]) -> tuple[list[int], list[int]]:
    """A demonstration's token ids and, per token, whether it is the agent's (the loss's)."""
    out = tokenizer.apply_chat_template(demo["messages"], tools=demo["tools"], tokenize=True,
                                        return_dict=True, return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    return ids, mask


QUESTIONS = {
    "user_id": "Could you please tell me your user id?",
    "reservation_id": "Which reservation is this about? Please give me the reservation id.",
    "order_id": "Which order is this about? Please give me the order id.",
    "email": "First I need to verify your identity: what is your email address?",
    "flight_number": "Which flight do you mean? Please tell me the flight number and date.",
}


def lookup_drills(seed: int, n: int) -> list[dict[str, Any]]:
    """Short synthetic turns: the agent asks for a value, the customer gives it (among
    other facts), the agent calls the tool that takes it. They are meant to teach the
    lookup every id in a real episode needs (find the value asked for, copy it exactly) on
    examples a few dozen tokens long, where a demonstration spends a thousand tokens per
    copy; what the default build learns from them is the question and the call's shape."""
    import numpy as np

    from trace_gym.rng import Rng
    from trace_gym.worlds import people

    rng = Rng(np.random.default_rng([seed, 11]))
    drills = []
    for _ in range(n):
        first, last = rng.choice(people.FIRST_NAMES), rng.choice(people.LAST_NAMES)
        date = f"2024-05-{rng.integer(14, 19):02d}"
        values = {
            "user_id": f"{first.lower()}_{last.lower()}_{rng.digits(4)}",
            "reservation_id": rng.letters(6),
            "order_id": f"#W{rng.digits(7)}",
            "email": f"{first.lower()}.{last.lower()}{rng.digits(4)}@example.com",
            "flight_number": f"HAT{rng.digits(3)}",
        }
        said = {
            "user_id": f"My user id is {values['user_id']}.",
            "reservation_id": f"The reservation id is {values['reservation_id']}.",
            "order_id": f"The order id is {values['order_id']}.",
            "email": f"My email is {values['email']}.",
            "flight_number": f"It's flight {values['flight_number']} on {date}.",
        }
        tools = {"user_id": "get_user_details", "reservation_id": "get_reservation_details",
                 "order_id": "get_order_details", "email": "find_user_id_by_email", "flight_number": "get_flight_status"}
        key = rng.choice(list(values))
        others = rng.sample([k for k in values if k != key], rng.integer(0, 2))
        facts = [key, *others]
        rng.shuffle(facts)
        arguments = {key: values[key]}
        if key == "flight_number":
            arguments["date"] = date
        drills.append({"messages": [
            {"role": "assistant", "content": QUESTIONS[key]},
            {"role": "user", "content": " ".join(said[k] for k in facts)},
            {"role": "assistant", "content": None, "tool_calls": [{"id": "d", "type": "function", "function": {
                "name": tools[key], "arguments": json.dumps(arguments)}}]}], "tools": [], "kinds": ["drill"]})
    return drills


def new_optimizer(model, lr: float):
    """The AdamW every training stage of the build uses."""
    import torch

    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.98))


def weighted_loss(model, rows: list[tuple[Any, Any]], pad_id: int):
    """(weighted mean next-token loss, real tokens) of a batch of (token ids, per-token
    weights) rows, padded on the right; a token's weight (0 outside the agent's turns)
    scales its loss."""
    import torch

    width = max(len(ids) for ids, _ in rows)
    input_ids = torch.full((len(rows), width), pad_id)                      # (B, T)
    weights = torch.zeros((len(rows), width))
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for row, (ids, w) in enumerate(rows):
        input_ids[row, : len(ids)] = torch.as_tensor(ids)
        attention[row, : len(ids)] = 1
        weights[row, : len(ids)] = torch.as_tensor(w, dtype=torch.float)
    logits = model(input_ids=input_ids, attention_mask=attention).logits  # (B, T, V)
    nll = torch.nn.functional.cross_entropy(                              # (B, T-1): token t+1 from t
        logits[:, :-1].transpose(1, 2), input_ids[:, 1:], reduction="none")
    w = weights[:, 1:]
    return (nll * w).sum() / w.sum().clamp(min=1.0), int(attention.sum())


def repeat_stage(model, tokenizer, optimizer, config: TinyAgentConfig) -> float:
    """`warmup_steps // 3` steps on random token sequences shown twice (halves of
    `REPEAT_HALF`), loss on the repeat; returns the last step's loss."""
    import torch

    generator = torch.Generator().manual_seed(config.seed + 1)
    special = set(tokenizer.all_special_ids)
    vocab = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    model.train()
    loss = torch.tensor(0.0)
    for _ in range(config.warmup_steps // 3):
        half = vocab[torch.randint(len(vocab), (64, REPEAT_HALF), generator=generator)]  # (B, H)
        input_ids = torch.cat([half, half], dim=1)                                       # (B, 2H)
        logits = model(input_ids=input_ids).logits                                       # (B, 2H, V)
        nll = torch.nn.functional.cross_entropy(  # token t+1 of the repeat from token t
            logits[:, REPEAT_HALF - 1:-1].transpose(1, 2), input_ids[:, REPEAT_HALF:])
        optimizer.zero_grad(set_to_none=True)
        nll.backward()
        optimizer.step()
        loss = nll.detach()
    return loss.item()


def warm_up(model, tokenizer, config: TinyAgentConfig) -> float:
    """The repeat stage, then the rest of `warmup_steps` on lookup drills (batches of 32,
    loss on the agent's turns), with one optimiser; returns the last drill step's loss."""
    optimizer = new_optimizer(model, config.lr)
    logger.info(f"warm-up: repeat task loss {repeat_stage(model, tokenizer, optimizer, config):.3f}")
    drill_steps = config.warmup_steps - config.warmup_steps // 3
    drills = [encode(tokenizer, d) for d in lookup_drills(config.seed, 32 * drill_steps)]
    loss = 0.0
    for step in range(drill_steps):
        batch_loss, _ = weighted_loss(model, drills[32 * step: 32 * (step + 1)], tokenizer.pad_token_id)
        optimizer.zero_grad(set_to_none=True)
        batch_loss.backward()
        optimizer.step()
        loss = batch_loss.item()
        if (step + 1) % 50 == 0:
            logger.info(f"warm-up: lookup drills {step + 1}  loss {loss:.3f}")
    return round(loss, 4)


def sft(model, tokenizer, demos: list[dict[str, Any]], config: TinyAgentConfig) -> dict[str, Any]:
    """`config.steps` AdamW steps on assistant tokens; returns training statistics."""
    import torch

    open_call, close_call = tokenizer.convert_tokens_to_ids(["<tool_call>", "</tool_call>"])
    examples = []
    whole = len(demos)
    if config.windows:
        demos = demos + [w for d in demos for w in windows(d)]
    fitting_whole = 0
    for index, demo in enumerate(demos):
        ids, mask = encode(tokenizer, demo)
        if len(ids) > config.max_tokens:
            continue
        fitting_whole += index < whole
        weights, inside = [], False
        for token, m in zip(ids, mask):
            inside = (inside or token == open_call) and token != close_call
            weights.append(0.0 if not m else config.call_weight if inside else 1.0)
        examples.append((torch.tensor(ids), torch.tensor(weights)))
    if not examples:
        raise InvalidConfig(f"no demonstration fits max_tokens={config.max_tokens}")
    logger.info(f"SFT examples: {fitting_whole} of {whole} whole demonstrations fit max_tokens={config.max_tokens}; "
                f"{len(examples)} in all with the per-turn windows")
    # Batches of similar lengths (few pad tokens), visited in a seeded order, epoch after epoch.
    order = sorted(range(len(examples)), key=lambda i: len(examples[i][0]))
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for i in order:
        n = len(examples[i][0])
        if current and max(longest, n) * (len(current) + 1) > config.batch_tokens:
            batches.append(current)
            current, longest = [], 0
        current.append(i)
        longest = max(longest, n)
    batches.append(current)
    generator = torch.Generator().manual_seed(config.seed)
    schedule: list[int] = []
    while len(schedule) < config.steps:
        schedule += torch.randperm(len(batches), generator=generator).tolist()
    optimizer = new_optimizer(model, config.lr)
    model.train()
    losses, tokens = [], 0
    for step, b in enumerate(schedule[: config.steps]):
        warm = min(1.0, (step + 1) / 10)
        decay = 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / max(1, config.steps)))
        for group in optimizer.param_groups:
            group["lr"] = config.lr * warm * decay
        loss, n_tokens = weighted_loss(model, [examples[i] for i in batches[b]], tokenizer.pad_token_id)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
        tokens += n_tokens
        if (step + 1) % 10 == 0:
            logger.info(f"step {step + 1}/{config.steps}  loss {sum(losses[-10:]) / len(losses[-10:]):.3f}")
    model.eval()
    return {"steps": config.steps, "tokens": tokens, "examples": len(examples), "batches": len(batches),
            "final_loss": round(sum(losses[-10:]) / max(1, len(losses[-10:])), 4)}


# -- the build -------------------------------------------------------------------------

def build(config: TinyAgentConfig = TinyAgentConfig(), out: Path | None = None) -> Path:
    """Build the tiny agent into `out` (default: the cache directory); returns the path."""
    import torch

    torch.set_num_threads(config.threads)
    torch.use_deterministic_algorithms(True)
    out = Path(out) if out else default_cache_dir() / f"{config.preset}-seed{config.seed}"
    from trace_gym.baseagent.weights import check_build_out

    check_build_out(out)  # before the build's minutes: a build replaces its directory whole
    started = time.perf_counter()
    logger.info(f"demonstrations: {config.episodes} oracle episodes per target env")
    demos = demonstrations(config)
    logger.info("tokenizer: training a byte-level BPE")
    tokenizer = train_tokenizer([_plain_text(d) for d in demos], PRESETS[config.preset]["vocab_size"])
    model = new_model(config.preset, tokenizer, config.seed)
    n_params = sum(p.numel() for p in model.parameters())
    logger.info(f"model: Qwen3 architecture, {n_params / 1e6:.2f} M parameters; SFT for {config.steps} steps")
    warm = warm_up(model, tokenizer, config)
    stats = {"copy_warmup_loss": warm, **sft(model, tokenizer, demos, config)}
    tmp = out.with_name(out.name + ".partial")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    (tmp / "trace_gym_build.json").write_text(json.dumps({
        "config": asdict(config), "parameters": n_params, "sft": stats}, indent=2, sort_keys=True) + "\n")
    if out.exists():
        import shutil

        check_build_out(out)
        shutil.rmtree(out)
    tmp.rename(out)  # the finished build appears at once, never half-written
    logger.info(f"built {out} in {time.perf_counter() - started:.0f} s")
    return out
