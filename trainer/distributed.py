"""Data-parallel GRPO: several processes, one model replica each, the same update as one process.

Started by `torchrun` (or `accelerate launch`), which sets RANK, WORLD_SIZE and the rendezvous
address; `init_from_env` joins the process group (gloo on CPU, nccl on CUDA). Then every
iteration:

- **Rollouts.** Each process plays every `size`-th request of the round (`play_sharded`);
  the played episodes are gathered on every process in request order, so that groups,
  advantages and the loss's normalisation are computed from the whole batch everywhere.
- **Update.** Each process runs the loss on a contiguous share of the batch's samples
  (`shard`, which keeps a group's turns together, so shared prefixes still run once), with
  the weights of the whole batch; the gradients are summed over the processes before
  clipping (`sum_gradients`), so every replica takes the same step, the step one process
  would take on the whole batch (within float rounding: the sum's order differs).
- **Files.** Only rank 0 writes the run directory (metrics, checkpoints, adapters); every
  process resumes from the same checkpoint.

The vLLM backend already spreads rollouts over its servers and is refused here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch


def world() -> tuple[int, int]:
    """(rank, size) of the process group; (0, 1) when there is none."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_from_env(device: str) -> tuple[int, int]:
    """Join the process group `torchrun` describes in the environment (WORLD_SIZE > 1); the
    (rank, size) this process has."""
    import torch.distributed as dist

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return world()


def play_sharded(play: Callable[[Sequence[Any]], list[Any]], requests: Sequence[Any]) -> list[Any]:
    """`play(requests)`, each process playing every `size`-th request; every process gets
    all the played episodes, in request order."""
    rank, size = world()
    if size == 1:
        return play(requests)
    import torch.distributed as dist

    mine = play(list(requests)[rank::size])
    gathered: list[Any] = [None] * size
    dist.all_gather_object(gathered, mine)
    out: list[Any] = [None] * len(requests)
    for r, part in enumerate(gathered):
        out[r::size] = part
    return out


def shard(batch: Any, rank: int, size: int) -> Any:
    """This process's contiguous share of the batch's samples (about equal in completion
    tokens), token tensors cut to match; weights stay those of the whole batch."""
    completions = [len(s) - p for s, p in zip(batch.sequences, batch.prompt_lengths)]
    ends = np.cumsum(completions)
    total = int(ends[-1]) if len(ends) else 0
    # sample i goes to the share its first token falls in
    starts = ends - np.asarray(completions)
    owner = np.minimum(starts * size // max(1, total), size - 1) if total else np.zeros(len(completions), int)
    picked = [i for i, o in enumerate(owner) if o == rank]
    tokens = torch.zeros(total, dtype=torch.bool)
    for i in picked:
        tokens[int(starts[i]):int(ends[i])] = True
    tokens = tokens.to(batch.old_logp.device)
    return type(batch)([batch.sequences[i] for i in picked], [batch.prompt_lengths[i] for i in picked],
                       batch.old_logp[tokens], batch.trainer_old[tokens], batch.sampled[tokens],
                       batch.advantage[tokens], batch.weight[tokens])


def sum_gradients(params: Sequence[torch.nn.Parameter]) -> None:
    """Sum every parameter's gradient over the processes (a process with no samples adds 0)."""
    _, size = world()
    if size == 1:
        return
    import torch.distributed as dist

    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)


def sum_floats(values: Sequence[float]) -> list[float]:
    """Each value summed over the processes."""
    _, size = world()
    if size == 1:
        return list(values)
    import torch.distributed as dist

    t = torch.tensor(list(values), dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def barrier() -> None:
    """Wait for every process (a no-op in one)."""
    _, size = world()
    if size > 1:
        import torch.distributed as dist

        dist.barrier()
