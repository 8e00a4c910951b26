"""`trace-gym train`: a run of `trainer.grpo` iterations with checkpoints, logs and an adapter
a user can take elsewhere.

The run directory holds `metrics.jsonl` (one line per iteration), `checkpoints/` (resumable),
`config.json`, and at the end `adapter/`: a peft adapter directory with
`trace_gym_adapter.json` (env id and code sha256, the base model's sha256, the config, the
final metrics and the vLLM command that serves it). With `eval_every`, `best/` holds the
adapter that scored best on the validation slice.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trace_gym import rates
from trace_gym.errors import InternalError, InvalidConfig, TraceGymError
from trace_gym.jsondata import write_json_atomic
from trace_gym.progress import progress_bar, shows_progress
from trace_gym.trainer import checkpoint
from trace_gym.trainer.config import GRPOConfig

logger = logging.getLogger(__name__)

ADAPTER_RECORD = "trace_gym_adapter.json"


def check_env_allowed(env_id: str, allow_unaudited: bool) -> None:
    """Train only on what `trace_gym.registry.trust` allows: generated code needs a passing
    audit unless the user says `allow_unaudited`."""
    from trace_gym.registry import REFUSED, trust

    decision = trust(env_id, training=True, allow_unaudited=allow_unaudited)
    if decision.mode == REFUSED:
        raise TraceGymError(decision.reason)


def load_model(base: Path, config: GRPOConfig) -> tuple[Any, Any]:
    """The base model, frozen, with a fresh LoRA adapter (peft; B = 0, so it starts as the base)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoTokenizer

    from trace_gym.agents.causal_lm import load_causal_lm

    if not (Path(base) / "config.json").is_file():
        raise InvalidConfig(f"--base {str(base)!r} is not a model directory (no config.json); build the base agent "
                            "with `trace-gym base-agent build`")
    tokenizer = AutoTokenizer.from_pretrained(base)
    # On CPU the attention is eager: the update's prefix tree runs many short queries over long
    # cached prefixes, where a torch.profiler profile of one batch found the flash-attention
    # kernel for CPU, its backward most, a quarter of the update (`trainer.precision` has the
    # other cost it found; benchmarks/trainer_throughput.py prints the iteration's split).
    device = config.torch_device()
    attention = {"attn_implementation": "eager"} if device == "cpu" else {}
    model = load_causal_lm(base, config.torch_dtype(), **attention).to(device)
    torch.manual_seed(config.seed)  # LoRA's A is drawn from the global generator
    model = get_peft_model(model, LoraConfig(r=config.lora_rank, lora_alpha=config.lora_alpha,
                                             lora_dropout=config.lora_dropout,
                                             target_modules=list(config.lora_targets),
                                             target_parameters=list(config.lora_target_parameters) or None))
    frozen_wrong = [n for n, p in model.named_parameters() if p.requires_grad != ("lora_" in n)]
    if frozen_wrong:
        raise InternalError(f"only LoRA weights may train; wrong: {frozen_wrong[:3]}")
    return model.eval(), tokenizer


STALL_NATS = 1e-3
"""An update that moves the batch's tokens less than this toward their advantages (mean
log-probability change, nats) is reported as not moving the policy."""


def stalled_update(row: dict[str, Any]) -> str | None:
    """Why an iteration's update did not move the policy (no informative group, or a change
    below `STALL_NATS`), or None when it did or was not measured."""
    if "loss/policy" not in row:
        return "no update: every group of the batch was constant (no advantage to learn from)"
    toward = row.get("policy/logp_change_toward_advantage")
    if toward is not None and toward < STALL_NATS:
        return (f"the update moved the batch's tokens {toward:+.5f} nats toward their advantages: it does not move "
                "the policy (raise lr or lora_alpha, or steps_per_batch)")
    return None


