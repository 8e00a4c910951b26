"""The SWE-bench harness's evaluation report (`read_report`) and a dataset's gold patches
(`read_dataset`), read against SWE-bench/SWE-bench at 7a21e057 (see `trace_gym.swebench`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym.errors import MalformedFile
from trace_gym.jsondata import loads

# -- the evaluation report -------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    """What the evaluation report says of one instance."""

    resolved: bool
    """Whether the harness counted the instance resolved."""
    tests: dict[str, dict[str, list[str]]] | None
    """report.json's tests_status (FAIL_TO_PASS / PASS_TO_PASS: success, failure), if given."""
    source: dict[str, Any]
    """The report's own entry for the instance (kept under the verdict's `source`)."""


@dataclass(frozen=True)
class Report:
    """An evaluation report: instance id -> outcome, and ids it names as not evaluated."""

    path: Path
    """Where it was read from."""
    outcomes: dict[str, Outcome]
    """The instances it grades."""
    not_evaluated: frozenset[str] = frozenset()
    """Instances it lists as never evaluated (a run summary's incomplete_ids)."""


SUMMARY_FAILED = ("unresolved_ids", "empty_patch_ids", "error_ids")
"""A run summary's lists of instances that were not resolved."""
SUMMARY_LISTS = ("resolved_ids", *SUMMARY_FAILED, "incomplete_ids", "completed_ids", "submitted_ids",
                 "infra_failure_ids", "ambiguous_failure_ids")
"""Every list of instance ids a run summary may hold (reporting.py, schema_version 2)."""


