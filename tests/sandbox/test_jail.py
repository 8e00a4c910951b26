"""The command jail: a command runs in its repository and nowhere else, sees none of
trace_gym's sources nor any site-packages, and a fork bomb, an endless loop, a 10 GB write
or an output flood ends that command with an error result, leaving nothing behind."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import sys
import time
import tracemalloc
import uuid
from pathlib import Path

import pytest

from trace_gym.errors import InvalidConfig
from trace_gym.sandbox import jail, proctree
from trace_gym.sandbox.isolation import INSTALL_HINT, IsolationUnavailable
from trace_gym.sandbox.jail import (
    TMP_BYTES,
    CommandLimits,
    CommandResult,
    python_argv,
    run_in_repo,
    sandbox_available,
)

AVAILABLE, WHY = sandbox_available()
needs_sandbox = pytest.mark.skipif(not AVAILABLE, reason=f"bubblewrap cannot run the command jail here: {WHY}")


def test_the_sandbox_runs_in_ci():
    if os.environ.get("CI") and not AVAILABLE:
        pytest.fail(f"bubblewrap must run the command jail in CI (.ci/run installs it): {WHY}")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    (path / "hello.txt").write_text("hello from the host\n")
    return path


def py(code: str) -> list[str]:
    return python_argv("-c", code)


def left_behind(marker: str) -> list[str]:
    """Processes whose command line holds `marker` (the sandbox's leftovers)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(f"{entry}: {cmdline[:100]}")
    return found


def timed(repo: Path, argv: list[str], **kwargs) -> tuple[CommandResult, float]:
    start = time.monotonic()
    result = run_in_repo(repo, argv, **kwargs)
    return result, time.monotonic() - start


# --- a normal command -------------------------------------------------------------------------


@needs_sandbox
def test_a_normal_command_returns_its_output_and_status(repo):
    result = run_in_repo(repo, ["sh", "-c", "cat hello.txt; pwd; id -u; echo oops >&2; exit 3"])
    assert result.returncode == 3 and not result.ok and result.limit is None and not result.timed_out
    assert result.stdout == "hello from the host\n/repo\n65534\n"
    assert result.stderr == "oops\n"
    text = result.describe()
    assert text.startswith("exit status 3") and text.index("hello from the host") < text.index("oops")
    assert run_in_repo(repo, py("print(6 * 7)")).stdout == "42\n"
    assert run_in_repo(repo, ["true"]).ok


@needs_sandbox
def test_the_repo_is_writable_and_what_is_written_stays(repo):
    result = run_in_repo(repo, ["sh", "-c", "echo made inside > new.txt && mkdir -p pkg && echo x > pkg/m.py"])
    assert result.ok, result.describe()
    assert (repo / "new.txt").read_text() == "made inside\n"
    assert (repo / "pkg" / "m.py").read_text() == "x\n"


@needs_sandbox
def test_nothing_outside_repo_and_tmp_is_writable(repo):
    marker = f"trace-gym-test-{uuid.uuid4().hex}"
    targets = ["/x", "/etc/x", "/usr/x", "/dev/x", "/root/x", "/bin/x", "/proc/x", f"{os.path.realpath(sys.base_prefix)}/x"]
    script = "; ".join(f"(echo 1 > {t}) 2>/dev/null && echo WROTE {t}" for t in targets)
    result = run_in_repo(repo, ["sh", "-c", f"{script}; echo ok > /tmp/{marker} && cat /tmp/{marker}"])
    assert "WROTE" not in result.stdout, result.stdout
    assert result.stdout.endswith("ok\n")  # /tmp is writable: a tmpfs of the sandbox's own
    assert not os.path.exists(f"/tmp/{marker}")


@needs_sandbox
def test_there_is_no_network(repo):
    code = ("import socket\ns = socket.socket()\ns.settimeout(3)\n"
            "try:\n    s.connect(('1.1.1.1', 53))\n    print('connected')\nexcept OSError as e:\n    print('refused', e)")
    result = run_in_repo(repo, py(code))
    assert result.stdout.startswith("refused"), result.describe()


@needs_sandbox
def test_trace_gym_sources_and_site_packages_are_unreadable(repo):
    spec = importlib.util.find_spec("trace_gym")
    source_dirs = [os.path.realpath(p) for p in spec.submodule_search_locations]
    package_dirs = [p for p in {*site.getsitepackages(), "/usr/lib/python3/dist-packages",
                                *(str(p) for p in Path("/usr/local/lib").glob("python3*/*-packages"))}
                    if os.path.isdir(p) and os.listdir(p)]
    assert package_dirs, "this test needs a non-empty site-packages directory on the host"
    files = [os.path.join(d, "__init__.py") for d in source_dirs]
    files += [os.path.join(d, min(os.listdir(d))) for d in package_dirs]
    # What the host's /work, /root, /home and /tmp hold, but for the path to the interpreter.
    bound = [os.path.realpath(sys.base_prefix), os.path.realpath(sys.executable)]
    tops = {}
    for top in ("/work", "/root", "/home", "/tmp"):
        allowed = {Path(b).relative_to(top).parts[0] for b in bound if b.startswith(top + "/")}
        if os.path.isdir(top):
            tops[top] = sorted(set(os.listdir(top)) - allowed)
    code = f"""
import json, os
out = {{}}
for d in {json.dumps(source_dirs + package_dirs + list(tops))}:
    try:
        out[d] = sorted(os.listdir(d))
    except OSError as e:
        out[d] = type(e).__name__
for f in {json.dumps(files)}:
    try:
        open(f, 'rb').read(1)
        out[f] = 'READ'
    except OSError as e:
        out[f] = type(e).__name__
try:
    import trace_gym
    out['import'] = 'imported'
except ImportError:
    out['import'] = 'ImportError'
print(json.dumps(out))
"""
    result = run_in_repo(repo, py(code))
    assert result.ok, result.describe()
    seen = json.loads(result.stdout)
    for d in source_dirs + package_dirs:
        assert seen[d] in ([], "FileNotFoundError", "PermissionError"), (d, seen[d])
    for f in files:
        assert seen[f] != "READ", f
    for top, host_entries in tops.items():
        inside = seen[top] if isinstance(seen[top], list) else []
        assert not set(inside) & set(host_entries), (top, inside)
    assert seen["import"] == "ImportError"


@needs_sandbox
def test_the_environment_is_cleared(repo, monkeypatch):
    monkeypatch.setenv("TRACE_GYM_TEST_SECRET", "leak")
    result = run_in_repo(repo, py("import os, json; print(json.dumps(dict(os.environ)))"))
    env = json.loads(result.stdout)
    assert "TRACE_GYM_TEST_SECRET" not in env
    assert {k: env[k] for k in ("PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE")} == dict(jail.SANDBOX_ENV)


@needs_sandbox
def test_stdin_is_delivered(repo):
    result = run_in_repo(repo, py("import sys; print(sys.stdin.read().upper())"), stdin=b"hello")
    assert result.stdout == "HELLO\n"
    big = run_in_repo(repo, ["wc", "-c"], stdin=b"z" * (3 << 20))  # more than a pipe holds
    assert big.stdout.strip() == str(3 << 20)
    assert run_in_repo(repo, ["true"], stdin=b"x" * (1 << 20)).ok  # a command that never reads it


@needs_sandbox
def test_binds_are_read_only_and_nothing_else_is_added(repo, tmp_path):
    extra = tmp_path / "runner.py"
    extra.write_text("print('runner ran')\n")
    script = f"{python_argv()[0]} -I -S /opt/t/runner.py && ((echo x >> /opt/t/runner.py) 2>/dev/null || echo read-only)"
    result = run_in_repo(repo, ["sh", "-c", script], binds={str(extra): "/opt/t/runner.py"})
    assert result.stdout == "runner ran\nread-only\n", result.describe()
    assert extra.read_text() == "print('runner ran')\n"


@needs_sandbox
def test_a_background_process_does_not_outlive_the_command(repo):
    marker = f"trace-gym-bg-{uuid.uuid4().hex}"
    script = f"{python_argv()[0]} -c 'import time; time.sleep(60)  # {marker}' & echo started"
    result, took = timed(repo, ["sh", "-c", script])
    assert result.ok and result.stdout == "started\n" and took < 5
    time.sleep(0.2)
    assert left_behind(marker) == []


# --- limits -------------------------------------------------------------------------------------


@needs_sandbox
def test_a_python_fork_bomb_ends_with_an_error_and_leaves_nothing(repo):
    marker = f"trace-gym-bomb-{uuid.uuid4().hex}"
    code = f"import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n# {marker}"
    result, took = timed(repo, py(code), limits=CommandLimits(wall_seconds=3))
    assert not result.ok and result.limit in ("processes", "wall clock"), result
    assert took < 3 + 3
    assert left_behind(marker) == []


@needs_sandbox
@pytest.mark.skipif(shutil.which("bash") is None, reason="the shell fork bomb needs bash (dash's ':' is a builtin)")
def test_a_shell_fork_bomb_ends_and_leaves_nothing(repo):
    marker = f"trace-gym-bomb-{uuid.uuid4().hex}"
    # As written, the first shell returns at once, and with it the PID namespace: the bomb dies.
    result, took = timed(repo, ["bash", "-c", f":(){{ :|:& }};: # {marker}"], limits=CommandLimits(wall_seconds=3))
    assert took < 3 + 3 and (result.limit == "processes" or result.ok), result
    time.sleep(0.1)
    assert left_behind(marker) == []
    # Held open by a first shell that waits, it runs into the cap and then the wall clock.
    result, took = timed(repo, ["bash", "-c", f":(){{ :|:& }};:; sleep 30 # {marker}"],
                         limits=CommandLimits(wall_seconds=3))
    assert not result.ok and result.timed_out and result.limit in ("processes", "wall clock"), result
    assert took < 3 + 3
    assert left_behind(marker) == []


FORK_200 = ("import os, time\nn = 0\nfor i in range(200):\n    try:\n        if os.fork() == 0:\n"
            "            time.sleep(5)\n            os._exit(0)\n        n += 1\n    except OSError:\n        break\n"
            "print(n)")


@needs_sandbox
@pytest.mark.parametrize("how", ["here", "tree count"])
def test_the_process_cap_holds(repo, monkeypatch, how):
    kernel_cap, isolation = jail.process_cap(), "bubblewrap"
    if how == "tree count":  # the fallback without a writable pids cgroup: only the count holds
        monkeypatch.setattr(proctree, "pids_cgroup_base", lambda: None)
        kernel_cap, isolation = None, "fallback"
    result = run_in_repo(repo, py(FORK_200), limits=CommandLimits(processes=8, wall_seconds=10), isolation=isolation)
    if kernel_cap is None:  # killed when its tree grew past the cap
        assert result.returncode is None and result.limit == "processes" and not result.timed_out, result
    else:  # the kernel refused its forks past the cap
        assert result.returncode == 0 and int(result.stdout) < 8, result
        if kernel_cap == "a pids cgroup (pids.max)":
            assert result.limit == "processes"


def test_under_bubblewrap_the_kernel_caps_processes_whoever_runs_trace_gym():
    # A root caller's sandbox runs as an unprivileged host user, whom RLIMIT_NPROC holds.
    assert jail.process_cap() == "RLIMIT_NPROC inside the sandbox's user namespace"


@needs_sandbox
def test_an_endless_loop_ends_by_cpu_time(repo):
    result, took = timed(repo, py("while True: pass"), limits=CommandLimits(cpu_seconds=2))
    assert result.limit == "cpu time" and not result.timed_out and not result.ok, result
    assert took < 2 + 3
    assert "cpu time" in result.describe()


@needs_sandbox
def test_a_10_gb_write_ends_by_file_size(repo):
    limit = 8 << 20
    code = "chunk = b'x' * (1 << 20)\nwith open('/repo/big', 'wb') as f:\n    for _ in range(10 * 1024):\n        f.write(chunk)"
    result, took = timed(repo, py(code), limits=CommandLimits(file_bytes=limit))
    assert result.limit == "file size" and not result.ok, result
    assert (repo / "big").stat().st_size <= limit
    assert took < 10
    # A program that does not ignore SIGXFSZ (Python does) is ended by it.
    shell = run_in_repo(repo, ["sh", "-c", "head -c 20000000 /dev/zero > /repo/big2"], limits=CommandLimits(file_bytes=limit))
    assert shell.limit == "file size" and shell.returncode == 128 + 25, shell
    assert (repo / "big2").stat().st_size <= limit


@needs_sandbox
def test_a_10_gb_write_in_many_files_ends_by_repository_size(repo):
    """RLIMIT_FSIZE bounds each file; the repository's size in all is the watchdog's."""
    cap = 16 << 20
    shell = "i=0; while [ $i -lt 10240 ]; do head -c 1048576 /dev/zero > /repo/f$i; i=$((i+1)); done"
    result, took = timed(repo, ["sh", "-c", shell], limits=CommandLimits(repo_bytes=cap))
    assert result.limit == "repository size" and result.returncode is None and not result.ok, result
    written = sum(f.stat().st_size for f in repo.iterdir())
    assert written < cap + (512 << 20) and took < 10  # overshoot: what the disk takes in 0.1 s


@needs_sandbox
def test_the_private_tmp_holds_at_most_tmp_bytes(repo):
    code = ("import os\nchunk = b'x' * (1 << 20)\n"
            "for i in range(200):\n    with open(f'/tmp/f{i}', 'wb') as f:\n        f.write(chunk)\n")
    result = run_in_repo(repo, py(code))
    assert not result.ok and "No space left on device" in result.stderr, result.describe()[:300]
    assert TMP_BYTES < 200 << 20


HOLD = ("import os, sys, time\nfor _ in range({n} - 1):\n    if os.fork() == 0:\n        break\n"
        "block = bytearray({mib} << 20)\nfor i in range(0, len(block), 4096):\n    block[i] = 1\n"
        "print('held', flush=True)\ntime.sleep(3)")


@needs_sandbox
def test_a_commands_processes_are_capped_together(repo):
    # Three processes of 400 MiB each: each is far under its own address-space limit, together past 1 GiB.
    result, took = timed(repo, py(HOLD.format(n=3, mib=400)), limits=CommandLimits(memory_bytes=1 << 30))
    assert result.limit == "memory" and result.returncode is None and not result.ok, result
    assert "memory limit" in result.describe() and took < 3
    # Within the share (1 GiB less /tmp and /dev/shm): all three run to the end.
    assert jail.process_memory(CommandLimits()) == (1 << 30) - TMP_BYTES - (64 << 20)
    result = run_in_repo(repo, py(HOLD.format(n=3, mib=150)), limits=CommandLimits(memory_bytes=1 << 30))
    assert result.ok and result.stdout == "held\n" * 3, result


@needs_sandbox
def test_scratch_space_counts_against_the_memory(repo):
    limits = CommandLimits(memory_bytes=256 << 20)
    assert jail.tmp_bytes(limits) == 64 << 20 and jail.shm_bytes(limits) == 32 << 20
    code = "for i in range(4):\n    open(f'/tmp/big{i}', 'wb').write(b'x' * (30 << 20))"
    assert "No space left on device" in run_in_repo(repo, py(code), limits=limits).stderr


@needs_sandbox
def test_a_memory_hog_ends_by_memory(repo):
    result = run_in_repo(repo, py("x = bytearray(2 << 30)"), limits=CommandLimits(memory_bytes=1 << 30))
    assert result.limit == "memory" and not result.ok, result


@needs_sandbox
def test_an_output_flood_is_cut_and_costs_no_memory(repo):
    code = "import sys\nb = b'y' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.buffer.write(b)"
    tracemalloc.start()
    try:
        result, took = timed(repo, py(code), limits=CommandLimits(wall_seconds=20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok and took < 20, result.describe()[:300]
    kept = 32 << 10
    # Lengths first: a failing == on a gigabyte of text would make pytest diff it.
    assert len(result.stdout) < kept + 100, f"kept {len(result.stdout)} characters of 1 GiB of output"
    assert result.stdout == "y" * kept + f"\n[... {(1 << 30) - kept} bytes dropped]"
    assert peak < 16 << 20, f"reading 1 GiB of output held {peak} bytes"
    endless, took = timed(repo, ["yes"], limits=CommandLimits(wall_seconds=2, output_bytes=100))
    assert endless.timed_out and endless.limit == "wall clock" and took < 2 + 3
    assert endless.stdout.startswith("y\n" * 50 + "\n[... ") and endless.stdout.endswith(" bytes dropped]")


@needs_sandbox
def test_a_sleeping_command_is_killed_at_the_wall_clock(repo):
    result, took = timed(repo, ["sleep", "100"], limits=CommandLimits(wall_seconds=1))
    assert result.timed_out and result.returncode is None and result.limit == "wall clock" and not result.ok
    assert 1 <= took < 1 + 2
    assert "wall clock" in result.describe()
    silent, took = timed(repo, ["sh", "-c", "exec >&- 2>&-; sleep 100"], limits=CommandLimits(wall_seconds=1))
    assert silent.timed_out and took < 1 + 2  # closing its output does not end the wait for it


@needs_sandbox
def test_a_missing_program_is_a_result_not_an_exception(repo):
    result = run_in_repo(repo, ["no-such-program-here"])
    assert result.returncode == 127 and not result.ok


# --- configuration and the fallback -------------------------------------------------------------


@pytest.mark.parametrize(("field", "value"), [
    ("cpu_seconds", 0), ("cpu_seconds", 1.5), ("cpu_seconds", True), ("memory_bytes", 1 << 20),
    ("file_bytes", -1), ("processes", 0), ("processes", "64"), ("wall_seconds", 0), ("wall_seconds", float("inf")),
    ("wall_seconds", float("nan")), ("output_bytes", -1), ("output_bytes", None),
])
def test_command_limits_reject_bad_values(field, value):
    with pytest.raises(InvalidConfig) as info:
        CommandLimits(**{field: value})
    assert f"CommandLimits.{field}={value!r}" in str(info.value)


def test_command_limits_take_good_values():
    limits = CommandLimits(cpu_seconds=1, memory_bytes=64 << 20, file_bytes=0, processes=1, wall_seconds=0.5,
                           output_bytes=0)
    assert limits.wall_seconds == 0.5


def test_bad_repos_and_binds_are_refused(repo, tmp_path):
    source = importlib.util.find_spec("trace_gym").submodule_search_locations[0]
    for bad in (tmp_path / "missing", Path(source).parent, Path(source) / "coding"):
        with pytest.raises(InvalidConfig):
            run_in_repo(bad, ["true"], isolation="fallback")
    with pytest.raises(InvalidConfig):
        run_in_repo(repo, ["true"], binds={source: "/src"}, isolation="fallback")
    with pytest.raises(InvalidConfig):
        run_in_repo(repo, ["true"], binds={str(repo): "relative"}, isolation="fallback")
    with pytest.raises(InvalidConfig):
        run_in_repo(repo, [], isolation="fallback")
    with pytest.raises(InvalidConfig):
        run_in_repo(repo, ["true"], isolation="chroot")


def test_without_bubblewrap_it_raises_unless_the_fallback_is_asked_for(repo, monkeypatch):
    monkeypatch.setattr(jail, "sandbox_available", lambda: (False, "bwrap is not installed"))
    monkeypatch.delenv("TRACE_GYM_ISOLATION", raising=False)
    with pytest.raises(IsolationUnavailable) as info:
        run_in_repo(repo, ["true"])
    assert INSTALL_HINT in str(info.value) and "bwrap is not installed" in str(info.value)
    monkeypatch.setenv("TRACE_GYM_ISOLATION", "fallback")
    result = run_in_repo(repo, ["sh", "-c", "pwd; cat hello.txt"])
    assert result.ok and result.stdout == f"{os.path.realpath(repo)}\nhello from the host\n"


def test_the_fallback_keeps_the_limits_and_rewrites_sandbox_paths(repo, tmp_path):
    extra = tmp_path / "data.txt"
    extra.write_text("bound\n")
    result = run_in_repo(repo, ["cat", "/repo/hello.txt", "/opt/data.txt"], binds={str(extra): "/opt/data.txt"},
                         isolation="fallback")
    assert result.stdout == "hello from the host\nbound\n"
    slept, took = timed(repo, ["sleep", "100"], limits=CommandLimits(wall_seconds=1), isolation="fallback")
    assert slept.timed_out and slept.limit == "wall clock" and took < 3
    loop = run_in_repo(repo, py("while True: pass"), limits=CommandLimits(cpu_seconds=1), isolation="fallback")
    assert loop.limit == "cpu time", loop
    for redirect in ("", ">/dev/null 2>&1"):  # holding the command's pipes, or not
        marker = f"trace-gym-bg-{uuid.uuid4().hex}"
        script = f"{python_argv()[0]} -c 'import time; time.sleep(60)  # {marker}' {redirect} & echo started"
        background, took = timed(repo, ["sh", "-c", script], isolation="fallback")
        assert background.ok and took < 1.5  # its session is killed as the command ends
        time.sleep(0.2)
        assert left_behind(marker) == [], redirect
