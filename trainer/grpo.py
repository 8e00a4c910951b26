"""Group-by-seed GRPO with one LoRA adapter per capability env (TRACE, step 3).

One iteration, as the paper describes it:

1. **Rollouts.** Draw G seeds from the train split (never from its validation slice) and play
   K episodes of each at temperature T; `hint_fraction` of each group's episodes get the env's
   hint in their system prompt.
2. **Groups.** Group the episodes by seed (the key is the seed, and every group is asserted
   to hold K episodes: never grouped by position) and give each episode the advantage
   A = (r - mean_g) / (std_g + eps).
3. **Informative groups.** A group whose K rewards are all equal has A = 0 everywhere and
   teaches nothing: it is dropped, and fresh seeds are drawn in its place (at most
   `max_resample_rounds` times) until at least `min_informative` of G groups have variance.
4. **Samples.** One sample per agent turn: the turn's prompt with the hint-free system
   prompt, and the tokens the model sampled; the loss covers only those completion tokens
   (tool outputs and the customer's turns get no gradient), each with its episode's A.
5. **Loss.** The clipped surrogate, token by token,
       policy = -min(ratio * A, clip(ratio, 1 - eps, 1 + eps_high) * A),  ratio = p_new / p_old,
   plus, when beta > 0, beta * KL(new || adapter-disabled model) (the k3 estimator);
       loss = policy + beta * kl,
   averaged over each episode's tokens (every turn the agent wrote: GRPO's o_i), then over
   the episodes, 1/G sum_i 1/|o_i| sum_t (`loss_normalization = "sample"`; "turn" averages
   per turn then over turns, "token" over all tokens, as DAPO). AdamW, the gradient's norm
   clipped at 1.0, `steps_per_batch` steps on the batch.

Where this departs from the paper, or fixes what it leaves open:

- p_old is the rollout backend's log-probability of each sampled token (`old_logp =
  "sampler"`). With one step per batch (the paper's recipe) the ratio therefore differs from
  1 only where the backend and the trainer disagree (vLLM's kernels, bf16);
  `loss/logp_mismatch` and `loss/clip_fraction` show how much. With `old_logp = "trainer"`
  (what "auto" means for the OpenVINO backend: it samples in bf16) p_old is the trainer's
  own, taken at the batch's first step, so the update is exactly the trainer's, and
  `loss/logp_mismatch` still reports the sampler's distance from it. For hinted samples the
  sampler's log-probabilities are for another prompt, so p_old there is the trainer's own on
  the hint-free prompt, taken at the batch's first step: the hint changes which completions
  are sampled, not the ratio.
- Constant groups are resampled with fresh seeds (bounded) instead of only dropped, so that
  a batch is not left with a handful of groups; every episode played counts in
  `episodes/total`, the rollout budget that comparisons hold equal.
- std is the population standard deviation of the group's K rewards; `advantage_std =
  "batch"` takes it over the whole batch, as the reference code does.
- Every prefix the batch's samples share (a group's prompt, an episode's earlier turns) runs
  through the model once (`trace_gym.agents.prefix`): the gradient is exact, the same as running each
  sample alone.
- Randomness comes from the seed alone: the seeds of iteration i and each episode's sampling
  seed derive from (seed, i), so a resumed run draws what the uninterrupted one drew.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from trace_gym.agents.episodes import Backend, EpisodeRequest, PlayedEpisode, sampling_seed
from trace_gym.agents.prefix import per_sample, shared_prefix
from trace_gym.errors import InternalError
from trace_gym.seeding import BANDS, SPLITS, band
from trace_gym.trainer import distributed
from trace_gym.trainer.config import GRPOConfig
from trace_gym.trainer.precision import bf16_update


def validation_seeds(n: int) -> list[int]:
    """The first `n` seeds of the train split's validation slice."""
    return band("validation", n)


# -- 1. rollouts ---------------------------------------------------------------------------

def draw_seeds(config: GRPOConfig, iteration: int, round_: int, n: int, taken: set[int]) -> list[int]:
    """`n` distinct train seeds outside the validation slice and outside `taken`, a function
    of (config.seed, iteration, round)."""
    rng = np.random.default_rng([config.seed, iteration, round_])
    low, high = SPLITS["train"].start, BANDS["validation"].start
    seeds: list[int] = []
    while len(seeds) < n:
        seed = int(rng.integers(low, high))
        if seed not in taken:
            taken.add(seed)
            seeds.append(seed)
    return seeds


