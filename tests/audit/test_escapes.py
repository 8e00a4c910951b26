"""Every escape the review found, as a working module: `trace-gym audit` rejects each with a
reason (never a traceback) and its harm never happens; run anyway, past the static rules,
the sandboxed worker contains it; and a module that only misbehaves outside the audit is
contained in rollouts and training-shaped batches."""

from __future__ import annotations

import json
import os
import shutil
import socket
import threading
import time
from dataclasses import replace

import pytest

from tests.audit.escapes import ESCAPES, HEADED_ESCAPES, KIT_SWITCH_OFF, fill, harmed, prepare, write_escape
from tests.audit.mutants import mutant
from tests.conftest import REPO, requires_bubblewrap
from trace_gym.audit import AUDIT_LIMITS, audit
from trace_gym.audit.lock import read_lock
from trace_gym.cli import main
from trace_gym.jsondata import sha256_bytes
from trace_gym.sandbox import RemoteEnvError, WorkerPool, bubblewrap_status
from trace_gym.testing import CUSTOMER_SERVICE_PROPERTIES, PROPERTIES, EnvRef, KitSettings, run_kit, run_property

FAST = KitSettings(examples=6, oracle_seeds=6, episodes=12, soundness_seeds=3, distinct_seeds=40,
                   adversary_seeds=24, wording_seeds=300, gold_seeds=40)


