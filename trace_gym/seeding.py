"""Seed splits shared by every env: one definition, disjoint ranges.

`--seeds A:B` on the command line indexes into a split: seed = split.start + index.
Evaluation seeds (test) never appear in SFT, training or gate data.

Within the train split, each use that draws its own seeds has a band of them, declared here
and nowhere else (`BANDS`; a test holds them disjoint). GRPO draws from the whole train split
but its validation slice, so its seeds may meet a band's: what a band keeps apart is one
stage's data from another's (the analysis rollouts from the calibration's, say), not from
training.
"""

from __future__ import annotations

from trace_gym.errors import InvalidConfig

SPLITS: dict[str, range] = {
    "train": range(0, 1_000_000_000),
    "test": range(1_000_000_000, 1_000_100_000),
}


DEMONSTRATION_BLOCK = 10_000_000
"""Base-agent demonstrations: source env number b (1, 2, ...) of a build seed s draws train
seeds from b * DEMONSTRATION_BLOCK + s * 100_000 on (the `demonstrations` band)."""


def demonstration_seed(env_number: int, build_seed: int) -> int:
    """The first demonstration seed of source env `env_number` (1, 2, ...) for a build seed."""
    return SPLITS["train"].start + DEMONSTRATION_BLOCK * env_number + 100_000 * build_seed


BANDS: dict[str, range] = {
    "demonstrations": range(DEMONSTRATION_BLOCK, 20 * DEMONSTRATION_BLOCK),
    "analysis_rollouts": range(200_000_000, 200_100_000),
    "calibration": range(200_100_000, 200_200_000),
    "gate_oracle": range(200_300_000, 200_400_000),
    "gepa_train": range(200_600_000, 200_700_000),
    "gepa_val": range(200_700_000, 200_800_000),
    "gate_data": range(500_000_000, 500_100_000),
    "validation": range(SPLITS["train"].stop - 100_000, SPLITS["train"].stop),
}
"""Train-seed bands by use: the base agent's demonstrations, the pipeline's analysis
rollouts, its calibration, the oracle's gate data of a plumbing budget, GEPA's train and
validation seeds, the mixture's gate data, and GRPO's validation slice (never drawn for
training)."""


def band(name: str, n: int) -> list[int]:
    """The first `n` seeds of a band; InvalidConfig when it has fewer."""
    if name not in BANDS:
        raise InvalidConfig(f"unknown seed band {name!r}; known: {', '.join(BANDS)}")
    if not 0 <= n <= len(BANDS[name]):
        raise InvalidConfig(f"{n} seeds asked of band {name!r}, which holds {len(BANDS[name]):,}")
    return list(BANDS[name][:n])


def split_range(split: str) -> range:
    """The seeds of a split ("train" or "test"); InvalidConfig for any other name."""
    if split not in SPLITS:
        raise InvalidConfig(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    return SPLITS[split]


def split_of(seed: int) -> str:
    """The split a raw seed falls in ('other' outside every split)."""
    for name, r in SPLITS.items():
        if seed in r:
            return name
    return "other"


def seeds(split: str, start: int, stop: int) -> range:
    """Seeds `start..stop-1` of a split, as `--seeds start:stop` means."""
    r = split_range(split)
    if not 0 <= start <= stop <= len(r):
        raise InvalidConfig(
            f"seed indices {start}:{stop} are outside split {split!r} (0:{len(r)})"
        )
    return r[start:stop]


def parse_seed_range(text: str) -> tuple[int, int]:
    """'A:B' -> (A, B); 'N' -> (N, N + 1)."""
    try:
        if ":" in text:
            a, b = text.split(":", 1)
            start, stop = int(a), int(b)
        else:
            start = int(text)
            stop = start + 1
    except ValueError:
        raise InvalidConfig(f"--seeds must look like A:B or N (integers), got {text!r}") from None
    if start < 0 or stop < start:
        raise InvalidConfig(f"--seeds {text!r}: need 0 <= A <= B")
    return start, stop
