"""One process of the data-parallel tests (started with torch.multiprocessing): a GRPO update
on a fixed batch, and a sharded play, written to `out/rank<N>.pt` for the test to compare
with one process."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.conftest import REPO

FIXTURE = REPO / "tests" / "fixtures" / "tiny_agent"


def batch_rollouts():
    """Two groups of four episodes, turns of different lengths and prompts, rewards that vary."""
    from trace_gym.agents.episodes import EpisodeRequest, PlayedEpisode, Turn

    out = []
    for seed in (11, 12):
        for k in range(4):
            turns = [Turn([1, 2, 3, seed], [1, 2, 3, seed], [4 + k, 5, 6][: 1 + k % 3], [-1.0, -2.0, -0.5][: 1 + k % 3])]
            if k % 2:
                turns.append(Turn([1, 2, 3, seed, 9], [1, 2, 3, seed, 9], [7, 8], [-0.3, -0.7]))
            out.append(PlayedEpisode(EpisodeRequest(seed, k, False, 0), "env", float((k + seed) % 3) / 2,
                               {"termination_reason": "replied"}, [], turns, "policy", {}))
    return out


def update_once(config_kw: dict) -> dict[str, torch.Tensor]:
    """The LoRA weights after one update of the fixture on `batch_rollouts`, and its metrics."""
    from trace_gym.trainer import grpo
    from trace_gym.trainer.config import GRPOConfig
    from trace_gym.trainer.training import load_model

    torch.set_num_threads(1)
    config = GRPOConfig(**{"lora_rank": 4, "lora_alpha": 4, "lr": 1e-2, "threads": 1, **config_kw})
    model, _ = load_model(FIXTURE, config)
    params = [p for p in model.parameters() if p.requires_grad]
    start = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    optimizer = torch.optim.AdamW(params, lr=config.lr)
    groups = grpo.group_by_seed(batch_rollouts(), 4)
    batch = grpo.samples_of(groups, grpo.advantages(groups), config.loss_normalization, config.p_old())
    metrics = grpo.update(model, optimizer, batch, config, params)
    weights = {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}
    return {"weights": weights, "start": start, "metrics": metrics}


def main(rank: int, size: int, init: str, out: str, config_kw: dict) -> None:
    import torch.distributed as dist

    from trace_gym.trainer.distributed import play_sharded

    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank, world_size=size)
    try:
        result = update_once(config_kw)
        result["played"] = play_sharded(lambda requests: [(rank, r) for r in requests], list(range(7)))
        torch.save(result, Path(out) / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()
