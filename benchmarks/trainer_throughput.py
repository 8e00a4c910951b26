"""Trainer throughput: this trainer's samples/s beside TRL GRPOTrainer's, on the same model,
batch and prompts, and where an iteration's time goes.

    python benchmarks/trainer_throughput.py [--model DIR] [--env ENV_ID] [--groups 2] [--group-size 8]
                                            [--iterations 2] [--max-new-tokens 64] [--threads 2]
                                            [--lockstep] [--openvino] [--update-dtype auto]
                                            [--skip-torch] [--skip-trl]

Both trainers play the same episodes with the same generator (`trace_gym.agents.episodes`:
TRL through `trace_gym.interop.TRLRollouts` as its rollout_func), G groups of K rollouts of
the same seeds, every group trained (constant ones too, as TRL does), one optimiser step per
batch, LoRA rank 16 on q,k,v,o,gate,up,down, lr 1e-5, GRPO's per-sample loss normalisation,
no KL. TRL keeps its default gradient checkpointing: without it its update of the default
batch ran out of this machine's 24 GiB (killed at 24 GB resident), where this trainer, which
runs each shared prefix once, keeps every activation. So the difference is the update: this
trainer runs every prefix the batch shares once (a group's prompt, an episode's earlier
turns); TRL runs each episode's whole sequence. A sample is one episode (rollout and
update). The first iteration of each is a warm-up and is not counted.

`--lockstep` and `--openvino` add this trainer before the engine issue (lockstep torch
rollouts, fp32 update) and with the embedded recipe's rollouts and update (OpenVINO GenAI,
`--update-dtype`), side by side on the same seeds.

It also prints, for this trainer, the share of an iteration's wall time spent outside the
model's forward and backward passes (env steps, chat templates, sampling, cache copies,
bookkeeping): forward time is measured with hooks on the decoder stack and the output
layer, backward time around autograd's backward. `uptime` is printed with each timing.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


def uptime() -> str:
    return "load " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


class ModelTime:
    """Seconds spent in the model's forward (decoder stack and output layer) and in autograd's
    backward, while installed."""

    def __init__(self, lm) -> None:
        import torch

        self.forward = self.backward = 0.0
        self._starts: list[float] = []
        self._handles = []
        for module in (lm.model, lm.lm_head):
            self._handles.append(module.register_forward_pre_hook(lambda m, a: self._starts.append(time.perf_counter())))
            self._handles.append(module.register_forward_hook(lambda m, a, o: self._stop()))
        self._backward = torch.autograd.backward
        outer = self

        def timed_backward(*args, **kwargs):
            start = time.perf_counter()
            try:
                return outer._backward(*args, **kwargs)
            finally:
                outer.backward += time.perf_counter() - start

        torch.autograd.backward = timed_backward

    def _stop(self) -> None:
        self.forward += time.perf_counter() - self._starts.pop()

    def close(self) -> None:
        import torch

        for h in self._handles:
            h.remove()
        torch.autograd.backward = self._backward


def run_ours(args, base: Path, lockstep: bool = False, openvino: bool = False) -> tuple[float, float]:
    """This trainer's samples/s; `lockstep` plays the rollouts as before continuous batching
    (every turn of the batch waits for its slowest episode); `openvino`
    plays them on OpenVINO GenAI (the adapter synced each iteration, p_old the trainer's)."""
    import torch

    from trace_gym.agents.episodes import LocalBackend
    from trace_gym.trainer import grpo
    from trace_gym.trainer.config import GRPOConfig
    from trace_gym.trainer.training import load_model

    config = GRPOConfig(env_id=args.env, groups=args.groups, group_size=args.group_size, lr=1e-5,
                        max_new_tokens=args.max_new_tokens, min_informative=0.0, max_resample_rounds=0,
                        threads=args.threads, device="cpu", backend="openvino" if openvino else "local",
                        update_dtype=args.update_dtype if openvino else "float32")
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model(base, config)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr)
    if openvino:
        from trace_gym.trainer.openvino import OpenVINOBackend

        backend = OpenVINOBackend(base, config.env_id, config.env_kwargs, adapter_dir=Path(tempfile.mkdtemp()),
                                  max_new_tokens=config.max_new_tokens, threads=args.threads,
                                  in_flight=config.groups * config.group_size)
    else:
        backend = LocalBackend(model, tokenizer, config.env_id, config.env_kwargs, temperature=1.0, top_p=1.0,
                               max_new_tokens=config.max_new_tokens,
                               batch_episodes=config.groups * config.group_size)
        backend.policy.lockstep = lockstep
    label = "ours, lockstep" if lockstep else "ours, openvino" if openvino else "ours"
    if openvino:
        label += f", update {'bf16 autocast' if config.autocast() else 'fp32'}"
    def step(i: int) -> int:
        """One iteration on every group drawn, the constant ones included, as TRL trains them
        (their advantages are 0, but the forward and backward passes run)."""
        t0 = time.perf_counter()
        backend.sync(model, i)
        synced = time.perf_counter()
        rollouts = backend.play(grpo.requests_for(config, grpo.draw_seeds(config, i, 0, config.groups, set()), i))
        t1 = time.perf_counter()
        groups = grpo.group_by_seed(rollouts, config.group_size)
        batch = grpo.samples_of(groups, grpo.advantages(groups), old_logp=config.p_old())
        parts = grpo.update(model, optimizer, batch, config, params)
        informative = sum(not grpo.is_constant(g) for g in groups.values())
        print(f"  {label}: iteration {i}: {len(rollouts)} episodes, adapter sync {synced - t0:.1f} s, rollout "
              f"{t1 - synced:.1f} s, update {time.perf_counter() - t1:.1f} s (forward+backward "
              f"{parts['time/forward_backward_s']:.1f}, optimiser {parts['time/optimizer_s']:.2f}, movement "
              f"{parts.get('time/movement_s', 0.0):.1f}), informative groups {informative}", flush=True)
        return len(rollouts)

    step(0)  # warm-up
    timer = ModelTime(model.get_base_model())
    start = time.perf_counter()
    try:
        episodes = sum(step(i) for i in range(1, args.iterations + 1))
    finally:
        timer.close()
    wall = time.perf_counter() - start
    outside = 1 - (timer.forward + timer.backward) / wall
    print(f"  {label}: model forward {timer.forward:.1f} s, backward {timer.backward:.1f} s of {wall:.1f} s wall")
    return episodes / wall, outside


