"""Group-by-seed GRPO: advantages and group keying, the samples and their gradient, the frozen
base, the hint-free loss prompt, resume, and learning on a small env."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import REPO

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from trace_gym.agents.episodes import EpisodeRequest, PlayedEpisode, Turn
from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.trainer import grpo
from trace_gym.trainer.config import VALIDATION_SEEDS, GRPOConfig

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


def _rollout(seed: int, sample: int, reward: float, hint: bool = False) -> PlayedEpisode:
    return PlayedEpisode(EpisodeRequest(seed, sample, hint, 0), "env", reward, {"termination_reason": "replied"}, [],
                   [Turn([1, 2, 3], [1, 2, 3], [4, 5], [-1.0, -2.0])], "policy", {})


# -- advantages and groups -------------------------------------------------------------------

rewards_strategy = st.lists(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=4, max_size=4),
                            min_size=1, max_size=5)


@given(rewards_strategy, st.randoms(use_true_random=False))
def test_advantages_depend_on_the_group_not_on_the_order(table, rnd):
    rollouts = [_rollout(100 + g, k, r) for g, rewards in enumerate(table) for k, r in enumerate(rewards)]
    shuffled = list(rollouts)
    rnd.shuffle(shuffled)  # across and within groups
    a = grpo.advantages(grpo.group_by_seed(rollouts, 4))
    b = grpo.advantages(grpo.group_by_seed(shuffled, 4))
    assert a == b
    for g, rewards in enumerate(table):
        mean = sum(rewards) / 4
        std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 4)
        for k, r in enumerate(rewards):
            assert a[(100 + g, k)] == pytest.approx((r - mean) / (std + 1e-4))
        assert sum(a[(100 + g, k)] for k in range(4)) == pytest.approx(0.0, abs=1e-9)


def test_batch_std_divides_by_the_std_of_every_reward():
    groups = grpo.group_by_seed([_rollout(1, 0, 0.0), _rollout(1, 1, 1.0), _rollout(2, 0, 1.0), _rollout(2, 1, 1.0)], 2)
    adv = grpo.advantages(groups, std="batch", eps=0.0)
    batch_std = math.sqrt(((0 - 0.75) ** 2 + 3 * 0.25 ** 2) / 4)
    assert adv[(1, 0)] == pytest.approx(-0.5 / batch_std)
    assert adv[(2, 0)] == 0.0


def test_groups_are_keyed_by_seed_and_checked():
    with pytest.raises(AssertionError, match="seed 7 holds samples \\[0, 0\\]"):
        grpo.group_by_seed([_rollout(7, 0, 1.0), _rollout(7, 0, 0.0)], 2)
    with pytest.raises(AssertionError, match="expected 0..2"):
        grpo.group_by_seed([_rollout(7, 0, 1.0), _rollout(7, 1, 0.0)], 3)


class ScriptedBackend:
    """Rewards by seed parity: even seeds constant (all 0), odd seeds informative."""

    def __init__(self) -> None:
        self.played: list[list[EpisodeRequest]] = []

    def sync(self, model, iteration):
        pass

    def play(self, requests):
        self.played.append(list(requests))
        return [_rollout(r.seed, r.sample, float(r.seed % 2 and r.sample == 0), r.hint) for r in requests]


def test_constant_groups_are_dropped_and_fresh_seeds_drawn_within_the_bound():
    config = GRPOConfig(groups=8, group_size=4, min_informative=1.0, max_resample_rounds=3, hint_fraction=0.5)
    backend = ScriptedBackend()
    groups, played = grpo.collect(config, backend, iteration=0)
    assert all(seed % 2 for seed in groups) and groups
    assert all(not grpo.is_constant(g) for g in groups.values())
    assert 1 < played["rounds"] <= 4 and len(backend.played) == played["rounds"]
    seeds = [r.seed for batch in backend.played for r in batch]
    assert len(set(seeds)) * 4 == len(seeds)  # fresh seeds each round
    assert all(sum(r.hint for r in batch if r.seed == s) == 2 for batch in backend.played
               for s in {r.seed for r in batch})
    # every round's constant groups are counted, not only the first round's
    even = [sum(1 for s in {r.seed for r in batch} if s % 2 == 0) for batch in backend.played]
    assert played["first_constant"] == even[0] and played["all_constant"] == sum(even) > even[0]
    again = grpo.collect(config, ScriptedBackend(), iteration=0)[0]
    assert sorted(again) == sorted(groups)  # the draws are a function of (seed, iteration)
    assert sorted(grpo.collect(config, ScriptedBackend(), iteration=1)[0]) != sorted(groups)


def test_training_seeds_never_come_from_the_validation_slice():
    config = GRPOConfig(groups=64)
    validation = set(grpo.validation_seeds(VALIDATION_SEEDS))
    for i in range(20):
        assert not validation & set(grpo.draw_seeds(config, i, 0, 64, set()))


# -- the loss --------------------------------------------------------------------------------

def test_clipped_surrogate_takes_the_pessimistic_term():
    logp = torch.log(torch.tensor([1.5, 0.5, 1.5, 0.5, 1.1]))
    old = torch.zeros(5)
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0, 1.0])
    loss, clipped = grpo.clipped_surrogate(logp, old, adv, 0.2, 0.28)
    assert loss.tolist() == pytest.approx([-1.28, -0.5, 1.5, 0.8, -1.1])
    assert clipped.tolist() == [True, False, False, True, False]


def test_k3_kl_is_zero_at_the_reference_and_positive_elsewhere():
    ref = torch.tensor([-1.0, -2.0])
    assert grpo.k3_kl(ref, ref).tolist() == [0.0, 0.0]
    assert (grpo.k3_kl(torch.tensor([-0.5, -3.0]), ref) > 0).all()


def test_sample_normalisation_is_grpos_one_over_g_sum_one_over_o_i():
    """An episode of two turns (2 + 4 tokens) and one of one turn (2 tokens): GRPO weighs each
    episode once, each of its tokens 1 / (G |o_i|)."""
    groups = grpo.group_by_seed([_rollout(1, 0, 0.0), _rollout(1, 1, 1.0)], 2)
    groups[1][0].turns.append(Turn([1], [1], [7, 8, 9, 10], [-1.0] * 4))
    adv = grpo.advantages(groups)
    batch = grpo.samples_of(groups, adv, "sample")
    assert len(batch.sequences) == 3 and batch.weight.sum().item() == pytest.approx(1.0)
    assert batch.weight.tolist() == pytest.approx([1 / 12] * 6 + [1 / 4] * 2)
    assert GRPOConfig().loss_normalization == "sample"  # the documented one is the default
    turn = grpo.samples_of(groups, adv, "turn")  # per turn, then over turns
    assert turn.weight.tolist() == pytest.approx([1 / 6, 1 / 6, 1 / 12, 1 / 12, 1 / 12, 1 / 12, 1 / 6, 1 / 6])
    token = grpo.samples_of(groups, adv, "token")
    assert token.weight.tolist() == pytest.approx([1 / 8] * 8)


def test_config_refuses_bad_values_naming_them():
    with pytest.raises(InvalidConfig, match="group_size=1 is invalid"):
        GRPOConfig(group_size=1)
    with pytest.raises(InvalidConfig, match="advantage_std='mean' is invalid: allowed: group, batch"):
        GRPOConfig(advantage_std="mean")
    with pytest.raises(InvalidConfig, match="temperature=0.0 is invalid"):
        GRPOConfig(temperature=0.0)
    with pytest.raises(InvalidConfig, match="unknown key\\(s\\) group; allowed"):
        GRPOConfig.from_dict({"group": 3})
    for norm in (0, 0.0, -1.0):  # clipping to norm 0 zeroes every update
        with pytest.raises(InvalidConfig, match=f"max_grad_norm={norm!r} is invalid: must be a number > 0"):
            GRPOConfig(max_grad_norm=norm)
    # more validation seeds than the slice holds would draw them from the test split
    with pytest.raises(InvalidConfig, match="eval_seeds=100001 is invalid: must be at most 100,000"):
        GRPOConfig(eval_seeds=VALIDATION_SEEDS + 1)
    # vLLM's processed log-probabilities are renormalised over the nucleus: not the trainer's p_old
    with pytest.raises(InvalidConfig, match="top_p=0.9 is invalid: must be 1.0 with backend 'vllm'"):
        GRPOConfig(backend="vllm", top_p=0.9)
    assert GRPOConfig(backend="vllm", top_p=0.9, old_logp="trainer").top_p == 0.9
    assert GRPOConfig(backend="local", top_p=0.9).top_p == 0.9


# -- on the fixture model --------------------------------------------------------------------

@pytest.fixture(scope="module")
def fixture_model():
    from trace_gym.trainer.training import load_model

    torch.set_num_threads(1)
    return load_model(FIXTURE, GRPOConfig(lora_rank=4, lora_alpha=4))


def _play(model, tokenizer, env_id, seeds, hint=False, max_new_tokens=24, batch=8):
    from trace_gym.agents.episodes import LocalBackend

    backend = LocalBackend(model, tokenizer, env_id, {"prompt_style": "compact"}, temperature=1.0, top_p=1.0,
                           max_new_tokens=max_new_tokens, batch_episodes=batch)
    return backend.play([EpisodeRequest(seed, k, hint and k % 2 == 0, 1000 * seed + k)
                         for seed in seeds for k in range(2)])


def test_only_completion_tokens_carry_loss(fixture_model):
    """The gradient reaching the final hidden state is non-zero exactly at the positions that
    predict a sampled token: no prompt, tool or customer token is a target."""
    from trace_gym.agents.prefix import per_sample

    model, tokenizer = fixture_model
    rollout = _play(model, tokenizer, "trace/airline-v0", [11], max_new_tokens=12)[0]
    turn = next(t for t in reversed(rollout.turns) if t.completion_ids)
    sequence = turn.loss_prompt_ids + turn.completion_ids
    captured = {}
    norm = model.get_base_model().model.norm

    def keep(module, inputs, out):
        out.retain_grad()
        captured["h"] = out

    handle = norm.register_forward_hook(keep)
    try:
        per_sample(model, [sequence], [len(turn.loss_prompt_ids)], lambda logp, index: logp.sum())
    finally:
        handle.remove()
        model.zero_grad()
    nonzero = (captured["h"].grad[0].abs().sum(-1) > 0).nonzero()[:, 0].tolist()
    assert nonzero == list(range(len(turn.loss_prompt_ids) - 1, len(sequence) - 1))


def test_shared_prefix_gradient_equals_the_per_sample_gradient():
    from trace_gym.agents.prefix import build_tree, count_tokens, per_sample, shared_prefix, target_positions
    from trace_gym.trainer.training import load_model

    model, tokenizer = load_model(FIXTURE, GRPOConfig(lora_rank=4, lora_alpha=4))
    rollouts = _play(model, tokenizer, "trace/retail-v0", [3, 4], max_new_tokens=16)
    groups = grpo.group_by_seed(rollouts, 2)
    batch = grpo.samples_of(groups, {(r.seed, r.request.sample): (-1.0) ** r.request.sample for r in rollouts})
    assert len(batch.sequences) > len(rollouts)  # several turns per episode
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():  # a non-zero B, so that every LoRA weight has a gradient
        for p in params:
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())).to(p.device))

    old, advantage, weight = (t.to(params[0].device) for t in (batch.old_logp, batch.advantage, batch.weight))

    def loss(logp, index):
        return (torch.exp(logp - old[index]) * advantage[index] * weight[index]).sum()

    grads = []
    for run in (per_sample, shared_prefix):
        model.zero_grad()
        logp = run(model, batch.sequences, batch.prompt_lengths, loss)
        grads.append(([p.grad.clone() for p in params], logp))
    (ga, la), (gb, lb) = grads
    assert torch.allclose(la, lb, atol=1e-5)
    assert max((a - b).abs().max().item() for a, b in zip(ga, gb)) < 1e-5
    assert max(a.abs().max().item() for a in ga) > 1e-4
    tree = count_tokens(build_tree(batch.sequences, target_positions(batch.sequences, batch.prompt_lengths)))
    assert tree < sum(len(s) for s in batch.sequences) / 2


def test_hinted_rollouts_train_on_the_hint_free_prompt(fixture_model):
    model, tokenizer = fixture_model
    rollouts = _play(model, tokenizer, "trace/precondition_verification-v0", [5], hint=True, max_new_tokens=8)
    hinted = [r for r in rollouts if r.request.hint]
    plain = [r for r in rollouts if not r.request.hint]
    assert hinted and plain
    for r in hinted:
        first = r.turns[0]
        assert "<expert_guidance>" in tokenizer.decode(first.prompt_ids)
        assert "<expert_guidance>" not in tokenizer.decode(first.loss_prompt_ids)
        assert first.loss_prompt_ids == plain[0].turns[0].prompt_ids  # the same seed's hint-free prompt


def test_a_step_moves_the_lora_weights_and_leaves_the_base_frozen():
    from trace_gym.trainer.training import load_model

    model, tokenizer = load_model(FIXTURE, GRPOConfig(lora_rank=4, lora_alpha=4))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    rollouts = [_rollout(1, 0, 0.0), _rollout(1, 1, 1.0)]
    for r in rollouts:
        r.turns = [Turn([1, 5, 9, 33], [1, 5, 9, 33], [40 + r.request.sample, 2], [-3.0, -3.0])]
    config = GRPOConfig(group_size=2, lr=1e-2)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr)
    groups = grpo.group_by_seed(rollouts, 2)
    metrics = grpo.update(model, optimizer, grpo.samples_of(groups, grpo.advantages(groups)), config, params)
    moved = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert moved and all("lora_" in n for n in moved)
    assert any("lora_B" in n for n in moved)
    assert metrics["tokens/completion"] == 4.0
    # the update's movement, measured on the batch's own tokens: toward the advantages, away
    # from the adapter-disabled model (the adapter starts as the identity: KL 0 before)
    assert metrics["policy/logp_change_toward_advantage"] > 0 and metrics["policy/kl_to_base"] > 0
    assert metrics["policy/logp_change"] != 0
    # where the update's time went: each part measured, none more than the whole
    parts = ("time/forward_backward_s", "time/optimizer_s", "time/movement_s")
    assert all(metrics[k] > 0 for k in parts)
    quiet = grpo.update(model, optimizer, grpo.samples_of(groups, grpo.advantages(groups)),
                        GRPOConfig(group_size=2, lr=1e-2, movement=False), params)
    assert not any(k.startswith("policy/") for k in quiet) and "time/movement_s" not in quiet


def test_validation_samples_each_seed_with_a_fixed_draw():
    """eval_samples > 1: every validation seed played that many times, each with its own
    sampling seed, the same at every evaluation; the standard error is over the seeds."""
    from trace_gym.trainer.training import evaluate

    class Recording(ScriptedBackend):
        def play(self, requests):
            self.played.append(list(requests))
            return [_rollout(r.seed, r.sample, float(r.sample == 0 and r.seed % 2 == 0)) for r in requests]

    backend = Recording()
    config = GRPOConfig(eval_seeds=4, eval_samples=3)
    first = evaluate(config, backend, None, 0)
    evaluate(config, backend, None, 5)
    a, b = backend.played
    assert a == b and len(a) == 12 and len({r.sampling_seed for r in a}) == 12
    assert sorted({r.seed for r in a}) == grpo.validation_seeds(4)
    per_seed = [1 / 3 if s % 2 == 0 else 0.0 for s in grpo.validation_seeds(4)]
    mean = sum(per_seed) / 4
    assert first["val/mean_reward"] == pytest.approx(mean)
    spread = math.sqrt(sum((x - mean) ** 2 for x in per_seed) / 3) / 2
    assert first["val/std_error"] == pytest.approx(spread) and spread > 0
    greedy = Recording()
    evaluate(GRPOConfig(eval_seeds=4), greedy, None, 0)
    assert [r.sampling_seed for r in greedy.played[0]] == [0] * 4


# -- whole runs ------------------------------------------------------------------------------

def _config(**kw):
    from tests.trainer.learnable_env import register

    base = dict(env_id=register(), env_kwargs={}, iterations=4, groups=2, group_size=4, max_new_tokens=8,
                threads=1, lr=6e-3, checkpoint_every=2, min_informative=0.0)
    return GRPOConfig(**{**base, **kw})


def _strip(rows):
    return [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]


def test_a_killed_run_resumes_to_the_uninterrupted_run(tmp_path):
    from trace_gym.trainer.training import train

    config = _config()
    train(config, FIXTURE, tmp_path / "whole")
    whole = [json.loads(line) for line in (tmp_path / "whole" / "metrics.jsonl").read_text().splitlines()]

    def crash(row):
        if row["iteration"] == 2:  # after iteration 2 was logged, before its checkpoint
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train(config, FIXTURE, tmp_path / "killed", on_iteration=crash)
    with pytest.raises(TraceGymError, match="pass --resume"):
        train(config, FIXTURE, tmp_path / "killed")
    with pytest.raises(TraceGymError, match="another configuration"):
        train(_config(lr=1e-3), FIXTURE, tmp_path / "killed", resume=True)
    train(config, FIXTURE, tmp_path / "killed", resume=True)
    resumed = [json.loads(line) for line in (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in resumed] == [0, 1, 2, 3]
    assert _strip(resumed) == _strip(whole)
    a = (tmp_path / "whole" / "adapter" / "adapter_model.safetensors").read_bytes()
    assert a == (tmp_path / "killed" / "adapter" / "adapter_model.safetensors").read_bytes()
    record = json.loads((tmp_path / "whole" / "adapter" / "trace_gym_adapter.json").read_text())
    assert record["env_id"] == config.env_id and "--enable-lora" in record["serve"]
    assert record["base_model_sha256"] and record["metrics"]["iteration"] == 3


def test_a_run_extended_with_more_iterations_resumes_to_the_longer_run(tmp_path):
    """Resume continues to a larger --iterations; it refuses, by name, only a setting that
    changes what was trained, and a count below what was trained."""
    from trace_gym.trainer.training import train

    whole = [json.loads(line) for line in (train(_config(), FIXTURE, tmp_path / "whole").parent
                                           / "metrics.jsonl").read_text().splitlines()]
    train(_config(iterations=2), FIXTURE, tmp_path / "short")
    with pytest.raises(TraceGymError, match=r"another configuration: lr: 0.006 -> 0.001$"):
        train(_config(iterations=4, lr=1e-3), FIXTURE, tmp_path / "short", resume=True)
    with pytest.raises(TraceGymError, match="cannot resume to iterations=1: the run has already trained 2"):
        train(_config(iterations=1), FIXTURE, tmp_path / "short", resume=True)
    train(_config(iterations=4, checkpoint_every=1), FIXTURE, tmp_path / "short", resume=True)
    extended = [json.loads(line) for line in (tmp_path / "short" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in extended] == [0, 1, 2, 3]
    assert _strip(extended) == _strip(whole)
    a = (tmp_path / "whole" / "adapter" / "adapter_model.safetensors").read_bytes()
    assert a == (tmp_path / "short" / "adapter" / "adapter_model.safetensors").read_bytes()


def test_the_base_weights_take_the_configs_dtype_and_the_adapter_stays_fp32(tmp_path):
    from trace_gym.trainer.training import load_model, train

    model, _ = load_model(FIXTURE, _config(model_dtype="bfloat16"))
    kinds = {("lora_" in n, p.dtype) for n, p in model.named_parameters()}
    assert kinds == {(False, torch.bfloat16), (True, torch.float32)}
    assert _config(model_dtype="auto", device="cpu").torch_dtype() == torch.float32
    assert _config(model_dtype="auto", device="cuda").torch_dtype() == torch.bfloat16
    assert GRPOConfig.from_toml(REPO / "configs" / "gpu-qwen3-30b-a3b.toml").model_dtype == "bfloat16"
    train(_config(model_dtype="bfloat16", iterations=1), FIXTURE, tmp_path / "run")  # it trains
    with pytest.raises(InvalidConfig, match="model_dtype='float16' is invalid: allowed: float32, bfloat16, auto"):
        GRPOConfig(model_dtype="float16")


def test_a_generated_env_without_a_passing_audit_is_refused(tmp_path, monkeypatch):
    from trace_gym.registry import _ENTRIES, EnvEntry
    from trace_gym.trainer.training import check_env_allowed

    module = tmp_path / "unaudited_env.py"
    module.write_text((REPO / "tests" / "audit" / "template_env.py").read_text())
    monkeypatch.setitem(_ENTRIES, "trace/unaudited-v0", EnvEntry(
        "trace/unaudited-v0", f"file:{module}:TemplateEnv", "test", kind="capability", capability="x",
        origin="synthesized", sha256="0" * 64))
    with pytest.raises(TraceGymError, match="no passing audit.*--allow-unaudited"):
        check_env_allowed("trace/unaudited-v0", allow_unaudited=False)
    check_env_allowed("trace/unaudited-v0", allow_unaudited=True)
    check_env_allowed("trace/precondition_verification-v0", allow_unaudited=False)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grpo_learns_a_small_env(seed, tmp_path):
    """From the fixture agent, which calls a tool on about a third of its samples, the mean
    reward rises by at least 0.3 within 30 iterations, in under two minutes on one thread."""
    import time

    from trace_gym.trainer.training import train

    rows = []
    started = time.process_time()
    train(_config(iterations=30, groups=4, group_size=8, max_new_tokens=12, checkpoint_every=30, seed=seed),
          FIXTURE, tmp_path / "run", on_iteration=rows.append)
    seconds = time.process_time() - started  # CPU time: the bound holds whatever else the machine runs
    rewards = [r["reward/mean"] for r in rows]
    # "within 30 iterations": the best run of five iterations against the first three (on seed
    # 0 the reward reaches 0.97 by iteration 15 and falls back to 0.45 after iteration 26)
    start = sum(rewards[:3]) / 3
    best = max(sum(rewards[i: i + 5]) / 5 for i in range(len(rewards) - 4))
    assert start < 0.5 and best - start >= 0.3, " ".join(f"{r:.2f}" for r in rewards)
    assert seconds < 120, f"30 iterations took {seconds:.0f} s of CPU"


def test_fused_moe_experts_get_lora_through_target_parameters(tmp_path):
    """Qwen3-MoE keeps its experts as fused 3-D parameters: the GPU recipe's
    lora_target_parameters reach them, and still only LoRA weights train."""
    from transformers import AutoTokenizer, Qwen3MoeConfig, Qwen3MoeForCausalLM

    from trace_gym.runconfig import load
    from trace_gym.trainer.training import load_model

    tiny = Qwen3MoeConfig(vocab_size=1024, hidden_size=32, intermediate_size=64, moe_intermediate_size=16,
                          num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                          num_experts=4, num_experts_per_tok=2)
    Qwen3MoeForCausalLM(tiny).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(FIXTURE).save_pretrained(tmp_path)
    recipe = load(REPO / "configs" / "gpu-qwen3-30b-a3b.toml")["train"]
    config = GRPOConfig(lora_targets=recipe["lora_targets"], lora_target_parameters=recipe["lora_target_parameters"],
                        device="cpu")
    model, _ = load_model(tmp_path, config)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any("experts" in n for n in trainable) and any("q_proj" in n for n in trainable)
    assert all("lora_" in n for n in trainable)


def test_trainer_old_logp_ignores_the_samplers_log_probabilities():
    """With old_logp = "trainer" the first step's ratio is 1 whatever the sampler reported
    (nothing clipped, the same loss as with exact p_old), and the mismatch is still reported;
    with "sampler", log-probabilities far from the trainer's are clipped."""
    from trace_gym.trainer.training import load_model

    def step(old_logp: str, reported: float) -> dict[str, float]:
        model, _ = load_model(FIXTURE, GRPOConfig(lora_rank=4, lora_alpha=4))
        rollouts = [_rollout(1, 0, 0.0), _rollout(1, 1, 1.0)]
        for r in rollouts:
            r.turns = [Turn([1, 5, 9, 33], [1, 5, 9, 33], [40 + r.request.sample, 2], [reported, reported])]
        config = GRPOConfig(group_size=2, lr=1e-2, old_logp=old_logp)
        params = [p for p in model.parameters() if p.requires_grad]
        groups = grpo.group_by_seed(rollouts, 2)
        batch = grpo.samples_of(groups, grpo.advantages(groups), old_logp=old_logp)
        assert bool(batch.trainer_old.all()) == (old_logp == "trainer") and bool(batch.sampled.all())
        return grpo.update(model, torch.optim.AdamW(params, lr=config.lr), batch, config, params)

    exact = step("trainer", -50.0)
    assert exact["loss/clip_fraction"] == 0.0 and exact["loss/logp_mismatch"] > 30
    assert step("trainer", -1.0)["loss/policy"] == pytest.approx(exact["loss/policy"])
    assert step("sampler", -50.0)["loss/clip_fraction"] > 0.0


