"""The pipeline's configuration: one TOML file (the shipped `embedded` one by default), one
table per stage, and budgets that override those tables.

    [rollout]
    episodes = 32            # train seeds per target
    [budgets.smoke.rollout]
    episodes = 4             # what --budget smoke plays instead

Every key is checked against the stage's known keys (an unknown one is refused, naming the
file, the table and the key); `[train]` is a `GRPOConfig` table and `[env_knobs."ENV"]` the
`gym.make` knobs of an env (`trace_gym.runconfig`).

`[pipeline] domain` picks the domain (`DOMAIN_NAMES`): its targets, unless `targets` names
them, and the capabilities the analysis may select and their shipped envs. The coding
domain's base agent is a model that can code, given as is (`[base_agent] model`, its episodes
served by vLLM or another OpenAI-compatible endpoint: `base_url`, `served_model`; the shipped
`coding` configuration), or the committed fixture for plumbing runs (`fixture = true`, the
smoke budget): the `[base_agent]` recipe builds the embedded SmolLM2-135M customer-service
agent, which the coding domain refuses.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.coding import DOMAIN as CODING
from trace_gym.errors import InvalidConfig
from trace_gym.runconfig import SECTIONS, embedded_knobs
from trace_gym.worlds import DOMAINS

DEFAULT = "embedded"
"""The shipped configuration the pipeline runs without `--config` (package data, so that an
installed wheel has it too)."""
BUDGETS = ("smoke", "default")


@dataclass(frozen=True)
class PipelineDomain:
    """What the domain decides in a run: its targets (unless `[pipeline] targets` names them),
    the capabilities the analysis may select and each one's shipped env."""

    name: str
    targets: tuple[str, ...]
    capability_envs: dict[str, str]
    """capability -> the shipped env that trains it."""
    config: str
    """The shipped configuration `--domain NAME` runs without `--config`."""


PIPELINE_DOMAINS: dict[str, PipelineDomain] = {
    "customer_service": PipelineDomain("customer_service", tuple(d.target_env_id for d in DOMAINS.values()),
                                       {c: f"trace/{c}-v0" for c in cap.CUSTOMER_SERVICE}, DEFAULT),
    "coding": PipelineDomain("coding", (CODING.target_env_id,),
                             dict(zip(CODING.capabilities, CODING.capability_env_ids)), "coding"),
}
DOMAIN_NAMES = tuple(PIPELINE_DOMAINS)
"""The values of `[pipeline] domain` (and `--domain`), the default first."""
DEFAULT_DOMAIN = DOMAIN_NAMES[0]
AGENT_KEYS: dict[str, str] = {"model": "", "base_url": "", "served_model": ""}
"""`[base_agent]` keys besides the recipe's and `fixture`: a model directory used as the base
agent as is (no build; what the trainer and the composer load), the OpenAI-compatible
endpoint (vLLM) that serves it to the base agent's own episodes (rollouts, calibration, its
evaluation rows), and the name it is served under (default: `model`, as `vllm serve MODEL`
names it). Not filled in when absent, so a table without them is the recipe's alone."""


def domain_of(config: dict[str, Any]) -> PipelineDomain:
    """The loaded configuration's domain."""
    return PIPELINE_DOMAINS[config["pipeline"]["domain"]]


def default_config(domain: str | None = None) -> str:
    """The shipped configuration a run of `domain` reads without `--config` (the embedded one
    when no domain is named)."""
    return PIPELINE_DOMAINS[domain].config if domain in PIPELINE_DOMAINS else DEFAULT

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
    "pipeline": {"domain": DEFAULT_DOMAIN, "targets": list(PIPELINE_DOMAINS[DEFAULT_DOMAIN].targets), "seed": 0},
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
         overrides: dict[str, Any] | None = None, domain: str | None = None) -> dict[str, Any]:
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
    data = runconfig.load(path)  # refused with where and why: missing, not TOML, unknown table
    path = config_path(path)
    budgets = data.get("budgets", {})
    if budget != "default" or "default" in budgets:
        data = _merge(data, budgets.get(budget, {}))
    data = _merge(data, overrides or {})
    if domain is not None:
        data = _merge(data, {"pipeline": {"domain": domain}})
    unknown = sorted(set(data) - set(TABLES))
    if unknown:
        raise InvalidConfig(f"{path}: unknown table(s) {unknown}; allowed: {', '.join(TABLES)}")
    out: dict[str, Any] = {"source": str(path), "budget": budget}
    for table, defaults in TABLES.items():
        given = data.get(table, {})
        if not isinstance(given, dict):
            raise InvalidConfig(f"{path}: [{table}] must be a table")
        optional = AGENT_KEYS if table == "base_agent" else {}
        if defaults and table not in ("env_knobs",):
            bad = sorted(set(given) - set(defaults) - set(optional))
            if bad:
                raise InvalidConfig(f"{path}: [{table}] has unknown key(s) {bad}; allowed: "
                                    f"{', '.join([*defaults, *optional])}")
        out[table] = {**copy.deepcopy(defaults), **given}
    if out["compose"]["gate_data"] not in ("adapters", "oracle"):
        raise InvalidConfig(f"{path}: [compose] gate_data={out['compose']['gate_data']!r}; allowed: adapters, oracle")
    _check_domain(out, data.get("pipeline", {}), path)
    _check_agent(out, path)
    from trace_gym.trainer.config import GRPOConfig

    GRPOConfig.from_dict(out["train"], where=f"{path} [train]")  # refused here, not hours later
    out.pop("budgets")
    return out