def make_backend(config: GRPOConfig, model: Any, tokenizer: Any, out: Path, temperature: float | None = None,
                 base: Path | None = None) -> Any:
    """The rollout backend `config.backend` names: vLLM servers, OpenVINO on `base`, or the
    trained model itself (local). `temperature` makes an evaluation backend, with its own
    served adapter name or directory."""
    if config.backend == "vllm":
        from trace_gym.trainer.vllm import VLLMBackend

        return VLLMBackend.from_env(config, tokenizer, out / "served_adapters", temperature,
                                    name="trace-adapter" if temperature is None else "trace-adapter-eval")
    if config.backend == "openvino":
        from trace_gym.trainer.distributed import world
        from trace_gym.trainer.openvino import OpenVINOBackend

        if base is None:
            raise InvalidConfig("the openvino backend needs the base model's directory (`base`)")
        rank, size = world()
        served = out / "served_adapters" / ("rollouts" if temperature is None else "eval")
        return OpenVINOBackend(base, config.env_id, config.env_kwargs,
                               adapter_dir=served / f"rank{rank}" if size > 1 else served,
            temperature=config.temperature if temperature is None else temperature, top_p=config.top_p,
            max_new_tokens=config.max_new_tokens, seed=config.seed, threads=config.threads,
            in_flight=config.batch_episodes)
    from trace_gym.agents.episodes import LocalBackend

    return LocalBackend(model, tokenizer, config.env_id, config.env_kwargs,
                        temperature=config.temperature if temperature is None else temperature, top_p=config.top_p,
                        max_new_tokens=config.max_new_tokens, batch_episodes=config.batch_episodes)


def evaluate(config: GRPOConfig, backend: Any, model: Any, iteration: int) -> dict[str, float]:
    """The validation slice's episodes (`eval_seeds` x `eval_samples`, greedy at one sample):
    mean reward, pass rate, and the mean reward's standard error over the seeds."""
    import numpy as np

    from trace_gym.agents.episodes import EpisodeRequest, sampling_seed
    from trace_gym.trainer.distributed import play_sharded
    from trace_gym.trainer.grpo import validation_seeds

    backend.sync(model, iteration)
    requests = [EpisodeRequest(seed, k, False, sampling_seed(config.seed, seed, k) if config.eval_samples > 1 else 0)
                for seed in validation_seeds(config.eval_seeds) for k in range(config.eval_samples)]
    rollouts = play_sharded(backend.play, requests)
    per_seed: dict[int, list[float]] = {}
    for r in rollouts:
        per_seed.setdefault(r.seed, []).append(r.reward)
    means = [float(np.mean(v)) for v in per_seed.values()]
    return {"val/mean_reward": sum(r.reward for r in rollouts) / len(rollouts),
            "val/pass_rate": sum(r.passed for r in rollouts) / len(rollouts),
            "val/std_error": float(np.std(means, ddof=1) / np.sqrt(len(means))) if len(means) > 1 else 0.0}


def _env_sha256(env_id: str) -> str | None:
    from trace_gym.registry import env_sha256, known

    if known(env_id):
        return env_sha256(env_id)
    from trace_gym.driver import make_env

    env = make_env(env_id)
    sha = getattr(env.unwrapped, "code_sha256", None)
    env.close()
    return sha() if callable(sha) else None


def export_adapter(model: Any, target: Path, config: GRPOConfig, base: Path, metrics: dict[str, Any]) -> Path:
    """Save the adapter with its provenance, atomically (a temporary directory renamed)."""
    import os

    from trace_gym.provenance import dir_sha256

    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    name = config.env_id.split("/")[-1].removesuffix("-v0")
    write_json_atomic(tmp / ADAPTER_RECORD, {
        "env_id": config.env_id, "env_sha256": _env_sha256(config.env_id),
        "base_model": str(base), "base_model_sha256": dir_sha256(base),
        "config": config.to_json(), "metrics": metrics,
        "serve": (f"VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve {base} --enable-lora --max-lora-rank "
                  f"{config.lora_rank} --lora-modules {name}={target.resolve()}"),
    })
    if target.exists():
        shutil.rmtree(target)
    os.replace(tmp, target)
    return target