def requests_for(config: GRPOConfig, seeds: list[int], iteration: int) -> list[EpisodeRequest]:
    """K episodes per seed; the first `hinted()` of each group get the hint."""
    out = []
    for seed in seeds:
        for k in range(config.group_size):
            out.append(EpisodeRequest(seed=seed, sample=k, hint=k < config.hinted(),
                               sampling_seed=sampling_seed(config.seed, iteration, seed, k)))
    return out


# -- 2. groups and advantages -----------------------------------------------------------------

def group_by_seed(rollouts: list[PlayedEpisode], group_size: int) -> dict[int, list[PlayedEpisode]]:
    """The rollouts keyed by seed, each group asserted to hold `group_size` episodes with
    distinct sample indices."""
    groups: dict[int, list[PlayedEpisode]] = defaultdict(list)
    for r in rollouts:
        groups[r.seed].append(r)
    for seed, group in groups.items():
        samples = sorted(r.request.sample for r in group)
        if samples != list(range(group_size)):
            raise InternalError(f"group of seed {seed} holds samples {samples}, expected 0..{group_size - 1}")
    return dict(groups)


def is_constant(group: list[PlayedEpisode]) -> bool:
    """True when every rollout of the group has the same reward (no advantage to learn
    from)."""
    return len({r.reward for r in group}) == 1


def advantages(groups: dict[int, list[PlayedEpisode]], std: str = "group", eps: float = 1e-4,
               batch_rewards: list[float] | None = None) -> dict[tuple[int, int], float]:
    """A per (seed, sample): (r - mean_g) / (std + eps), std of the group or of the batch."""
    batch_std = float(np.std(batch_rewards if batch_rewards is not None else
                             [r.reward for g in groups.values() for r in g]))
    out = {}
    for seed, group in groups.items():
        rewards = np.array([r.reward for r in group], dtype=np.float64)
        scale = (float(rewards.std()) if std == "group" else batch_std) + eps
        for r, value in zip(group, rewards):
            out[(seed, r.request.sample)] = float((value - rewards.mean()) / scale)
    return out


# -- 3. informative groups -------------------------------------------------------------------

def collect(config: GRPOConfig, backend: Backend,
            iteration: int) -> tuple[dict[int, list[PlayedEpisode]], dict[str, Any]]:
    """Play groups until `min_informative` of G have reward variance (or the resampling is
    spent); return the informative groups and what was played."""
    taken: set[int] = set()
    informative: dict[int, list[PlayedEpisode]] = {}
    played: list[PlayedEpisode] = []
    first_constant = all_constant = 0
    need = math.ceil(config.min_informative * config.groups)
    for round_ in range(config.max_resample_rounds + 1):
        n = config.groups if round_ == 0 else config.groups - len(informative)
        seeds = draw_seeds(config, iteration, round_, n, taken)
        rollouts = distributed.play_sharded(backend.play, requests_for(config, seeds, iteration))
        played += rollouts
        groups = group_by_seed(rollouts, config.group_size)
        constant = [s for s in seeds if is_constant(groups[s])]
        if round_ == 0:
            first_constant = len(constant)
        all_constant += len(constant)
        informative.update({s: groups[s] for s in seeds if s not in constant})
        if len(informative) >= need or len(informative) == config.groups:
            break
    return informative, {"played": played, "rounds": round_ + 1, "first_constant": first_constant,
                         "all_constant": all_constant}


# -- 4. samples ------------------------------------------------------------------------------

@dataclass
class Batch:
    """The loss's input: one sample per agent turn (its hint-free prompt and completion)
    and, per completion token, flat over the batch, its p_old, advantage and weight."""

    sequences: list[list[int]]
    """Per sample: the hint-free prompt, then the completion."""
    prompt_lengths: list[int]
    old_logp: torch.Tensor
    """(N,) the sampler's log-probability of every completion token, flat."""
    trainer_old: torch.Tensor
    """(N,) bool: tokens whose p_old is the trainer's (hinted samples; every token with
    `old_logp = "trainer"`)."""
    sampled: torch.Tensor
    """(N,) bool: tokens whose sampler log-probability is for the loss's prompt (not hinted):
    the ones `loss/logp_mismatch` compares."""
    advantage: torch.Tensor
    """(N,) the token's episode's advantage."""
    weight: torch.Tensor
    """(N,) the token's share of the loss (the normalisation)."""


