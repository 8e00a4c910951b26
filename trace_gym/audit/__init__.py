"""`trace-gym audit ENV_ID|PATH`: check generated env code before anyone trains on it.

1. Static rules on the source, without importing it (`trace_gym.audit.static`).
2. The property kit, run here, in this trusted process, against the module loaded in a
   sandboxed env worker (`trace_gym.sandbox`): the kit never imports the module, and the
   module can change nothing of the kit's code, data or report. Skipped when the static
   rules already refuse the code: it is never run. The worker runs under bubblewrap where
   it can; elsewhere under the fallback isolation, which the report names (and which
   `require_isolation` refuses to pass).
3. A passing audit is recorded in the audit lock next to the module (keyed by the code's
   sha256, the kit version and the hash of the trace_gym modules it may build on, with the
   kit's results), and the manifest entry's sha256 is brought up to date.

Whatever the module does, the answer is a report: a load error, a crash, a timeout, an
exhausted limit or a refused escape are reasons, never a traceback.
"""

from __future__ import annotations

import importlib.util
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.audit import lock
from trace_gym.audit.static import Finding, check_source
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import sha256_bytes, write_json_atomic
from trace_gym.sandbox.isolation import IsolationUnavailable, Limits
from trace_gym.sandbox.pool import WorkerLost, WorkerPool
from trace_gym.testing import HYPOTHESIS_SEED, KIT_VERSION, KitSettings, run_kit
from trace_gym.testing.envref import EnvRef

__all__ = ["audit", "AuditReport", "Limits", "AUDIT_LIMITS", "Finding", "check_source"]

AUDIT_LIMITS = Limits(cpu_seconds=60, memory_bytes=3 * 2**30, request_seconds=10, wall_seconds=300)
"""The env worker of an audit: 60 s of CPU, 3 GiB, 10 s per request, 300 s in all (on a loaded
machine the kit takes a few times its usual 10 to 40 s)."""


@dataclass
class AuditReport:
    target: str
    path: str
    env_id: str | None
    code_sha256: str
    kit_version: str
    isolation: str
    sandboxed: bool = False
    """True when the module ran under bubblewrap (False: the fallback isolation)."""
    require_isolation: bool = False
    static: list[Finding] = field(default_factory=list)
    results: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    """Why the dynamic audit could not run to the end (load error, timeout, limit, crash)."""
    seconds: float = 0.0
    recorded: bool = False

    @property
    def passed(self) -> bool:
        if self.require_isolation and not self.sandboxed:
            return False
        return not self.static and self.error is None and bool(self.results) and all(r["passed"] for r in self.results)

    def reasons(self) -> list[str]:
        out = [f"line {f.line}: {f.message}" for f in self.static]
        if self.error:
            out.append(self.error)
        out += [f"{r['name']}: {r['detail']}" for r in self.results if not r["passed"]]
        if self.require_isolation and not self.sandboxed and not self.error:
            out.append(f"isolation was required but the module ran under: {self.isolation}")
        return out

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["static"] = [f.to_json() for f in self.static]
        data["passed"] = self.passed
        data["reasons"] = self.reasons()
        return data


def resolve_target(target: str) -> tuple[Path, str | None, str | None]:
    """(module file, env id, class name) of an env id or a module path; nothing is imported
    but the package that holds the module."""
    if target.endswith(".py") or "/" in target and Path(target).exists():
        path = Path(target).resolve()
        if not path.is_file():
            what = "a directory, not a module file" if path.is_dir() else "no such module file"
            raise TraceGymError(f"{target}: {what} (audit takes an env id or a .py file)")
        from trace_gym.registry import list_envs

        env_id = next((e.id for e in list_envs()
                       if e.kind == "capability" and _module_path(e.entry_point) == path), None)
        return path, env_id, None
    from trace_gym.registry import entry

    e = entry(target)
    if e.kind != "capability":
        raise TraceGymError(f"{e.id} is a built-in target env, not generated code; audit takes a capability env")
    source_path = _module_path(e.entry_point)
    if source_path is None:
        raise TraceGymError(f"{e.id}: the module of its entry point {e.entry_point!r} is not found")
    return source_path, e.id, e.entry_point.rpartition(":")[2] or None


resolve = resolve_target  # the older name


def _module_path(entry_point: str) -> Path | None:
    if entry_point.startswith("file:"):
        return Path(entry_point[len("file:"):].rpartition(":")[0]).resolve()
    module = entry_point.partition(":")[0]
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).resolve()


def audit(target: str, settings: KitSettings = KitSettings(), limits: Limits = AUDIT_LIMITS,
          record: bool = True, isolation: str | None = None, require_isolation: bool = False) -> AuditReport:
    """Audit a generated env (an env id or a module path); see the module docstring."""
    start = time.perf_counter()
    path, env_id, attr = resolve_target(target)
    code = path.read_bytes()
    report = AuditReport(target=target, path=str(path), env_id=env_id, code_sha256=sha256_bytes(code),
                         kit_version=KIT_VERSION, isolation="not run", require_isolation=require_isolation)
    report.static = check_source(code.decode("utf-8", errors="replace"), str(path))
    if not report.static:
        _dynamic(report, path, attr, settings, limits, isolation, require_isolation)
    report.seconds = round(time.perf_counter() - start, 2)
    if report.passed and record:
        lock.record(path.parent, report.code_sha256, {
            "env_id": env_id, **lock.current_key(), "hypothesis_seed": HYPOTHESIS_SEED,
            "static": [], "results": [{k: r[k] for k in ("name", "passed", "detail")} for r in report.results]})
        _update_manifest(path, report.code_sha256)
        report.recorded = True
    return report


def _dynamic(report: AuditReport, path: Path, attr: str | None, settings: KitSettings, limits: Limits,
             isolation: str | None, require_isolation: bool) -> None:
    """The kit, here, against the module in a sandboxed worker; fills results or error."""
    try:
        pool = WorkerPool(1, limits, isolation, require_isolation)
    except IsolationUnavailable as exc:
        report.isolation, report.error = f"none ({exc})", str(exc)
        return
    report.isolation, report.sandboxed = pool.isolation.describe(), pool.isolation.sandboxed
    ref = EnvRef(path=str(path), attr=attr, pool=pool)
    try:
        try:
            ref.make().close()
        except WorkerLost:
            raise
        except TraceGymError as exc:  # what the worker reported of the module's import or class
            report.error = f"the module failed to load: {exc}"
            return
        kit = run_kit(ref, settings)
        report.results = [r.to_json(timings=True) for r in kit.results]
    except WorkerLost as exc:
        report.error = f"the module's worker {exc.reason}"
    except MemoryError:
        report.error = f"the audit ran out of memory (limit {limits.memory_bytes // 2**20} MiB)"
    finally:
        pool.close()


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
