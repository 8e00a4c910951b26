"""The coding envs' reward integrity at full count: oracle, adversaries, no vacuous task.

    python benchmarks/coding_integrity.py [--seeds 500] [--vacuous-seeds 1000] [--workers 2] [--envs A,B]

For each coding env (trace/coding-v0, trace/code_localization-v0, trace/issue_reproduction-v0):
the oracle on `seeds` train and `seeds` test seeds (every other one hinted) must score 1.0;
each adversary of `trace_gym.testing.coding` must score 0 on every one of them, and each
bounded heuristic's mean (on train and on test seeds, each printed) must stay in its bound;
the policies that read trace-gym's own templates (`TEMPLATE_KNOWLEDGE`, outside the threat
model) are played and reported with no bound. Then, on `vacuous-seeds` seeds of
coding-v0, every hidden FAIL_TO_PASS test must fail on the unfixed package and every hidden
test pass on the fixed one, run in the sandbox as the verifier runs them. Prints one line per
check with its count and the seconds it took, and exits 1 if any check failed. The suite
runs the same checks on a sample (tests/coding).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym

import trace_gym  # noqa: F401  (registers the envs)
from trace_gym.agents.hardware import vector_flags
from trace_gym.coding import DOMAIN
from trace_gym.seeding import SPLITS
from trace_gym.testing import coding
from trace_gym.testing.policies import oracle, play

ENVS = (DOMAIN.target_env_id, *DOMAIN.capability_env_ids)


def _seeds(n: int) -> list[int]:
    return [*range(n), *range(SPLITS["test"].start, SPLITS["test"].start + n)]


UNBOUNDED = 2.0
"""The 'bound' of a policy that is reported only (template knowledge)."""


def _policies(env_id: str) -> dict[str, tuple[object, float | None]]:
    """Name -> (policy, bound on its mean; None: must score 0 on every seed; 1.0 for the
    oracle; `UNBOUNDED` for a policy reported only)."""
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    zero, bounded = coding.adversary_set(env.task.to_json())
    out: dict[str, tuple[object, float | None]] = {"oracle": (oracle, 1.0)}
    out.update({name: (policy, None) for name, policy in zero.items()})
    out.update({name: (policy, bound) for name, (policy, bound) in bounded.items()})
    out.update({name: (policy, UNBOUNDED) for name, policy in coding.TEMPLATE_KNOWLEDGE.get(env_id, {}).items()})
    return out


def check(env_id: str, name: str, seeds: list[int]) -> tuple[str, str, int, float, float, str]:
    """(env, policy, seeds played, mean reward on the train half, on the test half, the
    first failure or '')."""
    env = gym.make(env_id).unwrapped
    policy, bound = _policies(env_id)[name]
    rewards, failure = [], ""
    for i, seed in enumerate(seeds):
        reward, _, _ = play(env, seed, policy, hint=bool(i % 2))
        rewards.append(reward)
        if not failure and ((name == "oracle" and reward != 1.0) or (bound is None and reward != 0.0)):
            failure = f"seed {seed}: {reward}"
    half = len(seeds) // 2
    train, test = sum(rewards[:half]) / half, sum(rewards[half:]) / (len(seeds) - half)
    mean = sum(rewards) / len(seeds)
    if not failure and bound is not None and name != "oracle" and bound != UNBOUNDED and mean > bound:
        failure = f"mean {mean:.3f} > bound {bound}"
    return env_id, name, len(seeds), train, test, failure


def vacuous(seeds: list[int]) -> tuple[int, str]:
    env = gym.make(DOMAIN.target_env_id).unwrapped
    try:
        coding.f2p_not_vacuous(env, seeds)
    except AssertionError as exc:
        return len(seeds), str(exc)
    return len(seeds), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=500, help="train seeds and as many test seeds per check")
    parser.add_argument("--vacuous-seeds", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--envs", default=",".join(ENVS), help="comma-separated coding env ids (default: all three)")
    args = parser.parse_args()
    envs = [e for e in args.envs.split(",") if e]
    unknown = sorted(set(envs) - set(ENVS))
    if unknown:
        parser.error(f"--envs {unknown} are not coding envs; allowed: {', '.join(ENVS)}")
    print(f"cpu flags seen: {vector_flags()}")
    seeds = _seeds(args.seeds)
    jobs = [(env_id, name) for env_id in envs for name in _policies(env_id)]
    failed = False
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        futures = {pool.submit(check, env_id, name, seeds): time.perf_counter() for env_id, name in jobs}
        half = args.vacuous_seeds // 2
        vac = [("train", pool.submit(vacuous, list(range(half)))),
               ("test", pool.submit(vacuous, list(range(SPLITS["test"].start,
                                                         SPLITS["test"].start + args.vacuous_seeds - half))))
               ] if DOMAIN.target_env_id in envs else []
        print(f"{'env':34s} {'policy':27s} {'seeds':>6s} {'train':>7s} {'test':>7s} {'bound':>9s}  result")
        for (env_id, name), future in zip(jobs, futures):
            env_id, name, n, train, test, failure = future.result()
            failed |= bool(failure)
            bound = _policies(env_id)[name][1]
            shown = ("each 0" if bound is None else "each 1" if name == "oracle"
                     else "reported" if bound == UNBOUNDED else f"{bound}")
            print(f"{env_id:34s} {name:27s} {n:6d} {train:7.3f} {test:7.3f} {shown:>9s}  {failure or 'ok'}", flush=True)
        for split, future in vac:
            n, failure = future.result()
            failed |= bool(failure)
            check_name = f"f2p fails unfixed ({split})"
            print(f"{DOMAIN.target_env_id:34s} {check_name:27s} {n:6d} {'':7s}  {failure or 'ok'}", flush=True)
    print(f"{time.perf_counter() - start:.0f} s in all")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
