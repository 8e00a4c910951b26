"""`trace-gym audit ENV_ID|PATH`: check generated env code before anyone trains on it.

1. Static rules on the source, without importing it (`trace_gym.audit.static`).
2. The property kit against the module loaded in a sandboxed env worker
   (`trace_gym.sandbox`): the kit never imports the module, and the module can change
   nothing of the kit's code, data or report. Skipped when the static rules already refuse
   the code: it is never run. The worker runs under bubblewrap; without it the audit
   refuses to run, unless the fallback isolation is asked for by name, which the report and
   the lock say.
3. A passing audit is recorded in the audit lock next to the module (keyed by the code's
   sha256, the kit version and the hash of the trace_gym modules it may build on, with the
   kit's results, the seed base and the isolation), and the manifest entry's sha256 is
   brought up to date.

Steps 1 and 2 run in a trusted process of their own (`trace_gym.audit.runner`) with a
memory and a CPU budget, killed at the audit's wall-clock budget (`Limits.wall_seconds`):
whatever the module makes the kit compute, this process only waits, reads a bounded answer
and writes the lock. The kit's seeds come from a base drawn at random for each audit
unless one is given (`seed_base`, `--seed-base N`): a module cannot know which seeds it
will be judged on, and the base in the report reproduces a failure.

Whatever the module does, the answer is a report: a load error, a crash, a timeout, an
exhausted limit or a refused escape are reasons, never a traceback.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import resource
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.audit import lock
from trace_gym.audit.static import Finding, check_bytes, check_source
from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.jsondata import sha256_bytes, write_json_atomic
from trace_gym.sandbox.isolation import IsolationUnavailable, Limits, env_mode
from trace_gym.sandbox.isolation import resolve as resolve_isolation
from trace_gym.testing import KIT_VERSION, KitSettings

__all__ = ["audit", "AuditReport", "Progress", "Limits", "AUDIT_LIMITS", "Finding", "check_source", "check_bytes"]

SEED_BASES = 2**31
"""Seed bases are drawn from [0, SEED_BASES)."""
AUDIT_WALL_SECONDS = 300.0
"""An audit's wall-clock budget where its limits set none (`AUDIT_LIMITS`' own)."""
AUDIT_LIMITS = Limits(cpu_seconds=90, memory_bytes=3 * 2**30, request_seconds=10, wall_seconds=AUDIT_WALL_SECONDS)
"""The env worker of an audit: 90 s of CPU, 3 GiB, 10 s per request, 300 s in all (on a loaded
machine the kit takes a few times its usual 10 to 60 s). A coding env's worker generates
some 600 packages of about 50 ms each (two slips, and the one-edit check), most of a minute."""


@dataclass
class AuditReport:
    """What an audit found: the target and its code sha256, the kit version, the isolation
    the module ran under, the static findings, the kit's results, and why the dynamic audit
    stopped when it did."""

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
    seed_base: int | None = None
    """The base the kit drew its seeds from (`--seed-base N` plays the same seeds again)."""
    seconds: float = 0.0
    recorded: bool = False

    @property
    def passed(self) -> bool:
        """True when no static rule fired, the kit ran to the end and every result passed
        (and the module ran sandboxed, when that was required)."""
        if self.require_isolation and not self.sandboxed:
            return False
        return not self.static and self.error is None and bool(self.results) and all(r["passed"] for r in self.results)

    def reasons(self) -> list[str]:
        """Why the audit failed, one line per reason (empty when it passed)."""
        out = [f"line {f.line}: {f.message}" for f in self.static]
        if self.error:
            out.append(self.error)
        out += [f"{r['name']}: {r['detail']}" for r in self.results if not r["passed"]]
        if self.require_isolation and not self.sandboxed and not self.error:
            out.append(f"isolation was required but the module ran under: {self.isolation}")
        return out

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON object, with `passed` and `reasons`."""
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


AUDITOR_MEMORY_BYTES = 1280 * 2**20
"""Address space of the audit's trusted process (`trace_gym.audit.runner`): the kit, its
classifiers and what the module's worker sends are held within it."""
RUNNER_MODULE = "trace_gym.audit.runner"
"""The trusted process's module (`python -m RUNNER_MODULE`)."""
KILL_GRACE_SECONDS = 8.0
"""How long past the wall-clock budget the trusted process may take to report before it is
killed (its worker gets the budget less this)."""


