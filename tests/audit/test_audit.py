"""The audit: hostile modules are refused with the reason named, the shipped envs pass, a
passing audit is recorded, and unaudited generated code warns on construction."""

from __future__ import annotations

import json
import socket
import threading
import warnings

import gymnasium as gym
import pytest

from tests.audit.mutants import HOSTILE, TEMPLATE, mutant
from tests.conftest import REPO
from trace_gym.audit import Limits, audit
from trace_gym.audit.lock import UnauditedEnvWarning, current_key, read_lock, stale_reason, warn_if_unaudited
from trace_gym.cli import main
from trace_gym.errors import TraceGymError
from trace_gym.jsondata import sha256_bytes
from trace_gym.sandbox.pool import WorkerPool
from trace_gym.testing import KIT_VERSION, KitSettings
from trace_gym.testing.envref import EnvRef

FAST = KitSettings(examples=10, oracle_seeds=10, episodes=20, soundness_seeds=4, distinct_seeds=60,
                   adversary_seeds=24, wording_seeds=300, gold_seeds=40)
TIGHT = Limits(cpu_seconds=8, memory_bytes=2 * 2**30, request_seconds=5, wall_seconds=40)
SHIPPED = ["trace/precondition_verification-v0", "trace/structured_data_reasoning-v0",
           "trace/multi_step_task_completion-v0", "trace/tool_calling_precision-v0",
           "trace/code_localization-v0", "trace/issue_reproduction-v0"]


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_module_is_refused_with_its_reason(tmp_path, name):
    hooks, words = HOSTILE[name]
    report = audit(str(mutant(tmp_path, name, **hooks)), FAST, TIGHT, seed_base=0)
    assert not report.passed
    assert any(words in reason for reason in report.reasons()), report.reasons()
    assert not (tmp_path / "audit_lock.json").exists()  # nothing recorded


def test_static_refusal_never_runs_the_code(tmp_path):
    marker = tmp_path / "ran"
    path = mutant(tmp_path, "writer", generate=f"open({str(marker)!r}, 'w').write('x')")
    report = audit(str(path), FAST, TIGHT, seed_base=0)
    assert report.static and report.results == [] and not marker.exists()


def test_sandbox_has_no_network_even_without_static_rules(tmp_path):
    received: list[bytes] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(15)
    port = server.getsockname()[1]

    def serve():
        try:
            conn, _ = server.accept()
            received.append(conn.recv(100))
        except OSError:
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    # bypass the static rules: load, in an audit's worker, a module that connects at import
    code = TEMPLATE.read_text().replace("# HOOK:imports", "")
    path = tmp_path / "phone_home.py"
    path.write_text(code + f"\nimport socket as _s\n_s.create_connection(('127.0.0.1', {port}), timeout=3).sendall(b'leak')\n")
    with WorkerPool(1, TIGHT) as pool, pytest.raises(TraceGymError) as raised:
        EnvRef(path=str(path), pool=pool).make()
    server.close()
    thread.join(5)
    assert any(word in str(raised.value) for word in ("refused", "unreachable")), raised.value
    assert received == []


@pytest.mark.slow
@pytest.mark.parametrize("env_id", SHIPPED)
def test_shipped_env_passes_and_reproduces_its_lock_entry(env_id):
    entries = read_lock(REPO / "generated_envs")["entries"]
    base = next(e["seed_base"] for e in entries.values() if e["env_id"] == env_id)
    report = audit(env_id, record=False, seed_base=base)  # the recorded base plays the same seeds again
    assert report.passed, report.reasons()
    assert report.seconds < 180  # 15-80 s alone; two audits share the two cores under pytest -n 2
    entry = entries[report.code_sha256]
    assert entry["results"] == [{k: r[k] for k in ("name", "passed", "detail")} for r in report.results]
    assert stale_reason(entry) is None


