"""What this machine gives a local model: the cores the process may use, and whether the CPU
computes bf16 natively.

On a CPU with avx512_bf16 or AMX, bf16 matmuls run at about twice fp32's speed and halve
the memory every decode step reads; without them bf16 is emulated and slower than fp32. So
`dtype="auto"` means bf16 there and fp32 elsewhere, and `threads=None` means every core the
process may use (its affinity mask, not the machine's count).
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from functools import cache

from trace_gym.errors import InvalidConfig

DTYPES = ("auto", "float32", "bfloat16")
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
REPORTED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (from /proc/cpuinfo; empty where it cannot be read)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def vector_flags() -> str:
    """The CPU's vector and matrix flags (avx*, amx*) as one line, for benchmarks and logs to
    say which machine measured them ("none seen" where there are none)."""
    return " ".join(sorted(f for f in cpu_flags() if f.startswith(("avx", "amx")))) or "none seen"


def native_bf16() -> bool:
    """True when the CPU computes bf16 natively (avx512_bf16 or AMX)."""
    return any(flag in cpu_flags() for flag in NATIVE_BF16_FLAGS)


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Placement:
    """Where and how a local model runs: recorded in every run's metadata."""

    dtype: str
    threads: int
    native_bf16: bool
    flags: tuple[str, ...]

    def as_dict(self) -> dict:
        """The placement as a JSON object (flags as a list)."""
        return {**asdict(self), "flags": list(self.flags)}

    def describe(self) -> str:
        """One line for people: dtype, threads, why that dtype, and the CPU flags seen."""
        why = "native bf16" if self.native_bf16 else "no native bf16"
        return f"{self.dtype} on {self.threads} thread(s) ({why}; CPU flags: {' '.join(self.flags) or 'none seen'})"


def placement(dtype: str = "auto", threads: int | None = None, owner: str = "local policy") -> Placement:
    """Resolve `dtype` ("auto", "float32", "bfloat16") and `threads` (None: every usable core)."""
    if dtype not in DTYPES:
        raise InvalidConfig(f"{owner}: dtype={dtype!r} is invalid; allowed: {', '.join(DTYPES)}")
    if threads is not None and not (type(threads) is int and threads >= 1):
        raise InvalidConfig(f"{owner}: threads={threads!r} is invalid: must be an integer >= 1 (or None: every core)")
    native = native_bf16()
    resolved = ("bfloat16" if native else "float32") if dtype == "auto" else dtype
    flags = tuple(f for f in REPORTED_FLAGS if f in cpu_flags())
    return Placement(resolved, threads or usable_cores(), native, flags)
