"""The rates this machine has measured: what `trace-gym pipeline --dry-run` estimates from.

Every rollout of a model policy (`trace_gym.rollout.rollout`: eval, calibration, the
pipeline's stages) and every training iteration adds what it measured to `rates.json` in
trace-gym's cache: episodes played and the seconds they took, by machine, by what played them
(the policy's engine and precision, greedy or sampled) and by env; and the seconds of the
trainer's updates per episode. A rate is the sum of episodes over the sum of seconds, so
short runs weigh little. An estimate for an env never measured on this machine falls back on
the other envs of its family (targets, capability envs), and says so.

The file is advisory: a malformed or unreadable one is ignored (and rewritten on the next
record), never an error, since no result depends on it.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym.coding import DOMAIN as CODING
from trace_gym.worlds import DOMAINS

TARGETS = (*(d.target_env_id for d in DOMAINS.values()), CODING.target_env_id)
"""The built-in targets (one per domain record, the coding domain's included): the family an
unmeasured target's estimate falls back on."""
MIN_EPISODES = 4
"""A run of fewer episodes is not recorded: its rate is mostly start-up."""


def rates_path() -> Path:
    """Where the rates are kept: `rates.json` in trace-gym's cache."""
    from trace_gym.baseagent.weights import cache_home

    return cache_home() / "rates.json"


def machine() -> str:
    """This machine, as far as speed goes: its CPU model, vector flags and usable cores."""
    from trace_gym.agents.hardware import usable_cores, vector_flags

    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model} | {vector_flags()} | {usable_cores()} cores"


def player(policy: dict[str, Any]) -> str | None:
    """What played, from a policy's fingerprint: a model's engine, precision and sampling
    ("local openvino float32 sampled"); None for a policy that is not a model (the oracle's
    rate says nothing about a model's)."""
    if policy.get("name") != "local":
        return None
    sampling = "greedy" if not policy.get("temperature") else "sampled"
    return " ".join(str(p) for p in ("local", policy.get("engine") or "torch", policy.get("dtype") or "auto",
                                     sampling))


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _table(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def record(what: str, env_id: str, episodes: int, seconds: float) -> None:
    """Add `episodes` played (or updated on) in `seconds` under `what` for `env_id`, on this
    machine. Runs of fewer than `MIN_EPISODES` and failures to write are ignored."""
    if episodes < MIN_EPISODES or not seconds > 0:
        return
    path = rates_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path.with_suffix(".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # two runs recording at once: neither sum lost
            data, here = _read(path), machine()
            mine = _table(data.get(here))
            work = _table(mine.get(what))
            entry = _table(work.get(env_id))
            try:
                before = int(entry.get("episodes", 0)), float(entry.get("seconds", 0.0))
            except (TypeError, ValueError):  # a malformed entry starts over
                before = 0, 0.0
            work[env_id] = {"episodes": before[0] + int(episodes), "seconds": round(before[1] + float(seconds), 3)}
            mine[what], data[here] = work, mine
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            tmp.replace(path)
    except OSError:
        return


@dataclass(frozen=True)
class Rate:
    """Episodes a minute, and what it was measured on."""

    per_minute: float
    episodes: int
    measured_on: str
    """The env it was measured on, or "other targets" / "other capability envs"."""


def rate(what: str, env_id: str) -> Rate | None:
    """This machine's measured rate for `what` on `env_id` (else on its family), or None."""
    mine = _read(rates_path()).get(machine(), {})
    measured = mine.get(what, {}) if isinstance(mine, dict) else {}
    if not isinstance(measured, dict):
        return None

    def total(envs: list[str], label: str) -> Rate | None:
        entries = [measured[e] for e in envs if isinstance(measured.get(e), dict)]
        try:
            episodes = sum(int(e["episodes"]) for e in entries)
            seconds = sum(float(e["seconds"]) for e in entries)
        except (KeyError, TypeError, ValueError):
            return None
        return Rate(episodes / seconds * 60, episodes, label) if episodes and seconds > 0 else None

    family = [e for e in measured if (e in TARGETS) == (env_id in TARGETS) and e != env_id]
    return total([env_id], env_id) or total(family, "other targets" if env_id in TARGETS
                                            else "other capability envs")