def samples_of(groups: dict[int, list[PlayedEpisode]], adv: dict[tuple[int, int], float],
               normalization: str = "sample", old_logp: str = "sampler") -> Batch:
    """The batch of the informative groups, in seed then sample order: one sample per agent
    turn that produced tokens, each token weighted by `normalization` ('sample', 'turn' or
    'token'), its p_old taken from the trainer for hinted samples (or for all, with
    `old_logp` 'trainer')."""
    sequences, prompts, old, hinted, advantage, turn_of, episode_of = [], [], [], [], [], [], []
    episodes = 0
    for seed in sorted(groups):
        for r in sorted(groups[seed], key=lambda r: r.request.sample):
            played = False
            for turn in r.turns:
                if not turn.completion_ids:
                    continue
                sequences.append(turn.loss_prompt_ids + turn.completion_ids)
                prompts.append(len(turn.loss_prompt_ids))
                old += turn.logprobs
                hinted += [r.request.hint] * len(turn.completion_ids)
                advantage += [adv[(seed, r.request.sample)]] * len(turn.completion_ids)
                turn_of += [len(sequences) - 1] * len(turn.completion_ids)
                episode_of += [episodes] * len(turn.completion_ids)
                played = True
            episodes += played
    if normalization == "sample":  # 1/G sum_i 1/|o_i|, o_i every token the agent wrote in episode i
        counts = np.bincount(episode_of, minlength=episodes)
        weight = [1.0 / (episodes * counts[i]) for i in episode_of]
    elif normalization == "turn":
        counts = np.bincount(turn_of, minlength=len(sequences))
        weight = [1.0 / (len(sequences) * counts[i]) for i in turn_of]
    else:
        weight = [1.0 / max(1, len(turn_of))] * len(turn_of)
    hint = torch.tensor(hinted, dtype=torch.bool)
    trainer_old = torch.ones_like(hint) if old_logp == "trainer" else hint
    return Batch(sequences, prompts, torch.tensor(old, dtype=torch.float32), trainer_old, ~hint,
                 torch.tensor(advantage, dtype=torch.float32), torch.tensor(weight, dtype=torch.float32))


# -- 5. loss and update ----------------------------------------------------------------------

