"""The embedded base agent: build time, and how it does on the target envs.

    python benchmarks/tiny_agent.py [--model PATH] [--episodes 16]

Without --model it builds the default tiny agent (timing the build) into a temporary
directory. It then plays `--episodes` test seeds per target env (compact prompts, greedy
decoding) and prints the share of turns that parse (a reply or a well-formed tool call),
the pass rate and the mean reward, next to the oracle's 1.0.
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
from trace_gym.driver import EpisodeRequest, play  # noqa: E402
from trace_gym.messages import INVALID_TOOL_CALL  # noqa: E402
from trace_gym.seeding import SPLITS  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a built tiny agent (default: build one now)")
    parser.add_argument("--episodes", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else None
        if path is None:
            from trace_gym.baseagent.scratch import build

            start = time.perf_counter()
            path = build(out=Path(tmp) / "tiny")
            print(f"build: {time.perf_counter() - start:.0f} s (goal: at most 300 s)")
        # The policy's default token budget: a smaller one cuts some of the oracle's own
        # turns (calls with an address or several item ids) and counts them unparseable.
        factory = functools.partial(make_policy, "local", model_path=str(path), temperature=0.0)
        for env_id in ("trace/airline-v0", "trace/retail-v0"):
            episodes = [EpisodeRequest(SPLITS["test"].start + i) for i in range(args.episodes)]
            start = time.perf_counter()
            records = [p.record() for p in play(episodes, factory, env_id=env_id,
                                                env_kwargs={"prompt_style": "compact"}, in_flight=8)]
            turns = [m for r in records for m in r["messages"] if m["role"] == "assistant"]
            bad = sum(any(tc["function"]["name"] == INVALID_TOOL_CALL for tc in m.get("tool_calls") or [])
                      for m in turns)
            passed = sum(r["passed"] for r in records)
            print(f"{env_id:18s} parseable turns {1 - bad / max(1, len(turns)):.3f}  pass rate "
                  f"{passed / len(records):.3f} ({passed}/{len(records)})  mean reward "
                  f"{sum(r['reward'] for r in records) / len(records):.3f}  oracle 1.000  "
                  f"[{time.perf_counter() - start:.0f} s]")


if __name__ == "__main__":
    main()