def _check_domain(out: dict[str, Any], given: dict[str, Any], path: Path) -> None:
    """`[pipeline] domain` is known; its targets fill in `targets` when the file names none,
    and a target of another domain is refused."""
    name = out["pipeline"]["domain"]
    if name not in PIPELINE_DOMAINS:
        raise InvalidConfig(f"{path}: [pipeline] domain={name!r}; allowed: {', '.join(DOMAIN_NAMES)}")
    domain = PIPELINE_DOMAINS[name]
    if "targets" not in given:
        out["pipeline"]["targets"] = list(domain.targets)
    foreign = [t for t in out["pipeline"]["targets"]
               if t not in domain.targets and any(t in d.targets for d in PIPELINE_DOMAINS.values())]
    if foreign:
        raise InvalidConfig(f"{path}: [pipeline] targets {foreign} are not targets of domain {name!r} (its targets: "
                            f"{', '.join(domain.targets)}); name this domain's targets, or leave targets out")


def _check_agent(out: dict[str, Any], path: Path) -> None:
    """The `AGENT_KEYS` are strings, an endpoint serves a given model, and the coding domain
    has a base agent that can code (a given model) or the fixture."""
    section = out["base_agent"]
    for key in AGENT_KEYS:
        if not isinstance(section.get(key, ""), str):
            raise InvalidConfig(f"{path}: [base_agent] {key}={section[key]!r} must be a string")
    if section.get("base_url") and not section.get("model"):
        raise InvalidConfig(f"{path}: [base_agent] base_url={section['base_url']!r} needs model: the directory of "
                            "the weights it serves, which the trainer and the composer load")
    if out["pipeline"]["domain"] == "coding" and not section["fixture"] and not section.get("model"):
        raise InvalidConfig(
            f"{path}: [pipeline] domain='coding' needs a base agent that can code: the [base_agent] recipe builds "
            "the embedded SmolLM2-135M customer-service agent. Set [base_agent] model to a model directory and "
            "base_url to the vLLM (or other OpenAI-compatible) endpoint serving it (the shipped 'coding' "
            "configuration does), or fixture = true (--budget smoke) for a plumbing run")


def given_model(config: dict[str, Any]) -> str:
    """The model directory `[base_agent] model` names ("" when the agent is the fixture or
    a build): the fixture, when on, replaces it."""
    section = config["base_agent"]
    return "" if section["fixture"] else section.get("model", "")


def endpoint(config: dict[str, Any]) -> dict[str, str] | None:
    """Where the base agent's own episodes are served (`base_url`, `model` as the server
    names it), or None where they play on a local engine (the fixture, when on, does)."""
    section = config["base_agent"]
    if section["fixture"] or not section.get("base_url"):
        return None
    return {"base_url": section["base_url"], "model": section.get("served_model") or section["model"]}


def recipe_table(config: dict[str, Any]) -> dict[str, Any]:
    """The `[base_agent]` keys that are the build recipe's (`BaseAgentConfig`)."""
    return {k: v for k, v in config["base_agent"].items() if k != "fixture" and k not in AGENT_KEYS}


def knobs(config: dict[str, Any], env_id: str) -> dict[str, Any]:
    """The env's gym.make knobs: compact prompts (the embedded agent's) unless the file says otherwise."""
    return embedded_knobs(config["env_knobs"].get(env_id))
