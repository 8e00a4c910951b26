"""`trace-gym audit ENV_ID|PATH`: check generated env code before anyone trains on it.

1. Static rules on the source, without importing it (`trace_gym.audit.static`).
2. The property kit in a sandboxed process (CPU, memory, file-size and wall-clock limits,
   no network), plus determinism across two processes with different PYTHONHASHSEED.
   Skipped when the static rules already refuse the code: it is never run.
3. A passing audit is recorded in the audit lock next to the module (by code sha256, with
   the kit version and its results), and the manifest entry's sha256 is brought up to date.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.audit import lock
from trace_gym.audit.sandbox import Limits, describe_isolation, run_child
from trace_gym.audit.static import Finding, check_source
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import sha256_bytes, write_json_atomic
from trace_gym.testing import HYPOTHESIS_SEED, KIT_VERSION, KitSettings
from trace_gym.testing.envref import EnvRef
from trace_gym.testing.properties import _seeds

__all__ = ["audit", "AuditReport", "Limits", "Finding", "check_source"]


@dataclass
class AuditReport:
    target: str
    path: str
    env_id: str | None
    code_sha256: str
    kit_version: str
    isolation: str
    static: list[Finding] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    """Why the dynamic audit could not run to the end (timeout, memory, crash)."""
    seconds: float = 0.0
    recorded: bool = False

    @property
    def passed(self) -> bool:
        return not self.static and self.error is None and bool(self.results) and all(r["passed"] for r in self.results)

    def reasons(self) -> list[str]:
        out = [f"line {f.line}: {f.message}" for f in self.static]
        if self.error:
            out.append(self.error)
        out += [f"{r['name']}: {r['detail']}" for r in self.results if not r["passed"]]
        return out

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["static"] = [f.to_json() for f in self.static]
        data["passed"] = self.passed
        data["reasons"] = self.reasons()
        return data


def resolve(target: str) -> tuple[Path, str | None, str | None]:
    """(module file, env id, class name) of an env id or a module path; nothing is imported
    but the package that holds the module."""
    if target.endswith(".py") or "/" in target and Path(target).exists():
        path = Path(target).resolve()
        if not path.is_file():
            what = "a directory, not a module file" if path.is_dir() else "no such module file"
            raise TraceGymError(f"{target}: {what} (audit takes an env id or a .py file)")
        from trace_gym.registry import list_envs

        env_id = next((e.id for e in list_envs() if e.kind == "capability" and _module_path(e.entry_point) == path), None)
        return path, env_id, None
    from trace_gym.registry import entry

    e = entry(target)
    module, _, attr = e.entry_point.partition(":")
    return _module_path(e.entry_point), e.id, attr or None


def _module_path(entry_point: str) -> Path | None:
    module = entry_point.partition(":")[0]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve()


def audit(target: str, settings: KitSettings = KitSettings(), limits: Limits = Limits(),
          record: bool = True) -> AuditReport:
    start = time.perf_counter()
    path, env_id, attr = resolve(target)
    code = path.read_bytes()
    report = AuditReport(target=target, path=str(path), env_id=env_id, code_sha256=sha256_bytes(code),
                         kit_version=KIT_VERSION, isolation=describe_isolation())
    report.static = check_source(code.decode("utf-8", errors="replace"), str(path))
    if not report.static:
        _dynamic(report, EnvRef(path=str(path), attr=attr), settings, limits)
    report.seconds = round(time.perf_counter() - start, 2)
    if report.passed and record:
        lock.record(path.parent, report.code_sha256, {
            "env_id": env_id, "kit_version": KIT_VERSION, "hypothesis_seed": HYPOTHESIS_SEED,
            "static": [], "results": [{k: r[k] for k in ("name", "passed", "detail")} for r in report.results]})
        _update_manifest(path, report.code_sha256)
        report.recorded = True
    return report


def _dynamic(report: AuditReport, ref: EnvRef, settings: KitSettings, limits: Limits) -> None:
    kit_settings = {k: v for k, v in asdict(settings).items() if k != "target_tools" or v is not None}
    outcome = run_child(["kit", ref.to_json(), json.dumps(kit_settings)], limits)
    failure = outcome.failure(limits)
    if failure:
        report.error = f"the module {failure}"
        return
    try:
        data = json.loads(outcome.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        report.error = f"the sandboxed kit printed no result: {outcome.stderr.strip()[-300:]}"
        return
    if "load_error" in data:
        report.error = f"the module failed to load: {data['load_error']}"
        return
    report.results = data["results"]
    # Determinism across processes: two fresh sandboxed processes, different hash seeds.
    seeds = _seeds(8)
    prints = []
    for hash_seed in ("1", "2"):
        outcome = run_child(["fingerprint", ref.to_json(), json.dumps(seeds)], limits, {"PYTHONHASHSEED": hash_seed})
        failure = outcome.failure(limits)
        if failure:
            report.error = f"the module {failure} (fingerprint run)"
            return
        prints.append(outcome.stdout.strip().splitlines()[-1])
    same = prints[0] == prints[1]
    detail = (f"{len(seeds)} seeds identical in two processes" if same else
              "seeds differ between two processes (PYTHONHASHSEED 1 and 2): the task depends on "
              "something other than the seed")
    report.results.append({"name": "determinism_across_processes", "passed": same, "detail": detail})


def _update_manifest(path: Path, sha: str) -> None:
    manifest = path.parent / "manifest.json"
    if not manifest.is_file():
        return
    data = json.loads(manifest.read_text(encoding="utf-8"))
    changed = False
    for e in data.get("envs", []):
        if _module_path(e["entry_point"]) == path and e.get("sha256") != sha:
            e["sha256"] = sha
            changed = True
    if changed:
        write_json_atomic(manifest, data)
