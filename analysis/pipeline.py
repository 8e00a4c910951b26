"""Step 1 end to end: trajectories in, selected_capabilities.json (and a report) out."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.analysis import aggregate as agg
from trace_gym.analysis import programmatic, report
from trace_gym.analysis.trajectories import load_records
from trace_gym.jsondata import sha256_json
from trace_gym.trajectory import SummaryLimits


@dataclass(frozen=True)
class AnalysisConfig:
    labeller: str = "programmatic"
    """'programmatic' (trace-gym target trajectories, no LLM) or 'llm'."""
    runs: int = 10
    """Labelling runs N."""
    params: agg.Params = agg.Params()
    base_url: str | None = None
    model: str | None = None
    api_key: str | None = None
    max_requests: int | None = None
    """Cap on LLM requests (a rerun continues from the cache)."""
    budget_chars: int = 60_000
    """Characters of trajectory summaries per request."""
    workers: int = 4
    """Labelling runs in parallel."""


def make_analyst_factory(config: AnalysisConfig, out_dir: Path):
    import os

    from openai import OpenAI

    from trace_gym.agents.endpoint import resolve_base_url
    from trace_gym.analysis.llm import Analyst

    url = resolve_base_url(config.base_url)
    model = config.model or os.environ.get("TRACE_GYM_MODEL") or "default"
    key = config.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY"
    shared: dict[str, Any] = {"requests": 0}

    def factory() -> Analyst:
        analyst = Analyst(OpenAI(base_url=url, api_key=key, max_retries=3, timeout=300), model,
                          cache_dir=Path(out_dir) / "llm_cache", max_requests=config.max_requests)
        shared.setdefault("analysts", []).append(analyst)
        return analyst

    return factory, shared


def analyze(inputs: list[str | Path], out_dir: str | Path, config: AnalysisConfig = AnalysisConfig(),
            log=print) -> dict[str, Any]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    records = load_records(list(inputs))
    passed = {r["id"]: bool(r["passed"]) for r in records}
    log(f"{len(records)} trajectories: {sum(passed.values())} passed, {len(records) - sum(passed.values())} failed")
    if config.labeller == "programmatic":
        definitions = dict(cap.DESCRIPTIONS)
        runs = [programmatic.label_all(records, list(cap.ALL)) for _ in range(config.runs)]
        usage = None
    elif config.labeller == "llm":
        from trace_gym.analysis.discovery import discover
        from trace_gym.analysis.labelling import label_runs

        factory, shared = make_analyst_factory(config, out_dir)
        discovered_path = out_dir / "discovered_capabilities.json"
        if discovered_path.is_file():
            capabilities = json.loads(discovered_path.read_text())["capabilities"]
        else:
            capabilities = discover(factory(), records, budget_chars=config.budget_chars)
            from trace_gym.audit.lock import write_json_atomic

            write_json_atomic(discovered_path, {"capabilities": capabilities})
        log(f"discovered: {', '.join(c['name'] for c in capabilities)}")
        definitions = {c["name"]: c["definition"] for c in capabilities}
        runs = label_runs(factory, capabilities, records, config.runs, out_dir, workers=config.workers,
                          budget_chars=config.budget_chars, limits=SummaryLimits())
        usage = {k: sum(a.usage[k] for a in shared.get("analysts", [])) for k in ("prompt_tokens", "completion_tokens")}
        usage["requests"] = sum(a.requests for a in shared.get("analysts", []))
    else:
        from trace_gym.errors import InvalidConfig

        raise InvalidConfig(f"labeller={config.labeller!r}; allowed: programmatic, llm")
    params = agg.Params(rho=config.params.rho, delta=config.params.delta, k=config.params.k, n=config.runs)
    summaries = agg.aggregate(runs, passed, params)
    data = report.selection(summaries, definitions, records, runs, params, sha256_json(sorted(passed.items())))
    if usage is not None:  # kept apart: a resumed run asks less but must select the same
        from trace_gym.audit.lock import write_json_atomic

        write_json_atomic(out_dir / "llm_usage.json", usage)
        log(f"LLM usage: {usage['requests']} requests, {usage['prompt_tokens']} prompt and "
            f"{usage['completion_tokens']} completion tokens")
    report.write(out_dir, data)
    report.chart(out_dir, data)
    return data
