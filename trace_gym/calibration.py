"""Calibration: is an env the right difficulty for the base policy to learn from?

Roll out the base policy on many seeds, several samples each (a GRPO group per seed), and
check TRACE's bands: mean reward and success rate in [0.2, 0.6], reward spread (std) at
least 0.05, at most 20% of groups all successes and at most 20% all zeros, at most half the
groups constant. pass@k (the chance that k samples contain a success) is reported too.
Bands are configurable: a tiny CPU model needs other bands than a 30B model.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass
from math import comb
from statistics import mean, pstdev
from typing import Any

from trace_gym.errors import InvalidConfig

SUCCESS = 1.0 - 1e-9


@dataclass(frozen=True)
class Bands:
    """The difficulty bands a calibrated env sits in for its base policy (inclusive), each
    checked over the GRPO groups of a calibration rollout."""

    mean_reward: tuple[float, float] = (0.2, 0.6)
    """(low, high) of the mean reward."""
    success_rate: tuple[float, float] = (0.2, 0.6)
    """(low, high) of the share of episodes that pass."""
    min_reward_std: float = 0.05
    """Least standard deviation of the rewards (no variance, no GRPO signal)."""
    max_all_success_groups: float = 0.2
    """Largest share of groups whose every episode passes."""
    max_all_zero_groups: float = 0.2
    """Largest share of groups whose every episode scores 0."""
    max_constant_groups: float = 0.5
    """Largest share of groups with one reward throughout (no advantage to learn from)."""

    def __post_init__(self) -> None:
        from trace_gym.validation import require

        for name in ("mean_reward", "success_rate"):
            pair = tuple(getattr(self, name))
            require(self, name, len(pair) == 2 and all(isinstance(v, (int, float)) for v in pair)
                    and 0.0 <= pair[0] <= pair[1] <= 1.0, "must be (low, high) with 0 <= low <= high <= 1")
        for name in ("min_reward_std", "max_all_success_groups", "max_all_zero_groups", "max_constant_groups"):
            require(self, name, 0.0 <= getattr(self, name) <= 1.0, "must be in [0, 1]")


def pass_at_k(successes: int, samples: int, k: int) -> float:
    """The chance that k of the samples, drawn without replacement, include a success."""
    if k > samples:
        return float("nan")
    return 1.0 - comb(samples - successes, k) / comb(samples, k)


def measure(groups: dict[Any, list[float]]) -> dict[str, Any]:
    """The calibration figures of reward groups (seed -> rewards of its samples)."""
    if not groups or not all(groups.values()):
        raise InvalidConfig("calibration needs at least one group of at least one episode; the rollout gave "
                            f"{len(groups)} group(s)")
    rewards = [r for g in groups.values() for r in g]
    n = len(groups)
    samples = min(len(g) for g in groups.values())
    return {
        "groups": n, "episodes": len(rewards),
        "mean_reward": mean(rewards), "success_rate": mean(r >= SUCCESS for r in rewards),
        "reward_std": pstdev(rewards),
        "all_success_groups": sum(all(r >= SUCCESS for r in g) for g in groups.values()) / n,
        "all_zero_groups": sum(all(r <= 0.0 for r in g) for g in groups.values()) / n,
        "constant_groups": sum(max(g) - min(g) <= 1e-12 for g in groups.values()) / n,
        "pass_at_k": {str(k): mean(pass_at_k(sum(r >= SUCCESS for r in g), len(g), k) for g in groups.values())
                      for k in (1, 4, 8, 16) if k <= samples},
    }


def check(figures: dict[str, Any], bands: Bands = Bands()) -> list[str]:
    """What is out of band, in words (empty: calibrated). Bounds are inclusive."""
    problems = []
    for name in ("mean_reward", "success_rate"):
        low, high = getattr(bands, name)
        if not low <= figures[name] <= high:
            direction = "too easy" if figures[name] > high else "too hard"
            problems.append(f"{name} {figures[name]:.3f} outside [{low}, {high}] ({direction})")
    if figures["reward_std"] < bands.min_reward_std:
        problems.append(f"reward_std {figures['reward_std']:.3f} below {bands.min_reward_std} (no signal to learn from)")
    for name, limit, meaning in (("all_success_groups", bands.max_all_success_groups, "too easy"),
                                 ("all_zero_groups", bands.max_all_zero_groups, "too hard"),
                                 ("constant_groups", bands.max_constant_groups, "no group variance")):
        if figures[name] > limit:
            problems.append(f"{name} {figures[name]:.3f} above {limit} ({meaning})")
    return problems


def groups_of(records: list[dict[str, Any]]) -> dict[Any, list[float]]:
    """The rewards of trajectory records grouped by (env id, seed): one GRPO group per seed."""
    groups: dict[Any, list[float]] = defaultdict(list)
    for r in records:
        groups[(r["env_id"], r["seed"])].append(float(r["reward"]))
    return dict(groups)


def calibrate(records: list[dict[str, Any]], bands: Bands = Bands()) -> dict[str, Any]:
    """The calibration of a rollout's records: its figures (`measure`), the bands, whether
    every figure is in band, and the problems when not."""
    figures = measure(groups_of(records))
    problems = check(figures, bands)
    return {**figures, "bands": asdict(bands), "calibrated": not problems, "problems": problems}