def test_update_dtype_runs_the_updates_products_in_bf16_and_keeps_the_weights_fp32(monkeypatch):
    """update_dtype 'bfloat16' runs the update's linear layers in bf16 (autocast), while the
    adapter, its gradients and the log-probabilities stay fp32; 'float32' runs them in fp32;
    'auto' follows the CPU's native bf16; a bad value is refused by name."""
    from trace_gym.agents import hardware
    from trace_gym.trainer.training import load_model

    def step(update_dtype: str) -> tuple[set, dict]:
        model, _ = load_model(FIXTURE, GRPOConfig(lora_rank=4, lora_alpha=4))
        seen: set = set()
        hooks = [m.register_forward_hook(lambda m, a, out: seen.add(out.dtype))
                 for m in model.modules() if isinstance(m, torch.nn.Linear)]
        rollouts = [_rollout(1, 0, 0.0), _rollout(1, 1, 1.0)]
        for r in rollouts:
            r.turns = [Turn([1, 5, 9, 33], [1, 5, 9, 33], [40 + r.request.sample, 2], [-3.0, -3.0])]
        config = GRPOConfig(group_size=2, lr=1e-2, old_logp="trainer", update_dtype=update_dtype, device="cpu")
        params = [p for p in model.parameters() if p.requires_grad]
        groups = grpo.group_by_seed(rollouts, 2)
        metrics = grpo.update(model, torch.optim.AdamW(params, lr=config.lr),
                              grpo.samples_of(groups, grpo.advantages(groups), old_logp="trainer"), config, params)
        for h in hooks:
            h.remove()
        assert all(p.dtype == torch.float32 for p in params)
        return seen, metrics

    bf16, low = step("bfloat16")
    fp32, high = step("float32")
    assert torch.bfloat16 in bf16 and fp32 == {torch.float32}
    assert low["loss/clip_fraction"] == 0.0  # p_old taken under the same precision: the ratio is 1
    assert low["loss/policy"] != high["loss/policy"] or low["loss/grad_norm"] != high["loss/grad_norm"]
    monkeypatch.setattr(hardware, "native_bf16", lambda: True)
    assert GRPOConfig(update_dtype="auto", device="cpu").autocast()
    monkeypatch.setattr(hardware, "native_bf16", lambda: False)
    assert not GRPOConfig(update_dtype="auto", device="cpu").autocast()
    assert not GRPOConfig(device="cpu").autocast()
    with pytest.raises(InvalidConfig, match="update_dtype='float16' is invalid: allowed: float32, bfloat16, auto"):
        GRPOConfig(update_dtype="float16")


