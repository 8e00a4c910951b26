"""Rollouts on OpenVINO GenAI for the trainer: the adapter being trained, fused into an
OpenVINO pipeline at every iteration (`trace_gym.agents.openvino.OpenVINOPolicy`).

`sync(model, iteration)` saves the adapter (peft's `save_pretrained`) and rebuilds the
pipeline with it; `play(requests)` plays them through the episode driver. Each episode
samples from its own seeded stream (the policy's seed, the episode's sampling seed, the
turn), so a resumed run plays what the uninterrupted one played.

OpenVINO computes in bf16 where the CPU has it natively, the trainer in fp32: its
log-probabilities are not the trainer's. GRPO therefore takes p_old from the trainer
(`old_logp = "auto"` means "trainer" with this backend; "sampler" is refused) and
reports the sampler's distance from it as `loss/logp_mismatch`, as for vLLM.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trace_gym.driver import EpisodeRequest, PlayedEpisode, play_in_order


class OpenVINOBackend:
    """The trainer's rollout backend (`sync`, `play`) on an `OpenVINOPolicy`."""

    def __init__(self, base: str | Path, env_id: str, env_kwargs: dict[str, Any], *, adapter_dir: Path,
                 temperature: float = 1.0, top_p: float = 1.0, max_new_tokens: int = 256, seed: int = 0,
                 threads: int | None = None, dtype: str = "auto", weight_format: str = "fp16",
                 in_flight: int = 64) -> None:
        from trace_gym.agents.openvino import OpenVINOPolicy

        self.env_id, self.env_kwargs = env_id, dict(env_kwargs)
        self.adapter_dir = Path(adapter_dir)
        self.in_flight = in_flight
        self.policy = OpenVINOPolicy(base, temperature=temperature, top_p=top_p, max_new_tokens=max_new_tokens,
                                     seed=seed, threads=threads, dtype=dtype, weight_format=weight_format)
        self.name = self.policy.name

    def sync(self, model: Any, iteration: int) -> None:
        """Rollouts from now on use `model`'s adapter as it is (the previous copy is removed)."""
        path = self.adapter_dir / f"it{iteration}"
        shutil.rmtree(path, ignore_errors=True)
        model.save_pretrained(path)
        previous = self.policy.adapter
        self.policy.set_adapter(path)
        if previous is not None and previous != path:
            shutil.rmtree(previous, ignore_errors=True)

    def play(self, requests: Sequence[EpisodeRequest]) -> list[PlayedEpisode]:
        """Every request played through the episode driver, `in_flight` at a time; the
        episodes in request order."""
        return play_in_order(requests, self.policy, env_id=self.env_id, env_kwargs=self.env_kwargs,
                             in_flight=max(1, min(self.in_flight, len(requests))))

    def close(self) -> None:
        """Close the OpenVINO policy."""
        self.policy.close()
