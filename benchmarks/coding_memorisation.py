"""How much a memorising policy earns on the coding target: fixes learnt by heart on train seeds.

    python benchmarks/coding_memorisation.py [--fit 200,1000,3000] [--seeds 300]

For each fit size N, the kit's memoriser (`trace_gym.testing.coding.memoriser`) learns a
table from the first N train seeds of trace/coding-v0 (the buggy lines of each task's bug
-> the lines of its fix) and plays `seeds` test seeds with it (test seeds' packages hold
the held-out templates), scored by the env's own verifier. Prints the table's size and the
mean reward overall, on tasks whose bug is in a held-out template, and on the others.
The first generator's catalogue (28 fixed bug texts) let such a table fix 96% of seeds.

Then the template-aware restorer (`trace_gym.testing.restorer`), which reads code only and
knows every template, constant and knob value (or, `train templates`, only what train
seeds show), on `seeds` train and `seeds` test seeds of trace/coding-v0 (it puts back
what matches no version) and trace/code_localization-v0 (it names it): the mean overall,
on tasks where every definition of the buggy package matches some version ("unseen": knob
bugs, and edits that give another seed's constant), and on the others.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym

import trace_gym  # noqa: F401  (registers the envs)
from trace_gym.agents.hardware import vector_flags
from trace_gym.coding import DOMAIN
from trace_gym.coding.templates import FUNCTIONS, canonical
from trace_gym.seeding import SPLITS
from trace_gym.testing.coding import memoriser, patch_table
from trace_gym.testing.policies import play
from trace_gym.testing.restorer import restore, restorer_fix, restorer_locate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", default="200,1000,3000", help="fit sizes, comma-separated")
    parser.add_argument("--seeds", type=int, default=300, help="test seeds played per fit size")
    parser.add_argument("--fit-only", action="store_true", help="skip the restorer")
    args = parser.parse_args()
    print(f"cpu flags seen: {vector_flags()}")
    memorise(args)
    if not args.fit_only:
        restorer(args.seeds)


def memorise(args: argparse.Namespace) -> None:
    """The memoriser's table at each fit size."""
    env = gym.make(DOMAIN.target_env_id).unwrapped
    seeds = range(SPLITS["test"].start, SPLITS["test"].start + args.seeds)
    held = {}
    for seed in seeds:
        env.reset(seed=seed)
        held[seed] = FUNCTIONS[canonical(env.task.bug_function)][1].held_out
    print(f"{sum(held.values())} of {len(held)} test seeds have the bug in a held-out template")
    print(f"{'fit seeds':>9s} {'table':>6s} {'all':>6s} {'held-out':>9s} {'others':>7s} {'s':>5s}")
    for fit in (int(n) for n in args.fit.split(",")):
        start = time.perf_counter()
        table = patch_table(env, list(range(fit)))
        rewards = {seed: play(env, seed, memoriser(table))[0] for seed in seeds}

        def mean(picked: list[int]) -> float:
            return sum(rewards[s] for s in picked) / max(1, len(picked))

        print(f"{fit:9d} {len(table):6d} {mean(list(seeds)):6.3f} {mean([s for s in seeds if held[s]]):9.3f} "
              f"{mean([s for s in seeds if not held[s]]):7.3f} {time.perf_counter() - start:5.0f}", flush=True)


def restorer(n: int) -> None:
    """The restorer on both envs, train and test seeds, knowing every template or the train ones."""
    print(f"{'env':28s} {'split':5s} {'knows':16s} {'all':>6s} {'unseen':>9s} {'others':>7s} {'s':>5s}")
    for env_id, make in ((DOMAIN.target_env_id, restorer_fix), ("trace/code_localization-v0", restorer_locate)):
        env = gym.make(env_id).unwrapped
        for split in ("train", "test"):
            seeds = range(SPLITS[split].start, SPLITS[split].start + n)
            knob = {}
            for seed in seeds:
                env.reset(seed=seed)
                task = env.task
                knob[seed] = restore(task.files, task.package)[1] == []
            for held_out in (True, False) if split == "test" else (True,):
                start = time.perf_counter()
                rewards = {seed: play(env, seed, make(held_out))[0] for seed in seeds}

                def mean(picked: list[int]) -> float:
                    return sum(rewards[s] for s in picked) / max(1, len(picked))

                knows = "every template" if held_out else "train templates"
                print(f"{env_id:28s} {split:5s} {knows:16s} {mean(list(seeds)):6.3f} "
                      f"{mean([s for s in seeds if knob[s]]):9.3f} {mean([s for s in seeds if not knob[s]]):7.3f} "
                      f"{time.perf_counter() - start:5.0f}", flush=True)


if __name__ == "__main__":
    main()
