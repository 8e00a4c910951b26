"""The whole loop: `trace-gym pipeline` runs TRACE's four steps on one run directory and
writes its report (`run_pipeline`, in `trace_gym.pipeline.run`); the stages are
`trace_gym.pipeline.stages.STAGES`."""

from typing import Any

__all__ = ["run_pipeline"]


def __getattr__(name: str) -> Any:
    # `run_pipeline` is imported when first used, so that the pipeline's own modules (the
    # stages, the configuration) import this package without importing the run loop.
    if name == "run_pipeline":
        from trace_gym.pipeline.run import run_pipeline

        return run_pipeline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
