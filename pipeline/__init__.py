"""The whole loop: `trace-gym pipeline` runs TRACE's four steps on one run directory and
writes its report (`run_pipeline`, in `trace_gym.pipeline.run`)."""

from trace_gym.pipeline.run import run_pipeline

__all__ = ["run_pipeline"]