def _read_json(path: Path, what: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MalformedFile(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise MalformedFile(f"{path}: line {exc.lineno}: not valid JSON ({exc.msg}); expected {what}") from None
    except ValueError as exc:
        raise MalformedFile(f"{path}: not valid JSON ({exc}); expected {what}") from None


def _id_list(path: Path, data: dict[str, Any], key: str) -> list[str]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MalformedFile(f"{path}: field {key!r} must be a list of instance ids")
    return value


def _summary(path: Path, data: dict[str, Any]) -> Report:
    lists = {key: _id_list(path, data, key) for key in SUMMARY_LISTS}
    resolved = set(lists["resolved_ids"])
    failed: dict[str, str] = {}
    for key in SUMMARY_FAILED:
        for i in lists[key]:
            failed.setdefault(i, key)
    for key in ("completed_ids", "submitted_ids"):
        for i in lists[key]:
            if i not in resolved:
                failed.setdefault(i, key)
    both = sorted(resolved & failed.keys())
    if both:
        raise MalformedFile(f"{path}: instance {both[0]!r} is listed both in 'resolved_ids' and in "
                            f"{failed[both[0]]!r}")
    infra = set(lists["infra_failure_ids"])
    reasons = given if isinstance(given := data.get("failure_reasons"), dict) else {}
    outcomes = {}
    for i in sorted(resolved | failed.keys()):
        source: dict[str, Any] = {"report": "summary", "listed_in": "resolved_ids" if i in resolved else failed[i]}
        if i in infra:
            source["infra_failure"] = True
        if i in reasons:
            source["failure_reason"] = reasons[i]
        outcomes[i] = Outcome(i in resolved, None, source)
    not_evaluated = frozenset(set(lists["incomplete_ids"]) - outcomes.keys())
    return Report(path, outcomes, not_evaluated)


def _tests_status(path: Path, instance_id: str, status: Any) -> dict[str, dict[str, list[str]]] | None:
    if status is None:
        return None
    where = f"{path}: instance {instance_id!r}: tests_status"
    if not isinstance(status, dict):
        raise MalformedFile(f"{where} must be an object")
    out = {}
    for group in ("FAIL_TO_PASS", "PASS_TO_PASS"):
        if group not in status:
            continue
        part = status[group]
        if not isinstance(part, dict):
            raise MalformedFile(f"{where}.{group} must be an object with 'success' and 'failure'")
        for key in ("success", "failure"):
            tests = part.get(key, [])
            if not isinstance(tests, list) or not all(isinstance(t, str) for t in tests):
                raise MalformedFile(f"{where}.{group}.{key} must be a list of test names")
        out[group] = {"success": list(part.get("success", [])), "failure": list(part.get("failure", []))}
    return out


def _per_instance(path: Path, data: dict[str, Any]) -> dict[str, Outcome]:
    outcomes = {}
    for instance_id, entry in data.items():
        if not isinstance(entry, dict):
            raise MalformedFile(f"{path}: instance {instance_id!r}: expected an object with 'resolved'")
        if not isinstance(entry.get("resolved"), bool):
            raise MalformedFile(f"{path}: instance {instance_id!r}: 'resolved' must be true or false, "
                                f"got {entry.get('resolved')!r}")
        tests = _tests_status(path, instance_id, entry.get("tests_status"))
        source = {"report": "instance", **{k: v for k, v in entry.items() if k != "tests_status"}}
        outcomes[instance_id] = Outcome(entry["resolved"], tests, source)
    return outcomes


def read_report(path: str | Path) -> Report:
    """The SWE-bench harness report at `path`: a run summary (`resolved_ids`, `unresolved_ids`,
    ...), a report.json (`{instance_id: {"resolved": ..., "tests_status": ...}}`), or a
    directory read as every report.json under it."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.rglob("report.json"))
        if not files:
            raise MalformedFile(f"{path}: no report.json under this directory")
        outcomes: dict[str, Outcome] = {}
        seen: dict[str, Path] = {}
        for f in files:
            data = _read_json(f, "a SWE-bench report.json")
            if not isinstance(data, dict) or "resolved_ids" in data:
                raise MalformedFile(f"{f}: not a per-instance report.json ({{instance_id: {{'resolved': ...}}}})")
            for instance_id, outcome in _per_instance(f, data).items():
                if instance_id in seen:
                    raise MalformedFile(f"{f}: instance {instance_id!r} is graded in {seen[instance_id]} too")
                seen[instance_id] = f
                outcomes[instance_id] = outcome
        return Report(path, outcomes)
    data = _read_json(path, "a SWE-bench evaluation report")
    if isinstance(data, dict) and "resolved_ids" in data:
        return _summary(path, data)
    if isinstance(data, dict) and data and all(isinstance(v, dict) and "resolved" in v for v in data.values()):
        return Report(path, _per_instance(path, data))
    raise MalformedFile(f"{path}: not a SWE-bench evaluation report (expected a run summary with 'resolved_ids' "
                        "and 'unresolved_ids', or a report.json of {instance_id: {'resolved': true|false, ...}})")



def _json_lines(path: Path, what: str, shape: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of each non-blank line of a JSON-lines file; a file that cannot be
    read, a line that is not JSON or not an object is refused naming the file and the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise MalformedFile(f"{path}: cannot read {what} ({exc.strerror or exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = loads(line)
        except ValueError as exc:
            raise MalformedFile(f"{path}: line {number}: not valid JSON ({exc})") from None
        if not isinstance(row, dict):
            raise MalformedFile(f"{path}: line {number}: not {shape}")
        yield number, row

def read_dataset(path: str | Path) -> dict[str, str]:
    """instance_id -> gold patch, from a SWE-bench dataset JSONL (one instance a line, with
    `instance_id` and `patch`)."""
    path = Path(path)
    gold: dict[str, str] = {}
    for number, row in _json_lines(path, "a SWE-bench dataset file", "a JSON object"):
        if not isinstance(row.get("instance_id"), str) or not isinstance(row.get("patch"), str):
            raise MalformedFile(f"{path}: line {number}: needs a string 'instance_id' and a string 'patch'")
        gold[row["instance_id"]] = row["patch"]
    return gold