def test_passing_audit_is_recorded_and_silences_the_warning(tmp_path):
    path = mutant(tmp_path, "fine_env")
    with pytest.warns(UnauditedEnvWarning):
        warn_if_unaudited(path)
    heard = []
    report = audit(str(path), FAST, TIGHT, seed_base=0, progress=heard.append)
    assert report.passed and report.recorded, report.reasons()
    # each property was told as it ended, in the report's order, by the trusted process's own pipe
    assert [(p.name, p.passed) for p in heard] == [(r["name"], r["passed"]) for r in report.results]
    entry = read_lock(tmp_path)["entries"][sha256_bytes(path.read_bytes())]
    assert entry["kit_version"] == KIT_VERSION and entry["library_sha256"] == current_key()["library_sha256"]
    assert all(r["passed"] for r in entry["results"]) and stale_reason(entry) is None
    assert "seconds" not in json.dumps(entry)
    path.write_text(path.read_text() + "\n")  # any change needs a new audit
    with pytest.warns(UnauditedEnvWarning):
        warn_if_unaudited(path)


def test_shipped_manifest_and_lock_are_current():
    """Fails when a shipped env's code, the kit version or the trace_gym modules it builds on
    changed since its recorded audit: rerun `trace-gym audit ENV_ID` and commit the lock."""
    manifest = json.loads((REPO / "generated_envs" / "manifest.json").read_text())
    entries = read_lock(REPO / "generated_envs")["entries"]
    assert sorted(e["id"] for e in manifest["envs"]) == sorted(SHIPPED)
    for e in manifest["envs"]:
        assert e["origin"] == "shipped"
        module = e["entry_point"].split(":")[0].rsplit(".", 1)[1]
        sha = sha256_bytes((REPO / "generated_envs" / f"{module}.py").read_bytes())
        assert e["sha256"] == sha, f"{e['id']}: manifest sha256 is stale; run trace-gym audit {e['id']}"
        problem = stale_reason(entries.get(sha))
        assert problem is None, f"{e['id']}: {problem}; run trace-gym audit {e['id']}"


def test_a_lock_entry_goes_stale_with_the_kit_or_the_library(tmp_path):
    entry = {"kit_version": KIT_VERSION, "library_sha256": current_key()["library_sha256"], "static": [],
             "isolation": "bubblewrap",
             "results": [{"name": "x", "passed": True, "detail": ""}]}
    assert stale_reason(entry) is None
    assert "kit version" in stale_reason({**entry, "kit_version": "0"})
    assert "builds on changed" in stale_reason({**entry, "library_sha256": "0" * 64})
    assert "did not pass" in stale_reason({**entry, "results": [{"name": "x", "passed": False, "detail": ""}]})
    assert "no audit" in stale_reason(None)


def test_require_isolation_refuses_even_the_fallback_asked_for_by_name(tmp_path, capsys):
    path = mutant(tmp_path, "fine_env")
    fallback = audit(str(path), FAST, TIGHT, record=False, isolation="fallback", seed_base=0)
    assert fallback.passed and not fallback.sandboxed and "FALLBACK" in fallback.isolation
    required = audit(str(path), FAST, TIGHT, record=False, isolation="fallback", require_isolation=True, seed_base=0)
    assert not required.passed and required.results == []
    assert any("isolation is required" in r for r in required.reasons())
    args = ["audit", str(path), "--no-record", "--seed-base", "0", "--isolation", "fallback"]
    assert main([*args, "--require-isolation", "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["passed"] is False
    assert main(args) == 0  # named, the fallback runs, and the report says so
    assert "FALLBACK" in capsys.readouterr().out


def test_shipped_envs_make_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for env_id in SHIPPED:
            gym.make(env_id).reset(seed=0)


def test_cli_audit_json_and_exit_status(tmp_path, capsys):
    bad = mutant(tmp_path, "evil", imports="import socket")
    assert main(["audit", str(bad), "--json", "--seed-base", "0"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] is False and any("network" in r for r in data["reasons"])
    assert main(["audit", str(bad), "--seed-base", "0"]) == 1
    said = capsys.readouterr()
    assert "FAILED" in said.out and said.err.startswith(f"auditing {bad}: the static rules")


def test_a_target_that_is_not_a_module_file_is_named(tmp_path):
    from trace_gym.audit import resolve
    from trace_gym.errors import TraceGymError

    with pytest.raises(TraceGymError, match="a directory, not a module file"):
        resolve(str(tmp_path))
    with pytest.raises(TraceGymError, match="no such module file"):
        resolve(str(tmp_path / "missing.py"))
