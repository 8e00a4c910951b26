"""Whether the tiny agent copies: the figures behind the account (docs/base-agent.md; its figures in benchmarks/RESULTS.md) of why it passes
nothing.

    python benchmarks/tiny_agent_copy.py [--model PATH] [--episodes 8]

Without --model it builds the default tiny agent into a temporary directory. It prints, all
greedy and teacher-forced:

- repeat accuracy (random token sequences shown twice) for several half lengths, of a fresh
  model after the build's repeat stage alone (the build's seed, steps and tokenizer) and of
  the built agent: the stage always uses halves of `REPEAT_HALF`, and a copy by content
  would repeat any length;
- lookup drills (`lookup_drills`, seeds the build does not use) whose every agent token is
  predicted right;
- calls of oracle test episodes (compact prompts), each seen in its per-turn window (from the
  last customer message, as the build trains on them), whose every token is predicted right.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402

import trace_gym  # noqa: E402,F401
from trace_gym.agents.base import OraclePolicy  # noqa: E402
from trace_gym.driver import EpisodeRequest, play  # noqa: E402
from trace_gym.seeding import SPLITS  # noqa: E402
from trace_gym.baseagent.scratch import (  # noqa: E402
    REPEAT_HALF,
    TARGETS,
    TinyAgentConfig,
    build,
    encode,
    lookup_drills,
    new_model,
    new_optimizer,
    repeat_stage,
    windows,
)


def predictions(model, ids: list[int]) -> list[int]:
    """The model's greedy next token after each position of `ids`."""
    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0, :-1].argmax(-1).tolist()


def last_turn_exact(model, tokenizer, demo: dict) -> tuple[bool, bool]:
    """(every token of the last agent turn predicted right, that turn is a tool call)."""
    ids, mask = encode(tokenizer, demo)
    pred = predictions(model, ids)
    end = max(i for i, m in enumerate(mask) if m)
    start = end
    while mask[start - 1]:
        start -= 1
    exact = all(pred[t - 1] == ids[t] for t in range(start, end + 1))
    return exact, tokenizer.convert_tokens_to_ids("<tool_call>") in ids[start: end + 1]


def repeat_accuracy(model, tokenizer, half: int, rows: int = 64) -> float:
    special = set(tokenizer.all_special_ids)
    vocab = torch.tensor([i for i in range(len(tokenizer)) if i not in special])
    first = vocab[torch.randint(len(vocab), (rows, half), generator=torch.Generator().manual_seed(half))]
    input_ids = torch.cat([first, first], dim=1)
    with torch.no_grad():
        guess = model(input_ids=input_ids).logits[:, half:-1].argmax(-1)  # predicts tokens half+1 ..
    return (guess == input_ids[:, half + 1:]).float().mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a built tiny agent (default: build one now)")
    parser.add_argument("--episodes", type=int, default=8, help="oracle test episodes per target env")
    args = parser.parse_args()
    from transformers import AutoTokenizer

    from trace_gym.agents.causal_lm import load_causal_lm

    torch.set_num_threads(2)
    config = TinyAgentConfig()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(args.model) if args.model else build(config, out=Path(tmp) / "tiny")
        tokenizer = AutoTokenizer.from_pretrained(path)
        model = load_causal_lm(path).eval()
    halves = sorted({8, 16, REPEAT_HALF, 32})
    fresh = new_model(config.preset, tokenizer, config.seed)
    repeat_stage(fresh, tokenizer, new_optimizer(fresh, config.lr), config)
    for name, which in (("after the repeat stage alone", fresh.eval()), ("the built agent", model)):
        print(f"repeat accuracy by half length, {name}: " + ", ".join(
            f"{h}: {repeat_accuracy(which, tokenizer, h):.3f}" for h in halves))
    drills = lookup_drills(seed=12_345, n=50)
    exact = sum(last_turn_exact(model, tokenizer, d)[0] for d in drills)
    print(f"lookup drills exactly right, the built agent: {exact}/{len(drills)}")
    calls = right = 0
    for env_id in TARGETS:
        episodes = [EpisodeRequest(SPLITS["test"].start + i) for i in range(args.episodes)]
        for played in play(episodes, OraclePolicy(), env_id=env_id,
                           make_env=lambda name: gym.make(name, prompt_style="compact")):
            for window in windows({"messages": played.messages, "tools": [], "kinds": []}):
                ok, is_call = last_turn_exact(model, tokenizer, window)
                calls += is_call
                right += ok and is_call
    print(f"test-episode calls exactly right in their windows, the built agent: {right}/{calls}")


if __name__ == "__main__":
    main()
