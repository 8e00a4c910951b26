"""SWE-bench runs as trace-gym trajectory records: one record per run (`record`), the source
files found under the paths given, and `import_runs` / `write_records`, what
`trace-gym import-swebench` calls (see `trace_gym.swebench`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.errors import TraceGymError
from trace_gym.swebench.actions import localized_check, patch_files, reproduced_check
from trace_gym.swebench.report import Outcome, read_dataset, read_report
from trace_gym.swebench.sources import Run, read_openhands, read_swe_agent
from trace_gym.trajectory import SCHEMA_VERSION, passed
from trace_gym.verdict import Check

ENV_ID = "swebench/verified"
DOMAIN = "coding"
TASK_KIND = "swebench"

# -- records -----------------------------------------------------------------------------------------

def record_id(instance_id: str) -> str:
    """The record id of an instance's run: `swebench/verified/<instance_id>/0`."""
    return f"{ENV_ID}/{instance_id}/0"


def _test_checks(tests: dict[str, dict[str, list[str]]] | None) -> list[Check]:
    if not tests:
        return []
    named = [(prefix, test, ok) for group, prefix in (("FAIL_TO_PASS", "f2p"), ("PASS_TO_PASS", "p2p"))
             for key, ok in (("success", True), ("failure", False)) for test in (tests.get(group) or {}).get(key, [])]
    return [Check(f"{prefix}:{test}", ok, 1.0 / len(named) if ok else 0.0, "" if ok else "fails after the patch")
            for prefix, test, ok in named]


def record(run: Run, outcome: Outcome, gold_patch: str | None = None) -> dict[str, Any]:
    """The trajectory record of one run graded by the report (the module docstring's fields)."""
    reward = 1.0 if outcome.resolved else 0.0
    checks = _test_checks(outcome.tests) or [
        Check("resolved", outcome.resolved, reward, "the harness says resolved" if outcome.resolved
              else f"not resolved ({outcome.source.get('listed_in', 'report.json')})")]
    gold = run.gold_patch if run.gold_patch is not None else gold_patch
    localized = localized_check(run.patch, gold)
    if localized is not None:
        checks.append(localized)
    repo_files = set(patch_files(gold)) | {p for p, s in patch_files(run.patch).items() if s != "added"}
    checks.append(reproduced_check(run.actions, repo_files))
    policy = "/".join(x for x in (run.agent, run.model) if x)
    out = {
        "schema_version": SCHEMA_VERSION,
        "id": record_id(run.instance_id),
        "env_id": ENV_ID,
        "env_sha256": None,
        "seed": None,
        "sample": 0,
        "split": TASK_KIND,
        "policy": policy,
        "model": run.model,
        "domain": DOMAIN,
        "task_id": run.instance_id,
        "hint": False,
        "messages": run.messages,
        "reward": reward,
        "passed": passed(reward),
        "verdict": {"score": reward, "checks": [c._asdict() for c in checks], "source": outcome.source},
        "task_kind": TASK_KIND,
        "capabilities_needed": list(cap.CODING),
        "termination_reason": run.termination_reason,
        "instructions": run.instructions,
        "timings": {"total_s": run.total_s},
    }
    return out | run.extra


# -- files -------------------------------------------------------------------------------------------

def source_files(paths: Iterable[str | Path]) -> list[Path]:
    """The files to read: .traj files and output.jsonl files as given, and every .traj under
    a directory (a RetryAgent's `attempt_<n>/` copies left out: the chosen attempt is the
    instance's own .traj)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = [p for p in sorted(path.rglob("*.traj"))
                     if not any(re.fullmatch(r"attempt_\d+", part) for part in p.relative_to(path).parts[:-1])]
            if not found:
                raise TraceGymError(f"{path}: no .traj files under this directory")
            out.extend(found)
        elif not path.exists():
            raise TraceGymError(f"{path}: no such file or directory")
        elif path.suffix in (".traj", ".jsonl"):
            out.append(path)
        else:
            raise TraceGymError(f"{path}: expected a SWE-agent .traj file, a directory of them, or an OpenHands "
                                "output.jsonl")
    return out


def read_runs(path: Path) -> Iterator[Run]:
    """The runs of one source file (.traj: SWE-agent; .jsonl: OpenHands)."""
    if path.suffix == ".traj":
        yield read_swe_agent(path)
    else:
        yield from read_openhands(path)


@dataclass
class Imported:
    """What an import gives: the records, and the instances left out for want of a grade."""

    records: list[dict[str, Any]]
    """One trajectory record per run."""
    skipped: list[str]
    """Instance ids the report does not grade (left out under `skip_missing`)."""


def import_runs(paths: Iterable[str | Path], report: str | Path, dataset: str | Path | None = None,
                skip_missing: bool = False) -> Imported:
    """The records of every run in `paths` (SWE-agent .traj files or directories of them,
    OpenHands output.jsonl files), graded by the report at `report`; `dataset` gives gold
    patches. An instance the report does not grade is refused by name, or left out under
    `skip_missing`; one instance read twice is refused."""
    graded = read_report(report)
    gold = read_dataset(dataset) if dataset is not None else {}
    records: list[dict[str, Any]] = []
    skipped: list[str] = []
    seen: dict[str, str] = {}
    for path in source_files(paths):
        for run in read_runs(path):
            if run.instance_id in seen:
                raise TraceGymError(f"{run.source}: instance {run.instance_id!r} was read from {seen[run.instance_id]} "
                                    "too (one run per instance per import)")
            seen[run.instance_id] = run.source
            outcome = graded.outcomes.get(run.instance_id)
            if outcome is None:
                if skip_missing:
                    skipped.append(run.instance_id)
                    continue
                why = ("lists it as not evaluated (incomplete_ids)" if run.instance_id in graded.not_evaluated
                       else "does not grade it")
                raise TraceGymError(f"{run.source}: instance {run.instance_id!r}: the report {graded.path} {why} "
                                    "(--skip-missing leaves such instances out)")
            records.append(record(run, outcome, gold.get(run.instance_id)))
    return Imported(records, skipped)


def write_records(path: str | Path, records: Iterable[dict[str, Any]]) -> Path:
    """Write the records as JSON Lines through a temporary file and a rename: `path` holds the
    old file or the whole new one, never part of one."""
    from trace_gym.jsondata import write_jsonl_atomic

    return write_jsonl_atomic(Path(path), records)