def run_trl(args, base: Path) -> float:
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from trace_gym.agents.causal_lm import load_causal_lm
    from trace_gym.interop import TRLRollouts, trace_reward, trl_dataset
    from trace_gym.trainer import grpo
    from trace_gym.trainer.config import GRPOConfig as OurConfig

    torch.set_num_threads(args.threads)
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = load_causal_lm(base, torch.float32)
    ours = OurConfig(env_id=args.env, groups=args.groups, group_size=args.group_size)
    # the seeds our trainer drew, iteration by iteration (warm-up included), in the same order
    seeds = [s for i in range(args.iterations + 1) for s in grpo.draw_seeds(ours, i, 0, args.groups, set())]
    rows = trl_dataset(args.env, seeds, **ours.env_kwargs)
    rows = Dataset.from_dict({k: rows[k] for k in rows.column_names})
    times: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            times.append(time.perf_counter())

        def on_step_end(self, a, state, control, **kw):
            times[-1] = time.perf_counter() - times[-1]

    batch = args.groups * args.group_size
    config = GRPOConfig(output_dir=tempfile.mkdtemp(prefix="trl-bench-"), per_device_train_batch_size=args.group_size,
                        gradient_accumulation_steps=args.groups, num_generations=args.group_size,
                        generation_batch_size=batch, max_steps=args.iterations + 1, learning_rate=1e-5,
                        max_completion_length=8192, loss_type="grpo", beta=0.0, num_iterations=1,
                        temperature=1.0, report_to="none", use_cpu=True, save_strategy="no", logging_steps=1,
                        shuffle_dataset=False, bf16=False, seed=0)
    rollouts = TRLRollouts(args.env, tokenizer, max_new_tokens=args.max_new_tokens, batch_episodes=batch,
                           **ours.env_kwargs)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=trace_reward, train_dataset=rows,
                          rollout_func=rollouts, args=config, callbacks=[Clock()],
                          peft_config=LoraConfig(r=16, lora_alpha=16, lora_dropout=0.0,
                                                 target_modules=list(ours.lora_targets)))
    trainer.train()
    measured = times[1:]  # the first step is the warm-up
    for i, t in enumerate(measured, 1):
        print(f"  TRL: iteration {i}: {batch} episodes in {t:.1f} s", flush=True)
    return batch * len(measured) / sum(measured)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="base model directory (default: the embedded base agent)")
    parser.add_argument("--env", default="trace/precondition_verification-v0")
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lockstep", action="store_true", help="also run this trainer with lockstep rollouts, first")
    parser.add_argument("--openvino", action="store_true", help="also run this trainer with OpenVINO rollouts")
    parser.add_argument("--update-dtype", default="auto", help="the OpenVINO run's update_dtype (the embedded "
                        "recipe's: 'auto', bf16 autocast on a CPU with native bf16); the other runs update in float32")
    parser.add_argument("--skip-torch", action="store_true", help="skip the run with continuous torch rollouts")
    parser.add_argument("--skip-trl", action="store_true")
    args = parser.parse_args()
    if args.model:
        base = Path(args.model)
    else:
        from trace_gym.baseagent.build import default_agent_dir

        base = default_agent_dir()
        if not (base / "config.json").is_file():
            raise SystemExit(f"the base agent is not built at {base}: run `trace-gym base-agent build` or pass --model")
    print(f"model {base}, env {args.env}, {args.groups} groups x {args.group_size}, {args.iterations} measured "
          f"iterations, {args.max_new_tokens} new tokens a turn, {args.threads} threads ({uptime()})", flush=True)
    from trace_gym.agents.hardware import vector_flags

    print("CPU flags seen: " + vector_flags())
    if args.lockstep:
        before, _ = run_ours(args, base, lockstep=True)
        print(f"this trainer, rollouts in lockstep turns (before continuous batching): {before:.3f} samples/s  "
              f"({uptime()})", flush=True)
    if not args.skip_torch or not args.skip_trl:
        ours, outside = run_ours(args, base)
        print(f"this trainer: {ours:.3f} samples/s; time outside model forward/backward {outside:.1%} of an "
              f"iteration (goal: at most 15%)  ({uptime()})", flush=True)
        if args.lockstep:
            print(f"continuous/lockstep samples/s: {ours / before:.2f}", flush=True)
    if args.openvino:
        fast, _ = run_ours(args, base, openvino=True)
        print(f"this trainer, OpenVINO rollouts: {fast:.3f} samples/s  ({uptime()})", flush=True)
        if args.lockstep:
            print(f"openvino/lockstep samples/s: {fast / before:.2f}", flush=True)
    if args.skip_trl:
        return
    trl = run_trl(args, base)
    print(f"TRL GRPOTrainer: {trl:.3f} samples/s  ({uptime()})")
    print(f"ratio: {ours / trl:.2f}x TRL's samples/s (goal: at least 2x)")


if __name__ == "__main__":
    main()
