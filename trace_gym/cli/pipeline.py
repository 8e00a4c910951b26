"""`trace-gym pipeline`: the whole loop on the embedded default (or `--domain coding`),
resumable stage by stage."""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "pipeline"
HELP = "the whole loop on the embedded default: analysis, envs, adapters, composition, evaluation, report"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    from trace_gym.pipeline.config import BUDGETS, DOMAIN_NAMES

    p.add_argument("--config", help="run configuration: a path, or a shipped one by name (default: embedded; "
                   "with --domain coding, coding)")
    p.add_argument("--domain", choices=DOMAIN_NAMES, help="the domain, over the configuration's [pipeline] domain: its "
                   "targets (unless the configuration names them) and the capabilities the analysis may select. "
                   "coding needs a model that can code, served by vLLM or an endpoint ([base_agent] model, "
                   "base_url: the shipped coding configuration), or --budget smoke (the fixture, plumbing only)")
    p.add_argument("--out", default="runs/pipeline", help="run directory (a rerun reuses every unchanged stage)")
    p.add_argument("--budget", default="default", choices=BUDGETS,
                   help="smoke: every stage with the committed test fixture as the base agent (plumbing only)")
    p.add_argument("--dry-run", action="store_true", help="check the configuration and print each stage's work and "
                   "its estimated time from the rates this machine has measured; loads no model")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    from trace_gym.cli.flags import add_config_flags
    from trace_gym.pipeline.config import stage_tables

    for name, table in stage_tables().items():  # each stage's table, as the configuration's [TABLE] keys
        add_config_flags(p.add_argument_group(f"[{name}] (over the configuration's table)"), table, prefix=name)


def overrides(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """The stage tables' keys the command line set, table by table."""
    from trace_gym.cli.flags import config_values
    from trace_gym.pipeline.config import stage_tables

    out = {name: config_values(args, table, prefix=name) for name, table in stage_tables().items()}
    return {name: values for name, values in out.items() if values}


def run(args: argparse.Namespace) -> int:
    """Run (or plan) the pipeline; print the main table and where the report is."""
    if args.dry_run:
        from trace_gym.pipeline.plan import dry_run

        print(dry_run(args.config, args.budget, domain=args.domain, overrides=overrides(args)))
        return 0
    from trace_gym.pipeline.run import main_table, run_pipeline

    state = run_pipeline(args.config, Path(args.out), args.budget,
                         domain=args.domain, overrides=overrides(args))
    print(main_table(state))
    print(f"report: {state.report['markdown']} and {state.report['html']}")
    return 0
