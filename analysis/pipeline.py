"""Step 1 end to end: trajectories in, selected_capabilities.json (and a report) out."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.analysis import aggregate as agg
from trace_gym.analysis import programmatic, report
from trace_gym.analysis.trajectories import load_records
from trace_gym.jsondata import sha256_json
from trace_gym.trajectory import SummaryLimits

logger = logging.getLogger(__name__)


LABELLERS = ("programmatic", "llm")
"""Who labels the trajectories: rules over trace-gym target trajectories, or an LLM analyst."""


@dataclass(frozen=True)
class AnalysisConfig:
    """How step 1 runs: which labeller, how many runs, the selection thresholds and, for the LLM
    labeller, its endpoint, model and limits. Every field is checked at construction."""

    labeller: str = "programmatic"
    """'programmatic' (trace-gym target trajectories, no LLM) or 'llm'."""
    runs: int = 10
    """Labelling runs N."""
    params: agg.Params = agg.Params()
    """The selection thresholds (rho, Delta, K of N)."""
    base_url: str | None = None
    """The analyst's endpoint (None: $OPENAI_BASE_URL, or the first of $VLLM_BASE_URLS)."""
    model: str | None = None
    """The analyst's model name (None: $TRACE_GYM_MODEL)."""
    api_key: str | None = None
    """The endpoint's key (None: $OPENAI_API_KEY, else EMPTY)."""
    max_requests: int | None = None
    """Cap on LLM requests (a rerun continues from the cache)."""
    budget_chars: int = 60_000
    """Characters of trajectory summaries per request."""
    workers: int = 4
    """Labelling runs in parallel."""
    labelling_temperature: float = 0.7
    """Sampling temperature of each labelling run: the runs are independent samples (at 0,
    in one order, they are near-copies and K of N measures little)."""
    discovery_temperature: float = 0.0
    """Sampling temperature of the discovery pass."""
    seed: int = 0
    """Seed of each labelling run's order of trajectories and capabilities (recorded)."""

    def __post_init__(self) -> None:
        from trace_gym.validation import require

        for name in ("labelling_temperature", "discovery_temperature"):
            value = getattr(self, name)
            require(self, name, isinstance(value, (int, float)) and 0 <= value <= 2, "must be a number in [0, 2]")
        require(self, "seed", type(self.seed) is int and self.seed >= 0, "must be an integer >= 0")
        require(self, "labeller", self.labeller in LABELLERS, f"allowed: {', '.join(LABELLERS)}")
        for name in ("workers", "budget_chars"):
            value = getattr(self, name)
            require(self, name, type(value) is int and value >= 1, "must be an integer >= 1")
        require(self, "max_requests", self.max_requests is None or (type(self.max_requests) is int
                                                                     and self.max_requests >= 1),
                "must be None or an integer >= 1")
        require(self, "runs", self.runs == self.params.n, f"must equal params.n={self.params.n} (K of N runs)")


def make_analyst_factory(config: AnalysisConfig, out_dir: Path):
    """A factory of `Analyst`s on the configured endpoint (one cache, one request budget), and a
    dict of what they share (the model, the analysts made)."""
    import os

    from openai import OpenAI

    from trace_gym.agents.endpoint import resolve_base_url
    from trace_gym.analysis.llm import Analyst

    url = resolve_base_url(config.base_url)
    model = config.model or os.environ.get("TRACE_GYM_MODEL") or "default"
    key = config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    shared: dict[str, Any] = {"requests": 0}

    def factory(temperature: float = 0.0, seed: int | None = None) -> Analyst:
        analyst = Analyst(OpenAI(base_url=url, api_key=key, max_retries=3, timeout=300), model,
                          cache_dir=Path(out_dir) / "llm_cache", max_requests=config.max_requests,
                          temperature=temperature, seed=seed)
        shared.setdefault("analysts", []).append(analyst)
        return analyst

    shared["model"] = model

    return factory, shared


