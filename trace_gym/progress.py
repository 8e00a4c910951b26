"""What long work shows while it runs: log lines under the `trace_gym` logger and rich
progress bars, both on stderr (stdout is for results).

The library logs through `logging.getLogger(__name__)` in each module and draws a bar only
where that logger shows INFO: the CLI turns INFO on (`trace_gym.cli.quiet_libraries`); a
program that imports trace-gym sees its progress after `logging.basicConfig(level=logging.INFO)`
and nothing otherwise, as a library should.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # rich loads with the first bar, not with every module that may draw one
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn

__all__ = ["progress_bar", "shows_progress", "stderr_console"]


@functools.cache
def stderr_console() -> Console:
    """The rich console on stderr that the log handler and every bar share (rich draws one
    live display at a time and prints log lines above it only through its own console).
    It writes to `sys.stderr` as it is at each write."""
    from rich.console import Console

    return Console(stderr=True)


def shows_progress(logger: logging.Logger) -> bool:
    """Whether `logger` shows INFO, the level of progress lines and bars."""
    return logger.isEnabledFor(logging.INFO)


def progress_bar(logger: logging.Logger, *columns: str | ProgressColumn, shown: bool = True,
                 **options: Any) -> Progress:
    """A rich progress bar on stderr, drawn only where `logger` shows INFO and `shown` (the
    caller's own condition: a training process that is not the lead, a rollout asked to be
    quiet)."""
    from rich.progress import Progress

    return Progress(*columns, console=stderr_console(), disable=not (shown and shows_progress(logger)), **options)