# -- data parallel ---------------------------------------------------------------------------

@pytest.mark.parametrize("config_kw", [{}, {"steps_per_batch": 2, "beta": 0.1}])
def test_two_processes_take_the_update_one_process_takes(tmp_path, config_kw):
    """torch.distributed (gloo): each process runs its share of the samples and the gradients
    are summed, so both replicas end where one process on the whole batch ends."""
    import torch.multiprocessing as mp

    from tests.trainer import dp_worker

    alone = dp_worker.update_once(config_kw)
    mp.spawn(dp_worker.main, args=(2, str(tmp_path / "init"), str(tmp_path), config_kw), nprocs=2, join=True)
    ranks = [torch.load(tmp_path / f"rank{r}.pt", weights_only=False) for r in range(2)]
    for result in ranks:
        # the same step within float rounding: Adam divides by the gradient's scale, so a sum
        # in another order moves a weight whose gradient is near zero by up to ~1e-5 (of a
        # step of lr = 1e-2); the two steps differ by less than a thousandth of the step
        step = torch.cat([(w - alone["start"][n]).flatten() for n, w in alone["weights"].items()])
        gap = torch.cat([(result["weights"][n] - w).flatten() for n, w in alone["weights"].items()])
        assert step.norm() > 0 and gap.norm() < 1e-3 * step.norm(), (float(gap.norm()), float(step.norm()))
        for key in ("loss/policy", "loss/kl", "loss/clip_fraction", "tokens/completion", "loss/grad_norm"):
            assert result["metrics"][key] == pytest.approx(alone["metrics"][key], rel=1e-5, abs=1e-7), key
        # every process gets every played episode, in request order, each played once
        assert [r for _, r in result["played"]] == list(range(7))
        assert [rank for rank, _ in result["played"]] == [0, 1, 0, 1, 0, 1, 0]
    moved = [n for n, w in alone["weights"].items() if "lora_B" in n and w.abs().sum() > 0]
    assert moved  # the update did something to compare


