"""The pipeline's configuration: one TOML file (the shipped `embedded` one by default), one
table per stage, and budgets that override those tables.

    [rollout]
    episodes = 32            # train seeds per target
    [budgets.smoke.rollout]
    episodes = 4             # what --budget smoke plays instead

Every key is checked against the stage's known keys (an unknown one is refused, naming the
file, the table and the key); `[train]` is a `GRPOConfig` table and `[env_knobs."ENV"]` the
`gym.make` knobs of an env (`trace_gym.runconfig`).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from trace_gym.errors import InvalidConfig
from trace_gym.runconfig import SECTIONS, embedded_knobs
from trace_gym.worlds import DOMAINS

DEFAULT = "embedded"
"""The shipped configuration the pipeline runs without `--config` (package data, so that an
installed wheel has it too)."""
BUDGETS = ("smoke", "default")

def _recipe_defaults() -> dict[str, Any]:
    """The base-agent recipe's fields and defaults (`BaseAgentConfig`; the seed is the pipeline's)."""
    import json
    from dataclasses import asdict

    from trace_gym.baseagent.build import BaseAgentConfig

    recipe = json.loads(json.dumps(asdict(BaseAgentConfig())))  # tuples as lists, as TOML gives them
    recipe.pop("seed")
    return recipe


# table -> key -> default (the keys a table may hold)
TABLES: dict[str, dict[str, Any]] = {
    "pipeline": {"targets": [d.target_env_id for d in DOMAINS.values()], "seed": 0},
    "base_agent": {"fixture": False, **_recipe_defaults()},
    "rollout": {"episodes": 32, "max_new_tokens": 192, "batch": 16},
    "analysis": {"labeller": "programmatic", "runs": 10, "base_url": "", "model": ""},
    "synthesis": {"base_url": "", "model": "", "attempts": 5},
    "calibrate": {"seeds": 8, "samples": 4},
    "train": {},
    "compose": {"episodes": 32, "epochs": 3, "gate_data": "adapters"},
    "eval": {"seeds": 16, "max_new_tokens": 192, "batch": 16},
    "baselines": {"direct_grpo": False, "gepa": False, "gepa_base_url": "", "gepa_model": "",
                  "gepa_max_metric_calls": 300, "gepa_train_seeds": 32, "gepa_val_seeds": 16},
    "env_knobs": {},
    "budgets": {},
}


if set(TABLES) != set(SECTIONS):  # one list of tables for both readers of a run configuration
    raise ImportError("the pipeline's tables differ from trace_gym.runconfig.SECTIONS")


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load(path: str | Path | None = None, budget: str = "default",
         overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The configuration with the budget's overrides applied (then `overrides`, table by
    table) and every default filled in."""
    from trace_gym import runconfig
    from trace_gym.resources import config_path

    if budget not in BUDGETS:
        raise InvalidConfig(f"--budget {budget!r} is not known; allowed: {', '.join(BUDGETS)}")
    data = runconfig.load(path or DEFAULT)  # refused with where and why: missing, not TOML, unknown table
    path = config_path(path or DEFAULT)
    budgets = data.get("budgets", {})
    if budget != "default" or "default" in budgets:
        data = _merge(data, budgets.get(budget, {}))
    data = _merge(data, overrides or {})
    unknown = sorted(set(data) - set(TABLES))
    if unknown:
        raise InvalidConfig(f"{path}: unknown table(s) {unknown}; allowed: {', '.join(TABLES)}")
    out: dict[str, Any] = {"source": str(path), "budget": budget}
    for table, defaults in TABLES.items():
        given = data.get(table, {})
        if not isinstance(given, dict):
            raise InvalidConfig(f"{path}: [{table}] must be a table")
        if defaults and table not in ("env_knobs",):
            bad = sorted(set(given) - set(defaults))
            if bad:
                raise InvalidConfig(f"{path}: [{table}] has unknown key(s) {bad}; allowed: {', '.join(defaults)}")
        out[table] = {**copy.deepcopy(defaults), **given}
    if out["compose"]["gate_data"] not in ("adapters", "oracle"):
        raise InvalidConfig(f"{path}: [compose] gate_data={out['compose']['gate_data']!r}; allowed: adapters, oracle")
    from trace_gym.trainer.config import GRPOConfig

    GRPOConfig.from_dict(out["train"], where=f"{path} [train]")  # refused here, not hours later
    out.pop("budgets")
    return out


def knobs(config: dict[str, Any], env_id: str) -> dict[str, Any]:
    """The env's gym.make knobs: compact prompts (the embedded agent's) unless the file says otherwise."""
    return embedded_knobs(config["env_knobs"].get(env_id))
