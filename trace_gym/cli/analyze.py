"""`trace-gym analyze`, step 1: the capabilities the agent lacks, from its trajectories."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from trace_gym.cli.flags import add_config_flags, config_values

NAME = "analyze"
HELP = "step 1: select the capabilities the agent lacks"
THRESHOLDS = ("rho", "delta", "k")
"""The selection thresholds of `Params` that are flags (its `n` is --runs)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags: `AnalysisConfig`'s and the thresholds of its `Params`."""
    from trace_gym.analysis import AnalysisConfig
    from trace_gym.analysis.aggregate import Params

    p.add_argument("runs_files", nargs="+", metavar="RUNS", help="trajectory .jsonl files or tau2 results")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--json", action="store_true", help="print the selection as JSON")
    add_config_flags(p.add_argument_group("analysis"), AnalysisConfig, skip=("params",))
    selection = Params()
    add_config_flags(p.add_argument_group("selection"), Params, only=THRESHOLDS,
                     defaults={"k": f"{selection.k} of {selection.n}, the same share of another --runs, rounded up"})


def run(args: argparse.Namespace) -> int:
    """Label, aggregate, select; print the table and where the files are."""
    from trace_gym.analysis import AnalysisConfig, analyze
    from trace_gym.analysis.aggregate import Params, default_k
    from trace_gym.analysis.report import table

    values = config_values(args, AnalysisConfig, skip=("params",))
    runs = values.get("runs", AnalysisConfig.runs)
    thresholds = config_values(args, Params, only=THRESHOLDS)
    thresholds.setdefault("k", default_k(runs) if isinstance(runs, int) else Params.k)
    config = AnalysisConfig(**values, params=Params(**thresholds, n=runs))
    if Path(args.out).exists() and not Path(args.out).is_dir():
        from trace_gym.errors import InvalidConfig

        raise InvalidConfig(f"--out {args.out} is a file; give the folder to write the analysis into")
    data = analyze(args.runs_files, args.out, config)
    if args.json:
        print(json.dumps(data))
    else:
        table(data)
        chart = Path(args.out) / "capabilities.png"
        print(f"written: {Path(args.out) / 'selected_capabilities.json'}" + (f", {chart}" if chart.is_file() else ""))
    return 0
