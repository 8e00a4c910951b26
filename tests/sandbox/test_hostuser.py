"""Neither sandbox is host root, whoever runs trace-gym: from inside a coding command and
inside an env worker, the kernel's settings cannot be opened for writing and root's own
files cannot be read; what a command writes belongs to an unprivileged host user. CI runs
these as root, the case where bubblewrap alone mapped the sandbox to host uid 0."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.audit.mutants import mutant
from tests.conftest import requires_bubblewrap
from tests.sandbox.test_isolation import RUN_PROBE
from tests.sandbox.test_jail import needs_sandbox
from trace_gym.sandbox import EnvSource, Limits, RemoteEnv, WorkerPool, hostuser
from trace_gym.sandbox.jail import python_argv, run_in_repo

SETTINGS = ("/proc/sys/kernel/core_pattern", "/proc/sys/vm/stat_interval", "/proc/sys/kernel/modprobe")
ROOT_ONLY = ("/proc/sys/kernel/cad_pid", "/proc/timer_list", "/proc/sys/kernel/usermodehelper/bset")

PROBE = f"""
import json, os
def opens(path, mode):
    try:
        open(path, mode).close()  # for writing: opened, nothing written (a sysctl ignores truncation)
        return True
    except OSError:
        return False
print(json.dumps({{"uid": os.getuid(),
                  "writable": [p for p in {SETTINGS!r} if opens(p, "w")],
                  "readable": [p for p in {ROOT_ONLY!r} if opens(p, "r")]}}))
"""


def test_ci_runs_these_tests_as_root():
    if not os.environ.get("CI"):
        pytest.skip("outside CI, these tests run as whoever runs them")
    assert os.geteuid() == 0 and hostuser.drops_privileges()


def _check(facts: dict) -> None:
    assert facts["uid"] == 65534
    assert [p for p in SETTINGS if os.path.exists(p)], "no kernel setting to try on this host"
    assert [p for p in ROOT_ONLY if os.path.exists(p)], "no root-only file to try on this host"
    assert facts["writable"] == [] and facts["readable"] == [], facts


@needs_sandbox
def test_a_coding_command_cannot_write_kernel_settings_nor_read_root_files(tmp_path):
    repo = tmp_path / "repo"  # under pytest's tmp folder, which only root may enter when root runs
    repo.mkdir()
    result = run_in_repo(repo, python_argv("-c", PROBE + "\nopen('/repo/made', 'w').close()"))
    assert result.ok, result.describe()
    _check(json.loads(result.stdout))
    owner = (repo / "made").stat().st_uid
    assert owner != 0 and owner == (hostuser.HOST_UID if os.geteuid() == 0 else os.geteuid())


@needs_sandbox
def test_the_shell_cannot_write_kernel_settings_either(tmp_path):
    script = "; ".join(f"(echo 1 > {p}) 2>/dev/null && echo WROTE {p}" for p in SETTINGS)
    result = run_in_repo(tmp_path, ["sh", "-c", f"{script}; cat /proc/timer_list 2>/dev/null | head -c 20; true"])
    assert result.ok and result.stdout == "", result.describe()


@requires_bubblewrap
def test_an_env_worker_cannot_write_kernel_settings_nor_read_root_files(tmp_path):
    # The probe runs as a program the module starts (below the audit hook), as an escape would.
    path = mutant(tmp_path, "probe", imports=f"PROBE = {PROBE!r}\n{RUN_PROBE}", user="pre.user(FACTS)")
    os.chmod(path, 0o600)  # a module only its owner may read is still loaded (from a snapshot)
    with WorkerPool(1, Limits(memory_bytes=2 * 2**30, request_seconds=20), isolation="bubblewrap") as pool:
        obs, _ = RemoteEnv(EnvSource.from_file(path), pool=pool).reset(seed=0)
    _check(json.loads(obs[1]["content"]))


def test_staging_binds_what_the_sandbox_user_cannot_reach_and_snapshots_what_it_cannot_read(tmp_path, monkeypatch):
    monkeypatch.setattr(hostuser, "drops_privileges", lambda: True)
    closed = tmp_path / "closed"
    (closed / "inner").mkdir(parents=True)
    closed.chmod(0o700)
    secret = tmp_path / "secret.py"
    secret.write_text("x = 1\n")
    secret.chmod(0o600)
    where, entry = hostuser.stage([str(closed / "inner"), "/usr", str(secret), "/proc/sys", "/no/such/path"])
    assert where["/usr"] == "/usr" and where["/proc/sys"] == "/proc/sys" and where["/no/such/path"] == "/no/such/path"
    staged = Path(where[str(closed / "inner")])
    assert staged.parent == Path(hostuser.STAGING.folder()) and hostuser.reachable(str(staged))
    assert entry.mounts == ((str(closed / "inner"), str(staged)),)
    copy = Path(where[str(secret)])
    assert copy.read_text() == "x = 1\n" and copy.stat().st_mode & 0o004
    argv, entry2 = hostuser.rebind(["bwrap", "--ro-bind", str(closed / "inner"), "/x", "--tmpfs", "/tmp"])
    assert argv == ["bwrap", "--ro-bind", str(staged), "/x", "--tmpfs", "/tmp"] and entry2 == entry
