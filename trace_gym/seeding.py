"""Seed splits shared by every env: one definition, disjoint ranges.

`--seeds A:B` on the command line indexes into a split: seed = split.start + index.
Evaluation seeds (test) never appear in SFT, training or gate data.
"""

from __future__ import annotations

from trace_gym.errors import InvalidConfig

SPLITS: dict[str, range] = {
    "train": range(0, 1_000_000_000),
    "test": range(1_000_000_000, 1_000_100_000),
}


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
