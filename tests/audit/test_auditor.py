"""The auditor's own process: its budgets hold whatever the trusted computation meets, its
reports cannot be redrawn by a module's words, its seeds come from a base drawn per audit,
and generated code runs under bubblewrap unless the fallback is named."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import trace_gym.audit as audit_module
from tests.audit.mutants import mutant
from tests.audit.test_audit import FAST, TIGHT
from trace_gym.audit import audit
from trace_gym.audit.lock import read_lock, stale_reason
from trace_gym.cli import main
from trace_gym.errors import InvalidConfig
from trace_gym.jsondata import sha256_bytes
from trace_gym.sandbox import isolation
from trace_gym.sandbox.pool import WorkerPool


def _running(token: str) -> list[int]:
    found = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                found.append(int(entry))
        except OSError:
            pass
    return found


# -- budgets --------------------------------------------------------------------------------

@pytest.mark.parametrize("what, words", [("sleep", "wall-clock budget"), ("detached", "wall-clock budget"),
                                         ("memory", "memory budget")])
def test_the_audit_holds_its_budgets_whatever_its_trusted_process_does(tmp_path, monkeypatch, what, words):
    monkeypatch.setattr(audit_module, "RUNNER_MODULE", "tests.audit.hostile_runner")
    monkeypatch.setenv("TRACE_GYM_TEST_RUNNER", what)
    monkeypatch.setenv("TRACE_GYM_TEST_RUNNER_PID", str(tmp_path / "pid"))
    budget = 12
    start = time.monotonic()
    report = audit(str(mutant(tmp_path, "fine")), FAST, audit_module.Limits(wall_seconds=budget), seed_base=0)
    elapsed = time.monotonic() - start
    assert not report.passed and words in (report.error or ""), report.reasons()
    assert elapsed <= budget + 15
    runner = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{runner}").exists() or "zombie" in Path(f"/proc/{runner}/status").read_text()
    for pid in _running("hostile-runner-child"):  # a program the trusted process left behind, not the module
        os.kill(pid, 9)


# A module whose every opening carries a few megabytes of words, all different: under the
# answer cap, but the kit's trusted work over them (fingerprints, the wording classifiers)
# runs long and grows.
WORDY = {"user": ("pre.user(f\"Please cancel order {order['order_id']}, reason: {reason}. I confirm. \" "
                  "+ rng.letters(2_500_000, 'abcdefghij '))")}


@pytest.mark.slow
def test_a_module_that_makes_the_kits_own_work_heavy_fails_within_the_budget(tmp_path):
    budget = 30
    start = time.monotonic()
    report = audit(str(mutant(tmp_path, "wordy", **WORDY)), FAST, audit_module.Limits(wall_seconds=budget),
                   seed_base=0)
    assert not report.passed and report.error and "budget" in report.error, report.reasons()
    assert time.monotonic() - start <= budget + 15


# -- reports ------------------------------------------------------------------------------

REDRAW = "\x1b[2K\x1b[1A\x1b[2K\r\x1b[32mPASSED\x1b[0m \u202e"


def test_a_modules_words_cannot_redraw_the_text_report(tmp_path, capsys):
    path = mutant(tmp_path, "redraw", imports=f"raise ImportError({REDRAW!r})")
    assert main(["audit", str(path), "--no-record", "--seed-base", "0", "--timeout", "60"]) == 1
    out = capsys.readouterr().out
    assert "the module failed to load" in out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "\\x1b[32mPASSED" in out and "FAILED" in out


# -- seeds --------------------------------------------------------------------------------

def test_each_audit_draws_its_seed_base_and_a_given_base_is_recorded(tmp_path, capsys):
    path = mutant(tmp_path, "fine")
    refused = mutant(tmp_path, "refused", imports="import socket")
    bases = {audit(str(refused), FAST, TIGHT).seed_base for _ in range(3)}
    assert len(bases) == 3 and all(type(b) is int for b in bases)
    report = audit(str(path), FAST, TIGHT, seed_base=1234)
    assert report.passed and report.seed_base == 1234
    entry = read_lock(tmp_path)["entries"][sha256_bytes(path.read_bytes())]
    assert entry["seed_base"] == 1234 and entry["isolation"] == "bubblewrap"
    assert main(["audit", str(refused), "--seed-base", "77"]) == 1
    assert "seed base 77" in capsys.readouterr().out
    with pytest.raises(InvalidConfig, match="seed_base"):
        audit(str(path), FAST, TIGHT, seed_base=-1)


# -- isolation by default -----------------------------------------------------------------

def test_without_bubblewrap_generated_code_does_not_run_unless_the_fallback_is_named(tmp_path, monkeypatch):
    monkeypatch.setattr(isolation, "bubblewrap_status", lambda: (False, "bwrap is not installed"))
    monkeypatch.delenv("TRACE_GYM_ISOLATION", raising=False)
    with pytest.raises(isolation.IsolationUnavailable, match="apt-get install bubblewrap"):
        WorkerPool(1)
    path = mutant(tmp_path, "fine")
    report = audit(str(path), FAST, TIGHT, seed_base=0)
    assert not report.passed and report.results == []
    assert "--isolation fallback" in report.error and "not installed" in report.error
    assert not (tmp_path / "audit_lock.json").exists()
    with pytest.raises(InvalidConfig, match="allowed: bubblewrap, fallback"):
        isolation.resolve("auto")

    named = audit(str(path), FAST, TIGHT, seed_base=0, isolation="fallback")
    assert named.passed and "FALLBACK" in named.isolation and named.recorded
    entry = read_lock(tmp_path)["entries"][sha256_bytes(path.read_bytes())]
    assert entry["isolation"] == "fallback"
    assert "fallback isolation" in stale_reason(entry)  # not a boundary: it holds only where asked for
    monkeypatch.setenv("TRACE_GYM_ISOLATION", "fallback")
    assert stale_reason(entry) is None
