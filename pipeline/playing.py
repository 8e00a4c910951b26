"""How a stage plays episodes: `play` appends them to the stage's records file and resumes
it; `local_spec` is the local model's policy; `codes` the envs' code hashes a stage's cache
key holds."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_gym.agents.spec import PolicySpec

if TYPE_CHECKING:
    from trace_gym.pipeline.contract import RunConfig


def local_spec(path: str, temperature: float, max_new_tokens: int, **extra: Any) -> PolicySpec:
    """The "local" policy on the model `path`."""
    return PolicySpec("local", {"model_path": path, "temperature": temperature, "max_new_tokens": max_new_tokens,
                                **extra})


def play(env_id: str, spec: PolicySpec, seeds: list[int], out: Path, config: RunConfig, batch: int,
         samples: int = 1, knobs_added: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Episodes appended to `out` (resumed), `batch` in flight at once (a model policy
    generates them together; a served one overlaps them in threads)."""
    from trace_gym.rollout import read_records, rollout

    rollout(env_id, spec, seeds, out, samples=samples, workers=batch, progress=True, threaded=spec.server,
            env_kwargs={**config.knobs(env_id), **(knobs_added or {})})
    wanted = set(seeds)
    return [r for r in read_records(out) if r["seed"] in wanted and r["sample"] < samples]


def codes(env_ids: Any) -> dict[str, str]:
    """The code hash of every env a stage plays: a changed env reruns the stage."""
    from trace_gym.registry import env_sha256

    return {env_id: env_sha256(env_id) for env_id in sorted(env_ids)}