def analyze(inputs: list[str | Path], out_dir: str | Path, config: AnalysisConfig = AnalysisConfig()) -> dict[str, Any]:
    """Step 1 end to end: load the trajectories, label them (programmatically or with an LLM),
    aggregate the runs, and write selected_capabilities.json, its table and chart to `out_dir`;
    returns the selection."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = load_records(list(inputs))
    passed = {r["id"]: bool(r["passed"]) for r in records}
    logger.info(f"{len(records)} trajectories: {sum(passed.values())} passed, "
                f"{len(records) - sum(passed.values())} failed")
    labelling = None
    if config.labeller == "programmatic":
        # Only the capabilities some record's task can need: customer-service runs are not
        # reported on the coding capabilities (all NA), nor SWE-bench runs on the others.
        known = [c for c in cap.ALL if any(c in (r.get("capabilities_needed") or ()) for r in records)]
        definitions = {c: cap.DESCRIPTIONS[c] for c in known or cap.ALL}
        runs = [programmatic.label_all(records, list(definitions)) for _ in range(config.runs)]
        usage = None
    elif config.labeller == "llm":
        from trace_gym.analysis.labelling import label_runs, run_seed

        factory, shared = make_analyst_factory(config, out_dir)
        capabilities = _discovered(factory, shared["model"], records, config, out_dir)
        logger.info(f"discovered: {', '.join(c['name'] for c in capabilities)}")
        definitions = {c["name"]: c["definition"] for c in capabilities}
        labelling = {"temperature": config.labelling_temperature, "seed": config.seed, "model": shared["model"]}
        runs = label_runs(lambda seed: factory(config.labelling_temperature, seed), capabilities, records,
                          config.runs, out_dir, workers=config.workers, seed=config.seed,
                          settings={"temperature": config.labelling_temperature, "model": shared["model"]},
                          budget_chars=config.budget_chars, limits=SummaryLimits())
        usage = {k: sum(a.usage[k] for a in shared.get("analysts", [])) for k in ("prompt_tokens", "completion_tokens")}
        usage["requests"] = sum(a.requests for a in shared.get("analysts", []))
    else:
        from trace_gym.errors import InvalidConfig

        raise InvalidConfig(f"labeller={config.labeller!r}; allowed: programmatic, llm")
    params = config.params
    summaries = agg.aggregate(runs, passed, params)
    data = report.selection(summaries, definitions, records, runs, params, sha256_json(sorted(passed.items())))
    if labelling is not None:
        data["labelling"] = {**labelling, "runs": config.runs,
                             "run_seeds": [run_seed(config.seed, i) for i in range(config.runs)]}
    if usage is not None:  # kept apart: a resumed run asks less but must select the same
        from trace_gym.audit.lock import write_json_atomic

        write_json_atomic(out_dir / "llm_usage.json", usage)
        logger.info(f"LLM usage: {usage['requests']} requests, {usage['prompt_tokens']} prompt and "
                    f"{usage['completion_tokens']} completion tokens")
    report.write(out_dir, data)
    report.chart(out_dir, data)
    return data


def _discovered(factory, model: str, records: list[dict[str, Any]], config: AnalysisConfig,
                out_dir: Path) -> list[dict[str, Any]]:
    """The discovery pass, read back from discovered_capabilities.json only when it was made
    from the same inputs: the trajectories (ids, outcomes, summaries), the model, the
    settings and the prompt."""
    from trace_gym.analysis.discovery import discover
    from trace_gym.jsondata import write_json_atomic
    from trace_gym.resources import read_prompt
    from trace_gym.trajectory import summarize

    key = sha256_json({"trajectories": sorted((r["id"], bool(r["passed"]), sha256_json(summarize(r))) for r in records),
                       "model": model, "temperature": config.discovery_temperature,
                       "budget_chars": config.budget_chars, "prompt": read_prompt("capability_discovery.md")})
    path = Path(out_dir) / "discovered_capabilities.json"
    if path.is_file():
        saved = json.loads(path.read_text())
        if saved.get("key") == key:
            return saved["capabilities"]
        logger.info(f"{path.name} was made from other inputs; discovering again")
    capabilities = discover(factory(config.discovery_temperature), records, budget_chars=config.budget_chars)
    write_json_atomic(path, {"key": key, "capabilities": capabilities})
    return capabilities