def audit(target: str, settings: KitSettings = KitSettings(), limits: Limits = AUDIT_LIMITS,
          record: bool = True, isolation: str | None = None, require_isolation: bool = False,
          seed_base: int | None = None, progress: Callable[[Progress], None] | None = None) -> AuditReport:
    """Audit a generated env (an env id or a module path); see the module docstring.
    `seed_base` None draws one at random (the report and the lock say which); `progress`
    hears of each property as it ends."""
    start = time.monotonic()
    path, env_id, attr = resolve_target(target)
    code = path.read_bytes()
    if seed_base is None:
        seed_base = secrets.randbelow(SEED_BASES)
    elif not (type(seed_base) is int and 0 <= seed_base < SEED_BASES):
        raise InvalidConfig(f"seed_base={seed_base!r} is invalid: must be an integer in [0, {SEED_BASES})")
    settings = dataclasses.replace(settings, seed_base=seed_base)
    report = AuditReport(target=target, path=str(path), env_id=env_id, code_sha256=sha256_bytes(code),
                         kit_version=KIT_VERSION, isolation="not run", require_isolation=require_isolation,
                         seed_base=seed_base)
    try:
        mode = resolve_isolation(isolation or env_mode(), require_isolation)
    except IsolationUnavailable as exc:
        report.isolation, report.error = f"none ({exc})", str(exc)
        mode = None
    if mode is not None:
        _trusted(report, path, attr, settings, limits, mode.mode, start, progress)
    report.seconds = round(time.monotonic() - start, 2)
    if report.passed and sha256_bytes(path.read_bytes()) != report.code_sha256:
        report.error = "the module changed during the audit"
    if report.passed and record:
        lock.record(path.parent, report.code_sha256, {
            "env_id": env_id, **lock.current_key(), "hypothesis_seed": settings.hypothesis_seed,
            "seed_base": seed_base, "isolation": "bubblewrap" if report.sandboxed else "fallback",
            "static": [], "results": [{k: r[k] for k in ("name", "passed", "detail")} for r in report.results]})
        _update_manifest(path, report.code_sha256)
        report.recorded = True
    return report


@dataclass(frozen=True)
class Progress:
    """One property of an audit that has ended."""

    name: str
    passed: bool
    seconds: float


def _listen(pipe: int, progress: Callable[[Progress], None]) -> threading.Thread:
    """A thread that tells `progress` of each line the trusted process writes on `pipe` (its
    own: the worker running the module does not inherit it), until the pipe closes."""

    def listen() -> None:
        with os.fdopen(pipe, "r", errors="replace") as lines:
            for line in lines:
                try:
                    item = json.loads(line)
                    told = Progress(str(item["name"]), item["passed"] is True, float(item["seconds"]))
                except (ValueError, TypeError, KeyError):
                    continue
                progress(told)

    thread = threading.Thread(target=listen, daemon=True)
    thread.start()
    return thread


def _trusted(report: AuditReport, path: Path, attr: str | None, settings: KitSettings, limits: Limits,
             mode: str, start: float, progress: Callable[[Progress], None] | None = None) -> None:
    """Run the static rules and the kit in the trusted process (`trace_gym.audit.runner`),
    within the audit's budgets; fills the report's static findings, results or error."""
    budget = limits.wall_seconds or AUDIT_WALL_SECONDS
    worker_limits = dataclasses.replace(limits, wall_seconds=max(1.0, budget - KILL_GRACE_SECONDS))
    request: dict[str, Any] = {"path": str(path), "attr": attr, "code_sha256": report.code_sha256,
               "settings": dataclasses.asdict(settings), "limits": dataclasses.asdict(worker_limits),
               "isolation": mode}
    cpu = int(budget) + 1
    listener, write_end = None, None
    if progress is not None:
        read_end, write_end = os.pipe()
        request["progress_fd"] = write_end
        listener = _listen(read_end, progress)
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", RUNNER_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            preexec_fn=lambda: _trusted_limits(cpu), start_new_session=True, close_fds=True,
            pass_fds=(write_end,) if write_end is not None else ())
    finally:
        if write_end is not None:
            os.close(write_end)  # the trusted process holds the only write end: the pipe closes with it
    try:
        out, err = proc.communicate(json.dumps(request).encode(), timeout=max(1.0, start + budget - time.monotonic()))
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        report.error = f"the audit did not finish within its {budget:g} s wall-clock budget"
        return
    finally:
        if proc.returncode is None:  # interrupted, or timed out: nothing of it stays
            _kill_group(proc)
        if listener is not None:
            listener.join(timeout=5)
    try:
        answer = json.loads(out) if proc.returncode == 0 else None
    except ValueError:
        answer = None
    if type(answer) is not dict:
        report.error = _trusted_failure(proc.returncode, err, budget)
        return
    if answer.get("error") == "memory":
        report.error = (f"the audit ran out of its {AUDITOR_MEMORY_BYTES // 2**20} MiB memory budget on what the "
                        "module sent")
        return
    report.static = [Finding(**f) for f in answer.get("static", [])]
    report.results = answer.get("results", [])
    report.error = answer.get("error")
    report.isolation, report.sandboxed = answer.get("isolation", "not run"), answer.get("sandboxed") is True


def _trusted_limits(cpu_seconds: int) -> None:
    # Soft limits only: the worker this process starts sets its own, higher, address space.
    resource.setrlimit(resource.RLIMIT_AS, (AUDITOR_MEMORY_BYTES, resource.RLIM_INFINITY))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, resource.RLIM_INFINITY))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=5)
    except (subprocess.TimeoutExpired, ValueError, OSError):
        pass


def _trusted_failure(code: int | None, stderr: bytes, budget: float) -> str:
    """Why the trusted process gave no answer, in words."""
    if code == -signal.SIGXCPU:
        return f"the audit used more than its {int(budget) + 1} s of CPU"
    if code is not None and code < 0:
        return f"the audit's trusted process was killed by {signal.Signals(-code).name} (out of memory?)"
    tail = stderr.decode(errors="replace").strip().splitlines()
    if any("MemoryError" in line for line in tail[-5:]):
        return f"the audit ran out of its {AUDITOR_MEMORY_BYTES // 2**20} MiB memory budget on what the module sent"
    return f"the audit's trusted process exited with status {code}" + (f": {tail[-1][:300]}" if tail else "")


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
