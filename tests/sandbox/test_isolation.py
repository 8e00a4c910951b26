"""What the worker's isolation stops, seen from inside: a module (past the static rules)
starts a program below the audit hook and reports what that program could do. The README's
table of layers states exactly these facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.audit.mutants import mutant
from tests.audit.test_escapes import Listener
from tests.conftest import requires_bubblewrap
from trace_gym.sandbox import EnvSource, Limits, RemoteEnv, WorkerPool, resolve
from trace_gym.sandbox.isolation import readable_paths

PROBE = r'''
import json, os, socket
f = {"uid": os.getuid(), "pid": os.getpid(), "root": sorted(os.listdir("/"))}
f["capabilities"] = open("/proc/self/status").read().split("CapEff:")[1].split()[0]
f["etc_passwd"] = os.path.exists("/etc/passwd")
f["home"] = os.path.exists("/root/.bashrc") or os.path.exists("/home")
try:
    open(MODULE_DIR + "/written", "w").close()
    f["module_dir_writable"] = True
except OSError:
    f["module_dir_writable"] = False
try:
    open(LIBRARY_DIR + "/written", "w").close()
    f["library_writable"] = True
except OSError:
    f["library_writable"] = False
try:
    open("/tmp/scratch", "w").close()
    f["tmp_writable"] = True
except OSError:
    f["tmp_writable"] = False
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).sendall(b"probe")
    f["network"] = True
except OSError:
    f["network"] = False
print(json.dumps(f))
'''

# Start the probe with _posixsubprocess (no audit event), read its report from a pipe.
RUN_PROBE = """\
from dataclasses import sys as _s
import _posixsubprocess as _p
_os = _s.modules['os']
_r, _w = _os.pipe()
_er, _ew = _os.pipe()
_pid = _p.fork_exec([_s.executable, '-c', PROBE], [_s.executable.encode()], True, (_w, _ew), None, None, -1, -1, -1, _w, -1, -1, _er, _ew, True, False, -1, None, None, None, -1, None, False)
_os.close(_w)
_os.close(_ew)
FACTS = b''
while True:
    _chunk = _os.read(_r, 65536)
    if not _chunk:
        break
    FACTS += _chunk
_os.waitpid(_pid, 0)
FACTS = FACTS.decode()"""


def _facts(tmp_path, isolation: str) -> dict:
    server = Listener()
    import trace_gym

    library = str(Path(trace_gym.__file__).parent)
    probe = (PROBE.replace("MODULE_DIR", repr(str(tmp_path))).replace("LIBRARY_DIR", repr(library))
             .replace("PORT", str(server.port)))
    path = mutant(tmp_path, "probe", imports=f"PROBE = {probe!r}\n{RUN_PROBE}", user="pre.user(FACTS)")
    with WorkerPool(1, Limits(memory_bytes=2 * 2**30, request_seconds=20), isolation=isolation) as pool:
        obs, _ = RemoteEnv(EnvSource.from_file(path), pool=pool).reset(seed=0)
    received = server.close()
    facts = json.loads(obs[1]["content"])
    facts["server_received"] = received
    return facts


@requires_bubblewrap
def test_bubblewrap_worker_is_unprivileged_offline_and_sees_only_what_it_needs(tmp_path):
    facts = _facts(tmp_path, "bubblewrap")
    assert facts["uid"] == 65534 and facts["capabilities"] == "0000000000000000"
    assert facts["pid"] < 10  # its own PID namespace
    assert not facts["etc_passwd"] and not facts["home"]  # no view of the host's files
    # the system's library folders, and the top folder of each path the worker may read
    # (the checkout's, the interpreter's): nothing else of the host's root
    bound = {Path(p).parts[1] for p in readable_paths()}
    assert set(facts["root"]) <= {"tmp", "dev", "proc", "usr", "lib", "lib64", "lib32", "etc"} | bound
    assert "home" not in facts["root"] or "home" in bound
    assert not facts["library_writable"]  # the interpreter, site-packages and trace_gym are read-only
    assert facts["tmp_writable"] and facts["module_dir_writable"]  # its private tmpfs under /tmp, gone with it:
    assert not (tmp_path / "written").exists()  # nothing reaches the host's /tmp
    assert not facts["network"] and facts["server_received"] == []


def test_fallback_worker_has_no_network_where_a_namespace_is_available_and_nothing_else(tmp_path):
    isolation = resolve("fallback")
    facts = _facts(tmp_path, "fallback")
    if isolation.network_namespace:
        assert not facts["network"] and facts["server_received"] == []
    else:
        pytest.skip("no network namespace here: the fallback leaves the network open")
    # what the fallback does not stop: the host's files are visible and writable paths exist
    assert facts["etc_passwd"] and facts["module_dir_writable"] and (tmp_path / "written").exists()
    import trace_gym

    written = Path(trace_gym.__file__).parent / "written"
    assert facts["library_writable"] == written.exists()
    written.unlink(missing_ok=True)
