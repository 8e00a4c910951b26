"""The whole loop: `trace-gym pipeline` runs TRACE's four steps on one run directory and
writes its report (`trace_gym.pipeline.run`)."""