class Listener:
    """A local server that records whatever reaches it."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(4)
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    self.received.append(conn.recv(100) or b"<connected>")
                except OSError:
                    self.received.append(b"<connected>")

    def close(self) -> list[bytes]:
        self.stop = True
        self.thread.join(5)
        self.server.close()
        return self.received


@pytest.fixture
def listener():
    server = Listener()
    yield server
    server.close()


def _refused_before_running(tmp_path, capsys, listener, path, words):
    assert main(["audit", str(path), "--json", "--seed-base", "0"]) == 1
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["passed"] is False and report["results"] == []  # refused before it could run
    assert any(words in reason for reason in report["reasons"]), report["reasons"]
    assert "Traceback" not in out + err
    assert harmed(tmp_path) == [] and listener.close() == []


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_audit_rejects_each_escape_with_its_reason(tmp_path, capsys, listener, name):
    prepare(tmp_path)
    path = write_escape(tmp_path, name, listener.port)
    _refused_before_running(tmp_path, capsys, listener, path, ESCAPES[name].words)


def _write_headed_escape(tmp_path, name, port=9):
    header, escape = HEADED_ESCAPES[name]
    path = mutant(tmp_path, name, **{escape.hook: fill(escape.code, tmp_path, port)})
    path.write_text(header + path.read_text())
    return path


@pytest.mark.parametrize("name", sorted(HEADED_ESCAPES))
def test_audit_rejects_each_escape_in_the_first_lines(tmp_path, capsys, listener, name):
    """A coding declaration: the audit reads the module as UTF-8, Python as it declares."""
    prepare(tmp_path)
    path = _write_headed_escape(tmp_path, name, listener.port)
    _refused_before_running(tmp_path, capsys, listener, path, HEADED_ESCAPES[name][1].words)


@requires_bubblewrap
@pytest.mark.parametrize("name", sorted(HEADED_ESCAPES))
def test_sandbox_contains_each_escape_in_the_first_lines(tmp_path, name):
    prepare(tmp_path)
    with WorkerPool(1, AUDIT_LIMITS, isolation="bubblewrap") as pool:
        _run_unchecked(_write_headed_escape(tmp_path, name), pool)
    assert harmed(tmp_path) == []


@pytest.mark.slow
def test_an_unmodified_copy_of_a_shipped_env_passes(tmp_path):
    """The rules and the sandbox refuse escapes, not envs: a shipped env copied out of the
    package (so loaded as any generated module is) passes, runs sandboxed where bubblewrap
    can run, and is recorded in the lock next to it."""
    copy = tmp_path / "copied_env.py"
    shutil.copy(REPO / "generated_envs" / "precondition_verification.py", copy)
    # adversaries play the default 200 seeds: their bounds are sized for it (on 24 seeds a
    # refusal's mean of 0.315 can read above 0.35 by the luck of the sample)
    report = audit(str(copy), replace(FAST, adversary_seeds=KitSettings().adversary_seeds), seed_base=0)
    assert report.passed, report.reasons()
    assert report.error is None and {r["name"] for r in report.results} == set(CUSTOMER_SERVICE_PROPERTIES)
    assert report.sandboxed == bubblewrap_status()[0], report.isolation
    entry = read_lock(tmp_path)["entries"][sha256_bytes(copy.read_bytes())]
    assert report.recorded and all(r["passed"] for r in entry["results"])


def test_audit_rejects_the_kit_switch_off(tmp_path, capsys):
    path = tmp_path / "cheat.py"
    path.write_text(KIT_SWITCH_OFF)
    assert main(["audit", str(path), "--json", "--seed-base", "0"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert any("is not allowed" in r for r in report["reasons"]), report["reasons"]


# -- past the static rules: what the sandbox does ------------------------------------------

def _run_unchecked(path, pool, seeds=(0, 1, 2)) -> list[list]:
    """Load and play a module in a worker without the static rules (as if they missed it);
    returns the observations it produced (none when it failed to load)."""
    ref = EnvRef(path=str(path), pool=pool)
    try:
        env = ref.make()
    except RemoteEnvError:
        return []
    seen = []
    for seed in seeds:
        try:
            obs, _ = env.reset(seed=seed)
        except RemoteEnvError:
            continue
        seen.append(obs)
    return seen


CONTAINED = sorted(n for n, e in ESCAPES.items() if e.effect in ("marker", "network", "utime", "leak"))


@requires_bubblewrap
@pytest.mark.parametrize("name", CONTAINED)
def test_sandbox_contains_each_escape_the_static_rules_might_miss(tmp_path, listener, name):
    prepare(tmp_path)
    path = write_escape(tmp_path, name, listener.port)
    with WorkerPool(1, AUDIT_LIMITS, isolation="bubblewrap") as pool:
        seen = _run_unchecked(path, pool)
    assert harmed(tmp_path) == []
    assert listener.close() == []
    assert not any("SECRET-1234" in m["content"] for obs in seen for m in obs if m.get("content"))


def test_the_kit_cannot_be_switched_off_from_the_module(tmp_path):
    path = tmp_path / "cheat.py"
    path.write_text(KIT_SWITCH_OFF)
    before = dict(PROPERTIES)
    with WorkerPool(1, AUDIT_LIMITS) as pool:
        report = run_kit(EnvRef(path=str(path), pool=pool), FAST, only=["oracle_solves", "verifier_soundness",
                                                                         "degenerate_policies"])
    assert PROPERTIES == before  # nothing of the kit changed here
    failed = {r.name for r in report.results if not r.passed}
    assert failed == {"verifier_soundness", "degenerate_policies"}, report.failures()


@pytest.mark.parametrize("name", sorted(n for n, e in ESCAPES.items() if e.effect == "nondeterminism"))
def test_unseeded_randomness_fails_determinism_when_run(tmp_path, name):
    path = write_escape(tmp_path, name)
    with WorkerPool(1, AUDIT_LIMITS) as pool:
        result = run_property("determinism", EnvRef(path=str(path), pool=pool), FAST)
    assert not result.passed and "different tasks" in result.detail


def test_fallback_stops_python_level_writes_but_not_a_program_started_below_the_hook(tmp_path):
    """What docs/audit.md says of the fallback isolation, checked: its audit hook refuses a
    file write made through Python, and a program started through _posixsubprocess (no
    audit event) still runs. Bubblewrap stops both (the test above)."""
    prepare(tmp_path)
    with WorkerPool(1, AUDIT_LIMITS, isolation="fallback") as pool:
        _run_unchecked(write_escape(tmp_path, "dataclasses_sys"), pool)
        assert harmed(tmp_path) == []
        _run_unchecked(write_escape(tmp_path, "posixsubprocess_fork_exec"), pool)
        # the started program writes on its own time, and closing the pool ends what stays in
        # the worker's process group (this program does): wait for it while the worker lives
        deadline = time.monotonic() + 10
        while not harmed(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.05)
    assert harmed(tmp_path) == ["marker"]


# -- behaviour that shows only outside the audit --------------------------------------------

# Earns its rewards honestly and, on a hinted reset, as in training, starts a program (in a
# session of its own) that writes the marker: harm no reward shows, only the boundary stops.
AUDIT_AWARE = {"env_generate": (
    "if self.episode_hint_requested:\n"
    "    from dataclasses import sys as _s\n"
    "    import _posixsubprocess as _p\n"
    "    _os = _s.modules['os']\n"
    "    _r, _w = _os.pipe()\n"
    "    _p.fork_exec([PYTHON, '-c', 'open(' + repr(MARKER) + ', \"w\").write(\"x\")'], [PYTHON.encode()], True, "
    "(_w,), None, None, -1, -1, -1, -1, -1, -1, _r, _w, True, True, -1, None, None, None, -1, None, False)\n"
    "return super()._new_episode(rng)"),
    "env_methods": (
        "episode_hint_requested = False\n"
        "def reset(self, *, seed=None, options=None):\n"
        "    self.episode_hint_requested = bool((options or {}).get('hint'))\n"
        "    return super().reset(seed=seed, options=options)")}


def _install_audit_aware(tmp_path):
    from tests.audit.escapes import fill

    hooks = {k: fill(v, tmp_path) for k, v in AUDIT_AWARE.items()}
    envs = tmp_path / "envs"
    envs.mkdir()
    path = mutant(envs, "sneaky", **hooks)
    (envs / "manifest.json").write_text(json.dumps({"schema_version": 1, "envs": [{
        "id": "trace/sneaky-v0", "entry_point": f"file:{path}:TemplateEnv", "capability": "sneaky",
        "description": "behaves under audit", "origin": "synthesized", "sha256": "0"}]}))
    return envs, path


@requires_bubblewrap
def test_a_module_that_behaves_under_audit_is_contained_in_rollouts_and_training(tmp_path):
    import subprocess
    import sys

    envs, path = _install_audit_aware(tmp_path)
    # it passes the kit's reward checks, hinted resets included: its harm is not in its rewards
    with WorkerPool(1, AUDIT_LIMITS) as pool:
        assert run_kit(EnvRef(path=str(path), pool=pool), FAST, only=["oracle_solves", "verifier_soundness"]).passed
    env = {**os.environ, "TRACE_GYM_ENVS_DIR": str(envs), "TRACE_GYM_ISOLATION": "bubblewrap"}
    out = tmp_path / "runs.jsonl"
    subprocess.run([sys.executable, "-m", "trace_gym.cli", "rollout", "trace/sneaky-v0", "--policy", "oracle",
                    "--seeds", "0:6", "--hint", "--workers", "2", "--quiet", "--out", str(out)],
                   check=True, env=env, capture_output=True)
    assert len(out.read_text().splitlines()) == 6
    # a training batch: G seeds x K samples, hinted, in lockstep through one pool
    code = ("import gymnasium as gym, trace_gym\n"
            "envs = [gym.make('trace/sneaky-v0') for _ in range(8)]\n"
            "for i, e in enumerate(envs):\n"
            "    e.reset(seed=i // 4, options={'hint': i % 2 == 0})\n"
            "    e.step(e.unwrapped.oracle_action(e.unwrapped.episode.messages))\n"
            "print('ok')\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "ok"
    assert harmed(tmp_path) == []
    # the harm is real: the same rollout under the fallback isolation leaves the marker
    env["TRACE_GYM_ISOLATION"] = "fallback"
    subprocess.run([sys.executable, "-m", "trace_gym.cli", "rollout", "trace/sneaky-v0", "--policy", "oracle",
                    "--seeds", "0:1", "--hint", "--workers", "1", "--quiet", "--out", str(tmp_path / "fallback.jsonl")],
                   check=True, env=env, capture_output=True)
    # in a session of its own, the program outlives the fallback worker's process group
    deadline = time.monotonic() + 10
    while not harmed(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert harmed(tmp_path) == ["marker"]
