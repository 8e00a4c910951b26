"""The bf16 update casts the frozen weights once and computes what plain autocast computes."""

from __future__ import annotations

import torch

from tests.trainer.test_grpo import FIXTURE, _play
from trace_gym.trainer import grpo
from trace_gym.trainer.config import GRPOConfig
from trace_gym.trainer.precision import bf16_update, frozen_linear_weights


def test_the_bf16_update_equals_autocast_and_puts_the_fp32_weights_back():
    from trace_gym.agents.prefix import shared_prefix
    from trace_gym.trainer.training import load_model

    torch.set_num_threads(1)
    model, tokenizer = load_model(FIXTURE, GRPOConfig(lora_rank=4, lora_alpha=4))
    rollouts = _play(model, tokenizer, "trace/retail-v0", [5], max_new_tokens=12)
    batch = grpo.samples_of(grpo.group_by_seed(rollouts, 2),
                            {(r.seed, r.request.sample): (-1.0) ** r.request.sample for r in rollouts})
    params = [p for p in model.parameters() if p.requires_grad]
    with torch.no_grad():  # a non-zero B, so that the adapter enters the products
        for p in params:
            p.add_(0.01 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    weights = frozen_linear_weights(model)
    before = [w.detach().clone() for w in weights]
    embedding = model.get_input_embeddings().weight
    assert weights and all(w is not embedding for w in weights)

    def run(context):
        model.zero_grad()
        with context:
            logp = shared_prefix(model, batch.sequences, batch.prompt_lengths, lambda lp, index: lp.sum())
            cast = {w.dtype for w in weights}
        return logp, [p.grad.clone() for p in params], cast

    plain, plain_grads, _ = run(torch.autocast("cpu", dtype=torch.bfloat16))
    fast, fast_grads, cast = run(bf16_update(model, True))
    assert cast == {torch.bfloat16} and embedding.dtype == torch.float32
    assert torch.equal(plain, fast)
    assert all(torch.equal(a, b) for a, b in zip(plain_grads, fast_grads))
    assert all(w.dtype == torch.float32 and torch.equal(w, b) for w, b in zip(weights, before))
    fp32, _, _ = run(bf16_update(model, False))  # off: fp32 throughout, and not the bf16 numbers
    assert not torch.equal(fp32, fast)
