"""The rollout engine, today's default against the new one, on the embedded base agent.

    python benchmarks/engine.py [--targets 32] [--capability 16] [--model DIR] [--modes today,new,torch]
                                [--save DIR]

Plays the same episodes under each mode, each mode in a process of its own (so that its peak
memory is its own): `--targets` test seeds of each target (trace/airline-v0,
trace/retail-v0, greedy, as `trace-gym eval` plays them) in one driver run, and
`--capability` test seeds of each of the four shipped capability envs (temperature 1.0, as
GRPO's rollouts) in another, the envs' episodes interleaved, with the knobs of
configs/embedded.toml.

- today: static batches of 8 episodes advancing turn by turn in lockstep, KV reuse, fp32,
  one torch thread (the local policy's defaults before the engine issue);
- new: the default engine, OpenVINO GenAI (`trace_gym.agents.openvino`): continuous
  batching of `--in-flight` episodes, every usable core, bf16 where the CPU has it natively
  (`trace_gym.agents.hardware`), prefix caching between turns (its prefill is not counted);
- torch (with `--modes today,new,torch`): the same schedule on the torch engine
  (`trace_gym.agents.engine`).

Prints per mode: wall time, episodes a minute, generated and prefilled tokens a second, peak
memory; the CPU flags seen; and on its last line the new/today ratio of episodes a minute.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGETS = ("trace/airline-v0", "trace/retail-v0")
CAPABILITY = ("trace/precondition_verification-v0", "trace/structured_data_reasoning-v0",
              "trace/multi_step_task_completion-v0", "trace/tool_calling_precision-v0")
MODES = {
    "today": {"dtype": "float32", "threads": 1, "in_flight": 8, "static": True},
    "new": {"dtype": "auto", "threads": None, "in_flight": 64, "static": False, "engine": "openvino"},
    "torch": {"dtype": "auto", "threads": None, "in_flight": 64, "static": False},
}


def _arena(policy) -> str:
    """The engine's keys-and-values arena: rows x columns and its size."""
    engine = getattr(policy, "engine", None)
    if engine is None or not engine.k:
        return ""
    size = sum(t.numel() * t.element_size() for t in (*engine.k, *engine.v))
    rows, columns = engine.capacity
    return f", arena {rows} x {columns} ({size / 2**30:.2f} GiB)"


class _NoStats:
    """An engine that does not count its prefill (OpenVINO's prefix cache)."""

    prefilled = reused = 0


