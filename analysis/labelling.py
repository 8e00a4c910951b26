"""Labelling: N isolated runs (each a fresh conversation) label every (trajectory,
capability) pair NA / PRESENT / LACKING, as six disjoint id lists per capability, batched
over trajectories to fit the context (prompts/capability_labeling.md). Each run is saved as
it completes, so an interrupted analysis resumes without asking again for finished work.

The runs are independent samples, so that "passes in K of N runs" measures agreement: each
run shows the trajectories and the capabilities in its own shuffled order (so it batches
them differently too) and samples at the analysis's labelling temperature (0.7 by default;
at temperature 0 with one order the N runs are near-copies). Each run's order comes from
`run_seed(seed, run)`, and the seed, the temperature and the orders are saved with its
labels."""

from __future__ import annotations

import hashlib
import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trace_gym.analysis.discovery import render
from trace_gym.analysis.llm import Analyst
from trace_gym.analysis.trajectories import batches
from trace_gym.jsondata import write_json_atomic
from trace_gym.trajectory import SummaryLimits, summarize

LISTS = ("na_passed", "na_failed", "present_passed", "present_failed", "lacking_passed", "lacking_failed")
LABEL_OF = {"na": "NA", "present": "PRESENT", "lacking": "LACKING"}


def schema(names: list[str]) -> dict[str, Any]:
    """The JSON schema of one labelling answer: for each named capability, the six id lists (`LISTS`)."""
    lists = {"type": "object", "required": list(LISTS),
             "properties": {k: {"type": "array", "items": {"type": "string"}} for k in LISTS}}
    return {"type": "object", "required": ["labels"], "properties": {"labels": {
        "type": "object", "required": names, "properties": {n: lists for n in names}}}}


def check_lists(value: dict[str, Any], names: list[str], records: list[dict[str, Any]]) -> str | None:
    """Each trajectory exactly once per capability, in a list matching its outcome."""
    outcome = {r["id"]: r["passed"] for r in records}
    for name in names:
        lists = value["labels"][name]
        seen: dict[str, str] = {}
        for key in LISTS:
            for tid in lists[key]:
                if tid not in outcome:
                    return f"{name}: unknown conversation id {tid!r} in {key}"
                if tid in seen:
                    return f"{name}: {tid} is in both {seen[tid]} and {key}"
                if outcome[tid] != key.endswith("_passed"):
                    return f"{name}: {tid} {'passed' if outcome[tid] else 'failed'}, so it cannot be in {key}"
                seen[tid] = key
        missing = [t for t in outcome if t not in seen]
        if missing:
            return f"{name}: conversations {missing[:10]} are in no list (every id exactly once)"
    return None


def run_seed(seed: int, run: int) -> int:
    """The seed of one run's order and sampling, from the analysis seed (sha256: runs of
    nearby seeds share nothing)."""
    return int(hashlib.sha256(f"trace-gym labelling {seed} {run}".encode()).hexdigest()[:8], 16)


def run_order(records: list[dict[str, Any]], capabilities: list[dict[str, Any]],
              seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The run's own order of trajectories and of capabilities."""
    rng = random.Random(seed)
    records, capabilities = list(records), list(capabilities)
    rng.shuffle(records)
    rng.shuffle(capabilities)
    return records, capabilities


def label_run(analyst: Analyst, capabilities: list[dict[str, Any]], records: list[dict[str, Any]],
              budget_chars: int = 60_000, limits: SummaryLimits = SummaryLimits(),
              run: int = 0, seed: int | None = None) -> dict[str, dict[str, str]]:
    """One isolated run: capability -> (trajectory id -> label). With `seed`, the
    trajectories and capabilities are shown in the order `run_order` gives."""
    if seed is not None:
        records, capabilities = run_order(records, capabilities, seed)
    names = [c["name"] for c in capabilities]
    labels: dict[str, dict[str, str]] = {n: {} for n in names}
    for group in batches(records, budget_chars, limits):
        prompt = render("capability_labeling.md", capabilities=capabilities,
                        summaries=[summarize(r, limits) for r in group], ids=[r["id"] for r in group])
        # The run index makes each run its own conversation (and its own cache entries).
        messages = [{"role": "system", "content": f"Labelling run {run + 1}."}, {"role": "user", "content": prompt}]
        value = analyst.ask_json(messages, schema(names), lambda v: check_lists(v, names, group), what="labelling")
        for name in names:
            for key in LISTS:
                for tid in value["labels"][name][key]:
                    labels[name][tid] = LABEL_OF[key.split("_")[0]]
    return labels


def label_runs(analyst_factory, capabilities: list[dict[str, Any]], records: list[dict[str, Any]],
               runs: int, out_dir: Path, workers: int = 4, seed: int = 0, settings: dict[str, Any] | None = None,
               **kwargs: Any) -> list[dict[str, dict[str, str]]]:
    """`runs` independent runs in parallel; `analyst_factory(run_seed)` gives each its own
    analyst. Each is saved to out_dir/labels/run_<i>.json (labels, seed, order and the
    settings) when it completes, and read back instead of asked again on a rerun with the
    same inputs and settings."""
    directory = Path(out_dir) / "labels"
    directory.mkdir(parents=True, exist_ok=True)
    key = {"capabilities": [c["name"] for c in capabilities], "trajectories": sorted(r["id"] for r in records),
           "seed": seed, **(settings or {})}

    def one(i: int) -> dict[str, dict[str, str]]:
        path = directory / f"run_{i:02d}.json"
        if path.is_file():
            saved = json.loads(path.read_text())
            if saved.get("key") == key:
                return saved["labels"]
        own = run_seed(seed, i)
        labels = label_run(analyst_factory(own), capabilities, records, run=i, seed=own, **kwargs)
        ordered, caps = run_order(records, capabilities, own)
        write_json_atomic(path, {"key": key, "run": i, "run_seed": own,
                                 "order": {"trajectories": [r["id"] for r in ordered],
                                           "capabilities": [c["name"] for c in caps]},
                                 "labels": labels})
        return labels

    with ThreadPoolExecutor(max(1, workers)) as pool:
        return list(pool.map(one, range(runs)))