def clipped_surrogate(logp: torch.Tensor, old: torch.Tensor, advantage: torch.Tensor, eps_low: float,
                      eps_high: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token: -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A), and whether the
    clipped term is the one taken (the token gets no gradient)."""
    ratio = torch.exp(logp - old)                                                     # (P,)
    unclipped = ratio * advantage
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high) * advantage
    return -torch.minimum(unclipped, clipped), clipped < unclipped


def k3_kl(logp: torch.Tensor, ref: torch.Tensor) -> torch.Tensor:
    """Per token, the k3 estimate of KL(new || ref): exp(ref - new) - (ref - new) - 1 (>= 0)."""
    delta = ref - logp
    return torch.exp(delta) - delta - 1.0


def update(model: Any, optimizer: torch.optim.Optimizer, batch: Batch, config: GRPOConfig,
           params: list[torch.nn.Parameter]) -> dict[str, float]:
    """`steps_per_batch` optimiser steps on the batch; the loss's metrics of the first step.
    Under data parallelism (`trainer.distributed`) this process runs its share of the samples
    and the gradients are summed over the processes."""
    run = shared_prefix if config.shared_prefix else per_sample
    device = next(p for p in model.parameters()).device
    rank, size = distributed.world()
    if size > 1:
        batch = distributed.shard(batch, rank, size)
    batch = Batch(batch.sequences, batch.prompt_lengths, batch.old_logp.to(device), batch.trainer_old.to(device),
                  batch.sampled.to(device), batch.advantage.to(device), batch.weight.to(device))
    seconds: dict[str, float] = defaultdict(float)  # where the update's time goes (`time/*`)
    probe = None
    if config.movement:  # in every process, samples or none: its sums are collective
        t0 = time.perf_counter()
        probe = Probe.of(batch, config.movement_samples)
        probe.before = probe.logp(model, run, config.temperature)
        seconds["time/movement_s"] += time.perf_counter() - t0
    with bf16_update(model, config.autocast()):
        metrics = _update(model, optimizer, batch, config, params, run, seconds)
    if probe is not None:
        t0 = time.perf_counter()
        metrics.update(probe.movement(model, run, config.temperature))
        seconds["time/movement_s"] += time.perf_counter() - t0
    return {**metrics, **seconds}


def _update(model: Any, optimizer: torch.optim.Optimizer, batch: Batch, config: GRPOConfig,
            params: list[torch.nn.Parameter], run: Callable[..., torch.Tensor], seconds: dict[str, float]
            ) -> dict[str, float]:
    ref = None
    if config.beta > 0:
        with model.disable_adapter():
            ref = run(model, batch.sequences, batch.prompt_lengths, temperature=config.temperature)
    old = batch.old_logp.clone()
    metrics: dict[str, float] = {}
    model.train()
    for step in range(config.steps_per_batch):
        sums: defaultdict[str, float] = defaultdict(float)

        def token_loss(logp: torch.Tensor, index: torch.Tensor, old=old, step=step, sums=sums) -> torch.Tensor:
            p_old = old[index]
            if step == 0:
                p_old = torch.where(batch.trainer_old[index], logp.detach(), p_old)
            policy, was_clipped = clipped_surrogate(logp, p_old, batch.advantage[index], config.clip_eps,
                                                    config.eps_high)
            kl = k3_kl(logp, ref[index]) if ref is not None else torch.zeros_like(logp)
            loss = policy + config.beta * kl
            w = batch.weight[index]
            sums["policy"] += float((policy.detach() * w).sum())
            sums["kl"] += float((kl.detach() * w).sum())
            sums["clipped"] += float(was_clipped.sum())
            return (loss * w).sum()

        optimizer.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        logp = run(model, batch.sequences, batch.prompt_lengths, token_loss, temperature=config.temperature) \
            if batch.sequences else old.new_zeros(0)
        t1 = time.perf_counter()
        distributed.sum_gradients(params)  # no-op in one process
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm))
        optimizer.step()
        seconds["time/forward_backward_s"] += t1 - t0
        seconds["time/optimizer_s"] += time.perf_counter() - t1
        if step == 0:
            old = torch.where(batch.trainer_old, logp, old)
            sampler = batch.sampled
            gap = float((logp[sampler] - batch.old_logp[sampler]).abs().sum())
            policy, kl, clipped, n, gap, compared = distributed.sum_floats(
                [sums["policy"], sums["kl"], sums["clipped"], len(logp), gap, float(sampler.sum())])
            metrics = {
                "loss/policy": policy, "loss/kl": kl,
                "loss/clip_fraction": clipped / max(1, n), "loss/grad_norm": grad_norm,
                "loss/logp_mismatch": gap / compared if compared else 0.0,
                "tokens/completion": float(n),
            }
    optimizer.zero_grad(set_to_none=True)
    model.eval()
    return metrics


@dataclass
class Probe:
    """The samples of a batch the update's movement is measured on: up to `n` of them, evenly
    spaced, with their completion tokens' advantages. Measured in fp32 whatever the update's
    precision: an adapter's first steps change the log-probabilities by less than bf16
    resolves, and a bf16 measurement would read them as no change at all."""

    sequences: list[list[int]]
    prompt_lengths: list[int]
    advantage: torch.Tensor
    before: torch.Tensor | None = None

    @classmethod
    def of(cls, batch: Batch, n: int) -> Probe:
        """Up to `n` evenly spaced samples of `batch`."""
        count, k = len(batch.sequences), min(n, len(batch.sequences))
        chosen = sorted({round(i * (count - 1) / max(1, k - 1)) for i in range(k)})
        starts = np.cumsum([0] + [len(s) - p for s, p in zip(batch.sequences, batch.prompt_lengths)])
        tokens = [t for i in chosen for t in range(int(starts[i]), int(starts[i + 1]))]
        return cls([batch.sequences[i] for i in chosen], [batch.prompt_lengths[i] for i in chosen],
                   batch.advantage[torch.tensor(tokens, dtype=torch.long)] if tokens else batch.advantage[:0])

    def logp(self, model: Any, run: Callable[..., torch.Tensor], temperature: float) -> torch.Tensor:
        """The probe's completion tokens' log-probabilities under `model` as it is, in fp32."""
        device = next(p for p in model.parameters()).device
        if not self.sequences:
            return torch.zeros(0, device=device)
        with torch.no_grad(), torch.autocast(device.type, enabled=False):
            return run(model, self.sequences, self.prompt_lengths, temperature=temperature)

    def movement(self, model: Any, run: Callable[..., torch.Tensor], temperature: float) -> dict[str, float]:
        """How far the update moved the policy on the probe's tokens: the mean change of their
        log-probability, the same change signed by each token's advantage (> 0: toward what
        the advantages ask), and the k3 KL to the adapter-disabled model after it."""
        after = self.logp(model, run, temperature)
        with model.disable_adapter():
            ref = self.logp(model, run, temperature)
        if self.before is None:
            raise InternalError("Probe.movement needs `before`: the probe's log-probabilities before the update")
        after, ref = after.double(), ref.double()  # k3 of a change of 1e-4 nats is 5e-9: below fp32's reach of 1
        change = after - self.before.double()
        toward = torch.sign(self.advantage.to(change.device)) * change
        moved, signed, kl, n = distributed.sum_floats(
            [float(change.sum()), float(toward.sum()), float(k3_kl(after, ref).sum()), float(len(after))])
        return {"policy/logp_change": moved / max(1.0, n),
                "policy/logp_change_toward_advantage": signed / max(1.0, n), "policy/kl_to_base": kl / max(1.0, n)}


# -- the iteration ---------------------------------------------------------------------------

def iteration(config: GRPOConfig, model: Any, optimizer: torch.optim.Optimizer, backend: Backend,
              params: list[torch.nn.Parameter], index: int, clock: Callable[[], float] = time.perf_counter
              ) -> dict[str, Any]:
    """One rollout-and-update round; returns its metrics (`trainer.metrics.METRICS`)."""
    t0 = clock()
    backend.sync(model, index)
    synced = clock()
    groups, played = collect(config, backend, index)
    t1 = clock()
    rollouts = played["played"]
    rewards = [r.reward for r in rollouts]
    plain = [r for r in rollouts if not r.request.hint]  # what the policy does without the hint
    metrics: dict[str, Any] = {
        "iteration": index,
        "reward/mean": float(np.mean(rewards)), "reward/std": float(np.std(rewards)),
        "reward/pass_rate": float(np.mean([r.passed for r in rollouts])),
        "reward/hint_free": float(np.mean([r.reward for r in plain])) if plain else float("nan"),
        "reward/hint_free_pass_rate": float(np.mean([r.passed for r in plain])) if plain else float("nan"),
        "groups/constant_share": played["first_constant"] / config.groups,
        "groups/constant_share_all": played["all_constant"] / (len(rollouts) // config.group_size),
        "groups/informative": len(groups), "groups/rounds": played["rounds"],
        "episodes/total": len(rollouts),
        "tokens/turns": sum(len(r.turns) for r in rollouts),
    }
    checks: dict[str, list[float]] = defaultdict(list)
    passes: dict[str, list[bool]] = defaultdict(list)
    for r in rollouts:
        for name, credit in r.checks.items():
            checks[name].append(credit)
        for name, passed in r.check_passes.items():
            passes[name].append(passed)
    metrics.update({f"checks/{name}": float(np.mean(v)) for name, v in sorted(checks.items())})
    metrics.update({f"checks_passed/{name}": float(np.mean(v)) for name, v in sorted(passes.items())})
    if groups:
        adv = advantages(groups, config.advantage_std, config.std_eps, rewards)
        batch = samples_of(groups, adv, config.loss_normalization, config.p_old())
        metrics.update(update(model, optimizer, batch, config, params))
        metrics["tokens/prompt"] = float(sum(batch.prompt_lengths))
    t2 = clock()
    metrics.update({"time/rollout_s": t1 - t0, "time/sync_s": synced - t0, "time/update_s": t2 - t1})
    return metrics
