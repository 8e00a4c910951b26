"""Rollout throughput: oracle episodes per second with one and two episodes in flight, and
local-agent episodes per minute (batched local generation).

    python benchmarks/rollout_throughput.py [--episodes 400] [--tiny PATH] [--tiny-episodes 16]

The oracle figure is the whole rollout path (the episode driver, records, atomic appends); the tiny
agent one uses the base agent in the cache (`trace-gym base-agent build`), or --tiny.
"""

from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from trace_gym.agents import make_policy  # noqa: E402
from trace_gym.rollout import rollout  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--tiny", help="local agent directory (default: the base agent in the cache)")
    parser.add_argument("--tiny-episodes", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for env_id in ("trace/airline-v0", "trace/retail-v0"):
            for workers in (1, 2):
                out = Path(tmp) / f"{env_id.replace('/', '_')}-{workers}.jsonl"
                start = time.perf_counter()
                rollout(env_id, functools.partial(make_policy, "oracle"), range(args.episodes), out,
                        workers=workers, progress=False)
                rate = args.episodes / (time.perf_counter() - start)
                print(f"oracle  {env_id:20s} workers={workers}  {rate:8.0f} episodes/s")
        from trace_gym.baseagent.build import default_agent_dir

        tiny = Path(args.tiny) if args.tiny else default_agent_dir()
        if not (tiny / "config.json").is_file():
            print(f"base agent: not built at {tiny} (run `trace-gym base-agent build`)")
            return
        for env_id in ("trace/airline-v0", "trace/retail-v0"):
            out = Path(tmp) / "tiny.jsonl"
            factory = functools.partial(make_policy, "local", model_path=str(tiny), temperature=1.0)
            start = time.perf_counter()
            rollout(env_id, factory, range(args.tiny_episodes), out, workers=8, progress=False,
                    env_kwargs={"prompt_style": "compact"})
            minutes = (time.perf_counter() - start) / 60
            print(f"tiny    {env_id:20s} batch=8    {args.tiny_episodes / minutes:8.1f} episodes/min")
            out.unlink()


if __name__ == "__main__":
    main()