def test_a_batch_is_shared_out_in_contiguous_whole_samples():
    from tests.trainer.dp_worker import batch_rollouts
    from trace_gym.trainer.distributed import shard

    groups = grpo.group_by_seed(batch_rollouts(), 4)
    batch = grpo.samples_of(groups, grpo.advantages(groups))
    parts = [shard(batch, r, 3) for r in range(3)]
    assert sum((p.sequences for p in parts), []) == batch.sequences
    assert all(p.sequences for p in parts)
    torch.testing.assert_close(torch.cat([p.weight for p in parts]), batch.weight)
    torch.testing.assert_close(torch.cat([p.advantage for p in parts]), batch.advantage)
    for p in parts:
        assert len(p.old_logp) == sum(len(s) - n for s, n in zip(p.sequences, p.prompt_lengths))


def test_an_update_that_does_not_move_the_policy_says_so():
    from trace_gym.trainer.training import stalled_update

    assert "every group of the batch was constant" in stalled_update({"iteration": 0})
    assert "does not move the policy" in stalled_update({"loss/policy": 0.1, "policy/logp_change_toward_advantage": 1e-5})
    assert stalled_update({"loss/policy": 0.1, "policy/logp_change_toward_advantage": 0.02}) is None
    assert stalled_update({"loss/policy": 0.1}) is None  # movement not measured


