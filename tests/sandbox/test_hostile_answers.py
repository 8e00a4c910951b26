"""The trusted side reads every worker answer as hostile: size, depth and episode caps,
numbers that are not finite, and a worker's programs that would outlive it or hold its pipes."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from tests.audit.mutants import mutant
from trace_gym.sandbox.isolation import bubblewrap_status
from trace_gym.sandbox.pool import MAX_ANSWER_BYTES, MAX_DEPTH, RemoteEnvError, WorkerLost, WorkerPool, read_answer
from trace_gym.sandbox.proxy import MAX_EPISODE_BYTES
from trace_gym.testing import policies
from trace_gym.testing.envref import EnvRef

requires_bubblewrap = pytest.mark.skipif(not bubblewrap_status()[0], reason="bubblewrap cannot run here")


# -- the answer reader --------------------------------------------------------------------

@pytest.mark.parametrize("text", ["NaN", "[1, Infinity]", '{"r": -Infinity}', "[1e999]", "-1e400"])
def test_numbers_that_are_not_finite_are_refused(text):
    with pytest.raises(ValueError, match="not finite"):
        read_answer(text.encode())


def test_nesting_deeper_than_the_cap_is_refused_and_the_cap_itself_is_read():
    assert read_answer(("[" * MAX_DEPTH + "]" * MAX_DEPTH).encode()) is not None
    with pytest.raises(ValueError, match="deeper"):
        read_answer(('{"a":' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1)).encode())
    # brackets inside strings are text, not nesting
    assert read_answer(json.dumps(["[" * 500]).encode()) == ["[" * 500]


@pytest.mark.parametrize("text", [b"", b"{", b"[1] [2]", b"\xff", b"[1]x"])
def test_what_is_not_one_json_value_is_refused(text):
    with pytest.raises(ValueError, match="not"):
        read_answer(text)


# -- a worker that sends too much ----------------------------------------------------------

def _remote(tmp_path: Path, name: str, pool: WorkerPool, **hooks: str):
    """The template env with `hooks`, loaded unchecked (no static rules) in `pool`."""
    return EnvRef(path=str(mutant(tmp_path, name, **hooks)), pool=pool).make()


PADDED_STEP = {"env_methods": (
    "def step(self, action):\n"
    "    obs, reward, terminated, truncated, info = super().step(action)\n"
    "    info['pad'] = str(len(obs)) + 'x' * PAD\n"
    "    return obs, reward, terminated, truncated, info")}


@pytest.mark.parametrize("pad, words", [
    ("str(len(obs)) + 'x' * " + str(MAX_ANSWER_BYTES + 10), "longer than"),
    ("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), "deeper"),
])
def test_a_step_answer_over_a_cap_loses_the_worker(tmp_path, pad, words):
    hooks = {"env_methods": PADDED_STEP["env_methods"].replace("str(len(obs)) + 'x' * PAD", pad)}
    with WorkerPool(1) as pool:
        env = _remote(tmp_path, "over_a_cap", pool, **hooks)
        env.reset(seed=1)
        with pytest.raises(WorkerLost, match=words):
            env.step("hello")


def test_an_episode_over_the_byte_cap_loses_the_worker(tmp_path):
    # each answer under the cap, the episode over it: what the client holds stays bounded
    hooks = {"env_methods": PADDED_STEP["env_methods"].replace("PAD", str(MAX_ANSWER_BYTES // 2)),
             "task": "return Task('retail', order['order_id'], reason, pre.messages, hidden=[], max_steps=100), world"}
    with WorkerPool(1) as pool:
        env = _remote(tmp_path, "big_episode", pool, **hooks)
        env.reset(seed=1)
        with pytest.raises(WorkerLost, match=f"more than {MAX_EPISODE_BYTES // 2**20} MiB in one episode"):
            for _ in range(2 * MAX_EPISODE_BYTES // MAX_ANSWER_BYTES + 2):
                env.step({"name": "get_order_details", "arguments": {"order_id": "#W0"}})


def test_a_hinted_reset_with_megabytes_of_info_is_refused_not_held(tmp_path):
    hooks = {"env_methods": (
        "def reset(self, *, seed=None, options=None):\n"
        "    obs, info = super().reset(seed=seed, options=options)\n"
        "    if (options or {}).get('hint'):\n"
        "        info['pad'] = [str(seed)] * 4_000_000\n"
        "    return obs, info")}
    with WorkerPool(1) as pool:
        env = _remote(tmp_path, "hinted_info", pool, **hooks)
        env.reset(seed=1)
        with pytest.raises(WorkerLost, match="longer than"):
            env.reset(seed=2, options={"hint": True})


def test_a_nan_reward_is_refused_on_the_wire(tmp_path):
    hooks = {"verify": "ok = final_world == expected or True", "one_write": "ok = float('nan')"}
    with WorkerPool(1) as pool:
        env = _remote(tmp_path, "nan_reward", pool, **hooks)
        with pytest.raises(WorkerLost, match="not finite"):
            policies.play(env, 1, policies.oracle)


# -- programs a worker starts --------------------------------------------------------------

# Starts a program in a session of its own that holds the worker's stderr and sleeps: the
# audit hook sees no event for _posixsubprocess.fork_exec, so only the OS boundary stops it.
DETACHED = {"env_methods": (
    "def reset(self, *, seed=None, options=None):\n"
    "    from dataclasses import sys as _s\n"
    "    import _posixsubprocess as _p\n"
    "    _os = _s.modules['os']\n"
    "    _r, _w = _os.pipe()\n"
    "    _p.fork_exec([_s.executable, '-c', 'import time; time.sleep(120)  # TOKEN'], [_s.executable.encode()], "
    "True, (_w,), None, None, -1, -1, -1, -1, -1, -1, _r, _w, True, True, -1, None, None, None, -1, None, False)\n"
    "    return super().reset(seed=seed, options=options)")}


def _running(token: str) -> list[int]:
    """Processes whose command line holds `token`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if token.encode() in cmdline and b"pytest" not in cmdline:
                found.append(int(entry))
    return found


