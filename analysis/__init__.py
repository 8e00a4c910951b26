"""Step 1 of TRACE: contrastive capability analysis of passed and failed trajectories.

`analyze(trajectory_files, out, AnalysisConfig())` labels, aggregates over runs and selects
the lacking capabilities (`selected_capabilities.json`, its chart and report)."""

from trace_gym.analysis.pipeline import AnalysisConfig, analyze

__all__ = ["AnalysisConfig", "analyze"]