def run_mode(args: argparse.Namespace) -> dict:
    """Play every episode under one mode (in this process); the measured figures."""
    from trace_gym.agents.episodes import make_env
    from trace_gym.agents.hardware import placement
    from trace_gym.agents.local import LocalModelPolicy
    from trace_gym.driver import Episode, play
    from trace_gym.runconfig import env_knobs
    from trace_gym.seeding import seeds

    mode = dict(MODES[args.mode])
    if args.in_flight:
        mode["in_flight"] = args.in_flight
    where = placement(mode["dtype"], mode["threads"])
    config = Path(args.config)
    wall = 0.0
    episodes = generated = prefilled = 0
    by_env = {}
    # one driver run per temperature, every env's episodes in it (interleaved, so that a
    # continuous batch holds as many as the schedule allows)
    plan = [("targets", TARGETS, 0.0, args.max_new_tokens, args.targets),
            ("capability", CAPABILITY, 1.0, args.capability_max_new_tokens, args.capability)]
    for label, env_ids, temperature, max_new, count in plan:
        if count <= 0:
            continue
        if mode.get("engine") == "openvino":
            from trace_gym.agents.openvino import OpenVINOPolicy

            policy = OpenVINOPolicy(args.model, temperature=temperature, max_new_tokens=max_new, dtype=where.dtype,
                                    threads=where.threads)
        else:
            policy = LocalModelPolicy(args.model, temperature=temperature, max_new_tokens=max_new,
                                      dtype=where.dtype, threads=where.threads, lockstep=mode["static"])
        test = seeds("test", 0, count)
        todo = [Episode(seed, 0, sampling_seed=seed, env_id=env_id) for seed in test for env_id in env_ids]
        start = time.perf_counter()
        played = list(play(todo, policy, make_env=lambda env_id: make_env(env_id, **env_knobs(config, env_id)),
                           in_flight=mode["in_flight"], static=mode["static"]))
        seconds = time.perf_counter() - start
        stats = getattr(getattr(policy, "engine", None), "stats", None) or _NoStats()
        turn_tokens = sum(len(t.completion_ids) for p in played for t in p.turns)
        wall += seconds
        episodes += len(played)
        generated += turn_tokens
        prefilled += stats.prefilled
        by_env[label] = {"episodes": len(played), "seconds": round(seconds, 1),
                         "passed": sum(p.passed for p in played), "errors": sum(bool(p.error) for p in played),
                         "turns": sum(len(p.turns) for p in played), "generated": turn_tokens,
                         "prefilled": stats.prefilled, "reused": stats.reused}
        print(f"  {args.mode:5s} {label:10s} {len(played):3d} episodes in {seconds:7.1f} s "
              f"({len(played) / seconds * 60:6.1f}/min), {by_env[label]['turns']} turns, "
              f"{turn_tokens} generated, {stats.prefilled} prefilled, {by_env[label]['passed']} passed"
              f"{_arena(policy)}", file=sys.stderr, flush=True)
        close = getattr(policy, "close", None)
        if close:
            close()
        del policy
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"mode": args.mode, "engine": mode.get("engine", "torch"), "placement": where.as_dict(),
            "in_flight": mode["in_flight"], "static": mode["static"], "wall_s": round(wall, 1), "episodes": episodes,
            "episodes_per_min": episodes / wall * 60, "generated_per_s": generated / wall,
            "prefilled_per_s": prefilled / wall, "peak_bytes": peak, "by_env": by_env}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=32, help="test seeds per target env")
    parser.add_argument("--capability", type=int, default=16, help="test seeds per capability env")
    parser.add_argument("--model", help="base agent directory (default: the one `trace-gym base-agent build` made)")
    parser.add_argument("--config", default=str(Path(__file__).resolve().parents[1] / "configs" / "embedded.toml"))
    parser.add_argument("--max-new-tokens", type=int, default=192, help="per turn, target envs (eval's default)")
    parser.add_argument("--capability-max-new-tokens", type=int, default=128, help="per turn, capability envs "
                        "(the trainer's embedded recipe)")
    parser.add_argument("--modes", default="today,new")
    parser.add_argument("--in-flight", type=int, help="override the mode's episodes in flight")
    parser.add_argument("--save", help="directory that keeps each mode's figures as it ends (<mode>.json); a rerun "
                        "with the same settings on a CPU with the same flags reads them instead of playing "
                        "that mode again")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from trace_gym.baseagent.build import default_agent_dir

        args.model = str(default_agent_dir())
    if not (Path(args.model) / "config.json").is_file():
        sys.exit(f"no base agent at {args.model}: run `trace-gym base-agent build` first")
    if args.mode:  # one mode, in this process: its figures as JSON on stdout
        print(json.dumps(run_mode(args)))
        return
    from trace_gym.agents.hardware import cpu_flags, placement, vector_flags

    print(f"CPU flags seen: {vector_flags()}")
    print(f"model: {args.model}")
    print(f"episodes per mode: {2 * args.targets} target (greedy) + {4 * args.capability} capability (T = 1.0)")
    results = {}
    for mode in args.modes.split(","):
        command = [sys.executable, __file__, "--mode", mode, "--model", args.model, "--config", args.config,
                   "--targets", str(args.targets), "--capability", str(args.capability),
                   "--max-new-tokens", str(args.max_new_tokens),
                   "--capability-max-new-tokens", str(args.capability_max_new_tokens)]
        if args.in_flight:
            command += ["--in-flight", str(args.in_flight)]
        settings = {"mode": mode, "model": args.model, "config": args.config, "targets": args.targets,
                    "capability": args.capability, "max_new_tokens": args.max_new_tokens,
                    "capability_max_new_tokens": args.capability_max_new_tokens, "in_flight": args.in_flight,
                    "cpu_flags": sorted(cpu_flags())}  # figures of this machine's CPU only
        saved = Path(args.save) / f"{mode}.json" if args.save else None
        kept = json.loads(saved.read_text()) if saved is not None and saved.is_file() else None
        if kept is not None and kept.get("settings") == settings:
            r = results[mode] = kept["figures"]
            print(f"{mode}: figures saved in {saved}", flush=True)
        else:
            done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
            r = results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            if saved is not None:
                from trace_gym.jsondata import write_json_atomic

                write_json_atomic(saved, {"settings": settings, "figures": r})
        p = r["placement"]
        print(f"{mode:5s}: {r.get('engine', 'torch')}, {p['dtype']}, {p['threads']} thread(s), {r['in_flight']} in "
              "flight"
              f"{' (static batches, lockstep turns)' if r['static'] else ' (continuous batching)'}: "
              f"{r['episodes']} episodes in {r['wall_s']:.0f} s = {r['episodes_per_min']:.2f} episodes/min; "
              f"{r['generated_per_s']:.1f} generated and {r['prefilled_per_s']:.0f} prefilled tokens/s; "
              f"peak memory {r['peak_bytes'] / 2**30:.2f} GiB", flush=True)
        for env_id, e in r["by_env"].items():
            print(f"       {env_id:12s} {e['episodes']:3d} episodes {e['seconds']:7.1f} s  passed {e['passed']:3d}  "
                  f"errors {e['errors']}  turns {e['turns']:4d}  generated {e['generated']:6d}  "
                  f"prefilled {e['prefilled']:7d}  reused {e['reused']:8d}")
    del placement
    if "today" in results and "new" in results:
        ratio = results["new"]["episodes_per_min"] / results["today"]["episodes_per_min"]
        if "torch" in results:
            torch_ratio = results["torch"]["episodes_per_min"] / results["today"]["episodes_per_min"]
            print(f"torch/today episodes a minute: {torch_ratio:.2f}")
        print(f"new/today episodes a minute: {ratio:.2f}")


if __name__ == "__main__":
    main()
