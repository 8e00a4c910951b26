"""The audit's trusted process: `python -m trace_gym.audit.runner`, started by `audit()`.

Everything an audit computes over what a module sends (the static rules over its source,
the property kit over its episodes, the classifiers fitted on its wording) runs here, in
a process of its own with a memory budget (soft RLIMIT_AS), a CPU budget (RLIMIT_CPU) and
memory no other process of the user can read or write (not dumpable), which the caller
kills at its wall-clock budget. A module that makes the kit's own work run long or grow
fails the audit; it cannot take the caller with it. The module itself runs one level
further down, in the sandboxed env worker this process starts.

Request on stdin (one JSON object): path, attr, code_sha256, settings (KitSettings
fields), limits (the worker's Limits, `wall_seconds` what is left of the audit's budget),
isolation (the mode the caller resolved), and optionally progress_fd: a pipe of the caller's
on which each property's name, outcome and seconds are written as a JSON line when it ends
(the worker, which runs the module, does not inherit it, so the module cannot write there).
Answer on the original stdout (one JSON object): static, results, error, isolation,
sandboxed. Anything the kit prints goes to stderr.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Callable
from typing import Any

MAX_DETAIL_CHARS = 2000
"""The longest detail of a result or an error kept (a module's exception message can be
megabytes)."""

_PR_SET_DUMPABLE = 4


def _not_dumpable() -> None:
    """No other process of this user may read or write this one's memory through /proc or
    ptrace (the fallback isolation does not keep a worker from trying)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_DETAIL_CHARS else text[:MAX_DETAIL_CHARS] + " [...]"


def _progress(fd: int | None) -> Callable[[Any], None] | None:
    """A writer of one JSON line per finished property to the caller's pipe `fd` (None: none)."""
    if fd is None:
        return None
    pipe = os.fdopen(fd, "w", buffering=1)

    def tell(result: Any) -> None:
        pipe.write(json.dumps({"name": result.name, "passed": result.passed, "seconds": round(result.seconds, 1)})
                   + "\n")

    return tell


def run(request: dict[str, Any]) -> dict[str, Any]:
    """The static rules and, when they find nothing, the kit against the module in a worker."""
    from trace_gym.audit.static import check_bytes
    from trace_gym.errors import TraceGymError
    from trace_gym.sandbox.isolation import IsolationUnavailable, Limits
    from trace_gym.sandbox.pool import WorkerLost, WorkerPool
    from trace_gym.sandbox.proxy import EnvSource
    from trace_gym.testing import KitSettings, run_kit
    from trace_gym.testing.envref import EnvRef

    path, attr = request["path"], request["attr"]
    out: dict[str, Any] = {"static": [], "results": [], "error": None, "isolation": "not run", "sandboxed": False}
    with open(path, "rb") as f:
        code = f.read()
    if EnvSource.from_file(path, attr).sha256 != request["code_sha256"]:
        out["error"] = "the module changed after the audit began"
        return out
    findings = check_bytes(code, path)
    out["static"] = [f.to_json() for f in findings]
    if findings:
        return out
    settings = dict(request["settings"])
    if settings.get("target_tools") is not None:
        settings["target_tools"] = tuple(settings["target_tools"])
    limits = Limits(**request["limits"])
    try:
        pool = WorkerPool(1, limits, request["isolation"])
    except IsolationUnavailable as exc:
        out["isolation"], out["error"] = f"none ({exc})", str(exc)
        return out
    out["isolation"], out["sandboxed"] = pool.isolation.describe(), pool.isolation.sandboxed
    ref = EnvRef(path=path, attr=attr, pool=pool)
    try:
        try:
            ref.make().close()
        except WorkerLost:
            raise
        except TraceGymError as exc:  # what the worker reported of the module's import or class
            out["error"] = _clip(f"the module failed to load: {exc}")
            return out
        kit = run_kit(ref, KitSettings(**settings), on_result=_progress(request.get("progress_fd")))
        out["results"] = [{**r.to_json(timings=True), "detail": _clip(r.detail)} for r in kit.results]
    except WorkerLost as exc:
        out["error"] = _clip(f"the module's worker {exc.reason}")
    finally:
        pool.close()
    return out


def main() -> None:
    """Answer one request: read it from stdin, run it (with the process made not dumpable,
    and everything printed sent to stderr), write the answer to the original stdout; running
    out of memory answers `{"error": "memory"}`."""
    _not_dumpable()
    answers = os.dup(1)
    os.dup2(2, 1)  # what the kit or a library prints goes to stderr, not into the answer
    sys.stdout = sys.stderr
    request = json.loads(sys.stdin.buffer.read())
    try:
        answer = run(request)
    except MemoryError:
        answer = {"error": "memory"}
    with os.fdopen(answers, "w") as f:
        f.write(json.dumps(answer))


if __name__ == "__main__":
    main()
