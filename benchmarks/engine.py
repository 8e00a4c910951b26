"""The rollout engine, today's default against the new one, on the embedded base agent.

    python benchmarks/engine.py [--targets 32] [--capability 16] [--model DIR] [--modes today,new,torch]
                                [--save DIR]

Plays the same episodes under each mode, each mode in a process of its own (so that its peak
memory is its own): `--targets` test seeds of each target (trace/airline-v0,
trace/retail-v0, greedy, as `trace-gym eval` plays them) in one driver run, and
`--capability` test seeds of each of the four shipped capability envs (temperature 1.0, as
GRPO's rollouts) in another, the envs' episodes interleaved, with the knobs of
configs/embedded.toml (`--config`, the shipped one by default).

- today: static batches of 8 episodes advancing turn by turn in lockstep, KV reuse, fp32,
  one torch thread (the local policy's defaults before the engine issue);
- new: the default engine, OpenVINO GenAI (`trace_gym.agents.openvino`): continuous
  batching of `--in-flight` episodes, every usable core, bf16 where the CPU has it natively
  (`trace_gym.agents.hardware`), prefix caching between turns (its prefill is not counted);
- torch (with `--modes today,new,torch`): the same schedule on the torch engine
  (`trace_gym.agents.engine`).

With `--save DIR`, each mode's figures are kept when it ends, and while it runs each part it
has played (a static batch of `today`, a whole continuous run): a stopped run of hours
resumes at the part it was in, its wall time the sum of its parts'. Parts are reused only
under the same settings, env knobs and CPU flags.

Prints per mode: wall time, episodes a minute, generated and prefilled tokens a second, peak
memory; the CPU flags seen; and on its last line the new/today ratio of episodes a minute.
"""

from __future__ import annotations

import argparse
import hashlib
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


def _policy(args: argparse.Namespace, mode: dict, where, temperature: float, max_new: int):
    """The mode's policy at this temperature."""
    if mode.get("engine") == "openvino":
        from trace_gym.agents.openvino import OpenVINOPolicy

        return OpenVINOPolicy(args.model, temperature=temperature, max_new_tokens=max_new, dtype=where.dtype,
                              threads=where.threads)
    from trace_gym.agents.local import LocalModelPolicy

    return LocalModelPolicy(args.model, temperature=temperature, max_new_tokens=max_new, dtype=where.dtype,
                            threads=where.threads, lockstep=mode["static"])