def train(config: GRPOConfig, base: str | Path, out: str | Path, *, resume: bool = False,
          allow_unaudited: bool = False,
          on_iteration: Callable[[dict[str, Any]], None] | None = None) -> Path:
    """Train one adapter on `config.env_id` from the base model at `base`; return the adapter's
    directory (`out/adapter`)."""
    import torch

    from trace_gym.trainer import distributed
    from trace_gym.trainer.grpo import iteration
    from trace_gym.trainer.metrics import MetricsLog, summary_table

    base, out = Path(base), Path(out)
    check_env_allowed(config.env_id, allow_unaudited)
    rank, size = distributed.init_from_env(config.torch_device())  # several processes under torchrun
    if size > 1 and config.backend == "vllm":
        raise InvalidConfig("the vllm backend spreads rollouts over its servers: train it in one process "
                            f"(this one is 1 of {size})")
    lead = rank == 0  # only rank 0 writes the run directory and reports
    shown = lead and shows_progress(logger)
    torch.set_num_threads(config.threads)
    torch.use_deterministic_algorithms(True)
    start = 0
    state: dict[str, Any] = {"config_key": config.key(), "resume_key": config.resume_key(), "best": None}
    found = checkpoint.latest(out)
    if found is not None and not resume:
        raise TraceGymError(f"{out} already holds a training run ({found.name}); pass --resume to continue it, "
                            "or choose another --out")
    model, tokenizer = load_model(base, config)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=config.weight_decay)
    if found is not None:
        state = checkpoint.load(found, model, optimizer)
        # a run extended (more iterations, other checkpoint or evaluation intervals) resumes;
        # one whose trained settings changed is refused, naming them (a checkpoint written
        # before resume keys existed must match whole)
        same = state.get("resume_key") == config.resume_key() if "resume_key" in state \
            else state.get("config_key") == config.key()
        if not same:
            from trace_gym.runs import differences
            from trace_gym.trainer.config import EXTENDABLE

            saved = out / "config.json"
            before = json.loads(saved.read_text()) if saved.is_file() else {}
            changed = [d for d in differences(before, config.to_json()) if d.split(":")[0] not in EXTENDABLE]
            raise TraceGymError(f"{out}: cannot resume under another configuration: "
                                + "; ".join(changed or ["its key differs"]))
        if state["iteration"] + 1 > config.iterations:
            raise TraceGymError(f"{out}: cannot resume to iterations={config.iterations}: the run has already "
                                f"trained {state['iteration'] + 1}")
        start = state["iteration"] + 1
        state["config_key"], state["resume_key"] = config.key(), config.resume_key()
        if lead:
            logger.info(f"resuming {out} after iteration {start} of {config.iterations}")
    if lead:
        write_json_atomic(out / "config.json", config.to_json())
    backend = make_backend(config, model, tokenizer, out, base=base)
    evaluator = make_backend(config, model, tokenizer, out, temperature=0.0 if config.eval_samples == 1 else None,
                             base=base) if config.eval_every else None
    metrics_log = MetricsLog(out / "metrics.jsonl", keep_through=start - 1 if found is not None else None) \
        if lead else None
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

    row: dict[str, Any] = metrics_log.rows[-1] if metrics_log is not None and metrics_log.rows else {}
    progress = progress_bar(logger, TextColumn(f"GRPO {config.env_id}"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.fields[reward]}"), TimeRemainingColumn(), shown=shown)
    try:
        with progress:
            task = progress.add_task("train", total=config.iterations, completed=start, reward="")
            for i in range(start, config.iterations):
                row = iteration(config, model, optimizer, backend, params, i)
                if evaluator is not None and ((i + 1) % config.eval_every == 0 or i + 1 == config.iterations):
                    row.update(evaluate(config, evaluator, model, i))
                    if state["best"] is None or row["val/mean_reward"] > state["best"]["val/mean_reward"]:
                        state["best"] = {"iteration": i, "val/mean_reward": row["val/mean_reward"]}
                        if lead:
                            export_adapter(model, out / "best", config, base, row)
                if metrics_log is not None:  # only the lead (rank 0) keeps the metrics log
                    metrics_log.write(row)
                    rates.record(f"train {config.backend}", config.env_id, row["episodes/total"],
                                 row["time/rollout_s"] + row["time/update_s"])  # for --dry-run's estimates
                if on_iteration is not None:
                    on_iteration(row)
                if shown:
                    progress.console.print(summary_table(row, config.iterations))
                    stalled = stalled_update(row)
                    if stalled:
                        progress.console.print(f"[yellow]iteration {i + 1}: {stalled}[/yellow]")
                progress.update(task, advance=1, reward=f"reward {row['reward/mean']:.3f}")
                if lead and ((i + 1) % config.checkpoint_every == 0 or i + 1 == config.iterations):
                    checkpoint.save(out, i, model, optimizer, state)
    finally:
        if metrics_log is not None:
            metrics_log.close()
    adapter = export_adapter(model, out / "adapter", config, base, row) if lead else out / "adapter"
    distributed.barrier()  # every process returns once the adapter is written
    if lead:
        logger.info(f"adapter: {adapter}")
    return adapter
