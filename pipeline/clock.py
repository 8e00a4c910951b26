"""The pipeline's progress in time: the stage under way, for how long, and about how long is
left, from the stages' estimates (this machine's measured rates). On a terminal the live
display shows it; elsewhere (a CI log, a file) a line is written every `every` seconds while
a stage runs, besides the line that starts and ends each stage.

The clock only reports: nothing a run computes depends on it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from trace_gym.pipeline.contract import RunConfig, Stage


def estimates(config: RunConfig, stages: list[Stage[Any, Any]]) -> dict[str, float | None]:
    """Seconds each stage should take here (0 for those that play nothing, None where this
    machine has no measured rate), then the report's 0."""
    out: dict[str, float | None] = {}
    for i, stage in enumerate(stages):
        seconds = [step.seconds for step in stage.estimate(config, stages[:i])]
        out[stage.name] = None if None in seconds else float(sum(s for s in seconds if s is not None))
    out["report"] = 0.0
    return out


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


class Clock:
    """Which stage runs since when; `left()` says about how long the run has to go."""

    def __init__(self, estimate: dict[str, float | None], say: Callable[[str], None], every: float = 60.0,
                 ticking: bool = True) -> None:
        self.estimate, self.say, self.every = estimate, say, every
        self.order = list(estimate)
        self.stage: str | None = None
        self.since = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True) if ticking else None

    def __enter__(self) -> Clock:
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def start(self, stage: str) -> None:
        """Note that `stage` starts now."""
        self.stage, self.since = stage, time.monotonic()

    def left(self) -> str:
        """About how long the stages from the current one on still take ("unknown" parts named)."""
        if self.stage is None:
            return ""
        after = self.order[self.order.index(self.stage):]
        known, unknown = 0.0, []
        for stage in after:
            seconds = self.estimate.get(stage)
            if seconds is None:
                unknown.append(stage)
                continue
            known += max(0.0, seconds - (time.monotonic() - self.since)) if stage == self.stage else seconds
        text = f"about {_minutes(known)} left"
        return text + (f" ({', '.join(unknown)} not estimated)" if unknown else "")

    def line(self) -> str:
        """One progress line: the current stage, how long it has run, and about how long is
        left."""
        return f"{self.stage}: running for {_minutes(time.monotonic() - self.since)}, {self.left()}"

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            if self.stage is not None:
                self.say(self.line())