def test_the_movement_is_measured_in_fp32_on_a_few_samples(monkeypatch):
    """A change below bf16's resolution still shows: the probe runs in fp32 whatever the
    update's precision, on `movement_samples` samples spread over the batch."""
    from trace_gym.trainer.training import load_model

    model, _ = load_model(FIXTURE, GRPOConfig(lora_rank=4, lora_alpha=4))
    rollouts = [_rollout(1, k, float(k % 2)) for k in range(6)]
    for r in rollouts:
        r.turns = [Turn([1, 5, 9, 33], [1, 5, 9, 33], [40 + r.request.sample, 2, 7], [-3.0, -3.0, -3.0])]
    groups = grpo.group_by_seed(rollouts, 6)
    batch = grpo.samples_of(groups, grpo.advantages(groups))
    probe = grpo.Probe.of(batch, 3)
    assert [s[4] for s in probe.sequences] == [40, 42, 45] and len(probe.advantage) == 9
    assert probe.advantage.tolist() == [batch.advantage[i].item() for i in (0, 1, 2, 6, 7, 8, 15, 16, 17)]
    config = GRPOConfig(group_size=6, lr=1e-6, update_dtype="bfloat16", movement_samples=3)
    params = [p for p in model.parameters() if p.requires_grad]
    metrics = grpo.update(model, torch.optim.AdamW(params, lr=config.lr), batch, config, params)
    # one step at lr 1e-6 moves the log-probabilities by far less than bf16 resolves (about 0.4%)
    assert 0 < abs(metrics["policy/logp_change"]) < 1e-3 and metrics["policy/kl_to_base"] > 0