def _start_detached(tmp_path: Path, isolation: str) -> tuple[str, float]:
    """Make the detached program start in a worker, close the pool; (token, close time)."""
    token = f"trace-gym-detached-{os.getpid()}-{time.monotonic_ns()}"
    hooks = {"env_methods": DETACHED["env_methods"].replace("TOKEN", token)}
    pool = WorkerPool(1, isolation=isolation)
    env = _remote(tmp_path, "detached", pool, **hooks)
    env.reset(seed=1)
    deadline = time.monotonic() + 10
    while not _running(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(token), "the detached program did not start"
    start = time.monotonic()
    pool.close()
    return token, time.monotonic() - start


@requires_bubblewrap
def test_nothing_a_sandboxed_worker_starts_outlives_it(tmp_path):
    token, seconds = _start_detached(tmp_path, "bubblewrap")
    assert seconds < 10
    deadline = time.monotonic() + 5
    while _running(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _running(token) == []


def test_a_program_holding_the_workers_stderr_does_not_hang_its_close(tmp_path):
    """Under the fallback a program in a session of its own escapes the worker's process
    group (said in docs/audit.md); closing the pool still returns at once."""
    token, seconds = _start_detached(tmp_path, "fallback")
    try:
        assert seconds < 10
    finally:
        for pid in _running(token):
            os.kill(pid, signal.SIGKILL)


def test_a_fallback_worker_dies_with_the_process_that_drives_it(tmp_path):
    """A worker busy in an endless reset never reads the end of its input: it is killed
    when the process driving it dies, not left running."""
    import subprocess

    path = mutant(tmp_path, "endless", env_generate="while True:\n    pass")
    script = (f"import sys, threading, time; sys.path[:0] = {sys.path!r}\n"
              "from trace_gym.sandbox.pool import WorkerPool\n"
              "from trace_gym.testing.envref import EnvRef\n"
              "pool = WorkerPool(1, isolation='fallback')\n"
              f"env = EnvRef(path={str(path)!r}, pool=pool).make()\n"
              "print(pool.workers[0].proc.pid, flush=True)\n"
              "threading.Thread(target=env.reset, daemon=True).start()\n"
              "time.sleep(60)\n")
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker = int(driver.stdout.readline())
    time.sleep(0.5)  # the worker is in its endless reset
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 5
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        assert not _alive(worker)
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        return "zombie" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


# -- code that dataclasses would generate from a field name ---------------------------------

_NAME = "\"__class__,print('ran')\""  # pasted by dataclasses into __eq__'s code: runs print
DATACLASS_ROUTES = {
    "type_made_class": ("from dataclasses import dataclass as _d\n"
                        f"_E = _d(init=False)(type('_E', (), {{'__annotations__': {{{_NAME}: int}}}}))\n"
                        "_E() == _E()"),
    "renamed_field": ("from dataclasses import dataclass as _d, fields as _f\n"
                      "@_d\nclass _B:\n    x: int = 0\n"
                      f"_f(_B)[0].name = {_NAME}\n"
                      "@_d(init=False)\nclass _C(_B):\n    pass\n"
                      "_C() == _C()"),
}


@pytest.mark.parametrize("route", sorted(DATACLASS_ROUTES))
def test_a_field_name_that_is_code_is_refused_in_the_worker(tmp_path, route):
    path = mutant(tmp_path, route, imports=DATACLASS_ROUTES[route])
    with WorkerPool(1) as pool, pytest.raises(RemoteEnvError, match="is not an identifier"):
        EnvRef(path=str(path), pool=pool).make()