def run_mode(args: argparse.Namespace) -> dict:
    """Play every episode under one mode (in this process); the measured figures."""
    from trace_gym.agents.hardware import placement
    from trace_gym.driver import EpisodeRequest, make_env, play
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
    # What is played is kept a part at a time (a static batch, or a whole continuous run) in
    # --progress, so that a run of hours that is stopped resumes at the part it was in.
    knobs = {env_id: env_knobs(config, env_id) for env_id in (*TARGETS, *CAPABILITY)}  # read once
    progress = Path(args.progress) if args.progress else None
    done = json.loads(progress.read_text())["parts"] if progress is not None and progress.is_file() else {}
    peak = 0
    for label, env_ids, temperature, max_new, count in plan:
        if count <= 0:
            continue
        test = seeds("test", 0, count)
        todo = [EpisodeRequest(seed, 0, sampling_seed=seed, env_id=env_id) for seed in test for env_id in env_ids]
        size = mode["in_flight"] if mode["static"] else len(todo)
        parts = [todo[i:i + size] for i in range(0, len(todo), size)]
        policy = None
        for index, part in enumerate(parts):
            key = f"{label}/{index}"
            if key in done:
                continue
            if policy is None:
                policy = _policy(args, mode, where, temperature, max_new)
            stats = getattr(getattr(policy, "engine", None), "stats", None) or _NoStats()
            prefilled, reused = stats.prefilled, stats.reused
            start = time.perf_counter()
            played = list(play(part, policy, make_env=lambda env_id: make_env(env_id, **knobs[env_id]),
                               in_flight=mode["in_flight"], static=mode["static"]))
            seconds = time.perf_counter() - start
            done[key] = {"seconds": seconds, "episodes": len(played), "passed": sum(p.passed for p in played),
                         "errors": sum(bool(p.error) for p in played), "turns": sum(len(p.turns) for p in played),
                         "generated": sum(len(t.completion_ids) for p in played for t in p.turns),
                         "prefilled": stats.prefilled - prefilled, "reused": stats.reused - reused,
                         "peak_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
            if progress is not None:
                from trace_gym.jsondata import write_json_atomic

                write_json_atomic(progress, {"parts": done})
            print(f"  {args.mode:5s} {key:12s} {len(played):3d} episodes in {seconds:7.1f} s "
                  f"({len(played) / seconds * 60:6.1f}/min), {done[key]['turns']} turns, "
                  f"{done[key]['generated']} generated, {done[key]['prefilled']} prefilled, "
                  f"{done[key]['passed']} passed{_arena(policy)}", file=sys.stderr, flush=True)
        if policy is not None:
            close = getattr(policy, "close", None)
            if close:
                close()
            del policy
        mine = [done[f"{label}/{i}"] for i in range(len(parts))]
        by_env[label] = {name: sum(m[name] for m in mine) for name in
                         ("seconds", "episodes", "passed", "errors", "turns", "generated", "prefilled", "reused")}
        by_env[label]["seconds"] = round(by_env[label]["seconds"], 1)
        wall += sum(m["seconds"] for m in mine)
        episodes += by_env[label]["episodes"]
        generated += by_env[label]["generated"]
        prefilled += by_env[label]["prefilled"]
        peak = max([peak, *(m["peak_bytes"] for m in mine)])
    return {"mode": args.mode, "engine": mode.get("engine", "torch"), "placement": where.as_dict(),
            "in_flight": mode["in_flight"], "static": mode["static"], "wall_s": round(wall, 1), "episodes": episodes,
            "episodes_per_min": episodes / wall * 60, "generated_per_s": generated / wall,
            "prefilled_per_s": prefilled / wall, "peak_bytes": peak, "by_env": by_env}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--targets", type=int, default=32, help="test seeds per target env")
    parser.add_argument("--capability", type=int, default=16, help="test seeds per capability env")
    parser.add_argument("--model", help="base agent directory (default: the one `trace-gym base-agent build` made)")
    parser.add_argument("--config", default="embedded", help="run configuration: a path, or a shipped one by name")
    parser.add_argument("--max-new-tokens", type=int, default=192, help="per turn, target envs (eval's default)")
    parser.add_argument("--capability-max-new-tokens", type=int, default=128, help="per turn, capability envs "
                        "(the trainer's embedded recipe)")
    parser.add_argument("--modes", default="today,new")
    parser.add_argument("--in-flight", type=int, help="override the mode's episodes in flight")
    parser.add_argument("--save", help="directory that keeps each mode's figures as it ends (<mode>.json), and "
                        "while it runs the parts it has played (a static batch, a continuous run); a rerun with "
                        "the same settings on a CPU with the same flags reads them instead of playing them again")
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--progress", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from trace_gym.baseagent.build import default_agent_dir

        args.model = str(default_agent_dir())
    if not (Path(args.model) / "config.json").is_file():
        sys.exit(f"no base agent at {args.model}: run `trace-gym base-agent build` first")
    from trace_gym.resources import config_path

    args.config = str(config_path(args.config).resolve())
    if args.mode:  # one mode, in this process: its figures as JSON on stdout
        print(json.dumps(run_mode(args)))
        return
    from trace_gym.agents.hardware import cpu_flags, placement, vector_flags
    from trace_gym.runconfig import env_knobs

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
                    "knobs": {env_id: env_knobs(args.config, env_id) for env_id in (*TARGETS, *CAPABILITY)},
                    "cpu_flags": sorted(cpu_flags())}  # figures of this machine's CPU only
        saved = Path(args.save) / f"{mode}.json" if args.save else None
        kept = json.loads(saved.read_text()) if saved is not None and saved.is_file() else None
        if kept is not None and kept.get("settings") == settings:
            r = results[mode] = kept["figures"]
            print(f"{mode}: figures saved in {saved}", flush=True)
        else:
            if saved is not None:  # the parts played so far under these very settings
                key = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]
                command += ["--progress", str(saved.with_name(f"{mode}-{key}.parts.json"))]
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
