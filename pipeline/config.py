"""The pipeline's configuration: one TOML file (the shipped `embedded` one by default), one
table per stage, and budgets that override those tables.

    [rollout]
    episodes = 32            # train seeds per target
    [budgets.smoke.rollout]
    episodes = 4             # what --budget smoke plays instead

The tables are those of the stages (`trace_gym.pipeline.stages.STAGES`, each stage's
`StageTable`: its keys, defaults and their docstrings), besides the run's own: `[pipeline]`
(domain, targets, seed), `[train]` (a `GRPOConfig` table, also read by `trace-gym train`),
`[env_knobs."ENV"]` (the `gym.make` knobs of an env) and `[budgets.NAME]`. Every key is
checked against its table's (an unknown one is refused, naming the file, the table and the
key).

`[pipeline] domain` picks the domain (`trace_gym.pipeline.domains`): its targets, unless
`targets` names them, and the capabilities the analysis may select and their shipped envs.
The coding domain's base agent is a model that can code, given as is (`[base_agent] model`,
its episodes served by vLLM or another OpenAI-compatible endpoint: `base_url`,
`served_model`; the shipped `coding` configuration), or the committed fixture for plumbing
runs (`fixture = true`, the smoke budget): the `[base_agent]` recipe builds the embedded
SmolLM2-135M customer-service agent, which the coding domain refuses.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from trace_gym.errors import InvalidConfig
from trace_gym.pipeline import stages as stage_list
from trace_gym.pipeline.contract import RunConfig, Stage, StageTable, table_types
from trace_gym.pipeline.domains import DEFAULT_DOMAIN, DOMAIN_NAMES, PIPELINE_DOMAINS, default_config
from trace_gym.pipeline.stages.base_agent import check as check_agent

BUDGETS = ("smoke", "default")
RUN_TABLES: dict[str, dict[str, Any]] = {
    "pipeline": {"domain": DEFAULT_DOMAIN, "targets": list(PIPELINE_DOMAINS[DEFAULT_DOMAIN].targets), "seed": 0},
    "train": {},
    "env_knobs": {},
    "budgets": {},
}
"""The run's own tables (not a stage's), with their keys and defaults ({}: checked elsewhere)."""


def stage_tables(stages: list[Stage[Any, Any]] | None = None) -> dict[str, type[StageTable]]:
    """Table name -> its `StageTable`, for `stages` (default: `STAGES`, as it is now)."""
    return {t.TABLE: t for t in table_types(stage_list.STAGES if stages is None else stages)}


def tables(stages: list[Stage[Any, Any]] | None = None) -> dict[str, dict[str, Any]]:
    """Table -> key -> default: every table a run configuration may hold."""
    return {"pipeline": RUN_TABLES["pipeline"], **{name: t.defaults() for name, t in stage_tables(stages).items()},
            **{name: RUN_TABLES[name] for name in ("train", "env_knobs", "budgets")}}


TABLES = tables()
"""Every table a run configuration may hold, with its keys and defaults (derived from the
stages)."""
SECTIONS = tuple(TABLES)
"""The tables' names."""


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def check_tables(data: dict[str, Any], path: Path | str, stages: list[Stage[Any, Any]] | None = None) -> None:
    """Refuse a table no stage (nor the run) has, naming the file and the allowed ones."""
    allowed = tables(stages)
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise InvalidConfig(f"{path}: unknown table(s) {unknown}; allowed: {', '.join(allowed)}")


def load(path: str | Path | None = None, budget: str = "default", overrides: dict[str, Any] | None = None,
         domain: str | None = None, stages: list[Stage[Any, Any]] | None = None) -> RunConfig:
    """The configuration with the budget's overrides applied (then `overrides`, table by
    table, then `domain` over `[pipeline] domain`: `--domain`) and every default filled in;
    without `path`, the domain's shipped configuration (`default_config`)."""
    from trace_gym import runconfig
    from trace_gym.resources import config_path

    if budget not in BUDGETS:
        raise InvalidConfig(f"--budget {budget!r} is not known; allowed: {', '.join(BUDGETS)}")
    if domain is not None and domain not in PIPELINE_DOMAINS:
        raise InvalidConfig(f"--domain {domain!r} is not known; allowed: {', '.join(DOMAIN_NAMES)}")
    path = path or default_config(domain)
    data = runconfig.load(path)  # refused with where and why: missing, not TOML, a bad env_knobs table
    path = config_path(path)
    check_tables(data, path, stages)
    budgets = data.get("budgets", {})
    if budget != "default" or "default" in budgets:
        data = _merge(data, budgets.get(budget, {}))
    data = _merge(data, overrides or {})
    if domain is not None:
        data = _merge(data, {"pipeline": {"domain": domain}})
    check_tables(data, path, stages)
    for table in ("pipeline", "train"):
        if not isinstance(data.get(table, {}), dict):
            raise InvalidConfig(f"{path}: [{table}] must be a table")
    given = data.get("pipeline", {})
    bad = sorted(set(given) - set(RUN_TABLES["pipeline"]))
    if bad:
        raise InvalidConfig(f"{path}: [pipeline] has unknown key(s) {bad}; allowed: {', '.join(RUN_TABLES['pipeline'])}")
    run = {**RUN_TABLES["pipeline"], **given}
    name = run["domain"]
    if name not in PIPELINE_DOMAINS:
        raise InvalidConfig(f"{path}: [pipeline] domain={name!r}; allowed: {', '.join(DOMAIN_NAMES)}")
    targets = list(given.get("targets", PIPELINE_DOMAINS[name].targets))
    foreign = [t for t in targets if t not in PIPELINE_DOMAINS[name].targets
               and any(t in d.targets for d in PIPELINE_DOMAINS.values())]
    if foreign:
        raise InvalidConfig(f"{path}: [pipeline] targets {foreign} are not targets of domain {name!r} (its targets: "
                            f"{', '.join(PIPELINE_DOMAINS[name].targets)}); name this domain's targets, or leave "
                            "targets out")
    typed = {table: cls.from_table(data.get(table, {}), where=str(path)) for table, cls in stage_tables(stages).items()}
    env_knobs = {env_id: dict(knobs) for env_id, knobs in data.get("env_knobs", {}).items()}
    config = RunConfig(source=str(path), budget=budget, domain=name, targets=tuple(targets), seed=run["seed"],
                       tables=typed, train=dict(data.get("train", {})), env_knobs=env_knobs)
    check_agent(config)
    from trace_gym.trainer.config import GRPOConfig

    GRPOConfig.from_dict(config.train, where=f"{path} [train]")  # refused here, not hours later
    return config

