"""Jailed commands asked for by an env worker: the client runs them (the worker
cannot), checks every request as hostile, and bounds how many and how long."""

from __future__ import annotations

import copy
import subprocess
import sys
import time

import gymnasium as gym
import pytest

from tests.conftest import REPO
from trace_gym.coding import DOMAIN
from trace_gym.sandbox import (
    EnvSource,
    Limits,
    RemoteEnv,
    RemoteEnvError,
    WorkerLost,
    WorkerPool,
    WorkerTimeout,
    workspace,
)
from trace_gym.sandbox.isolation import IsolationUnavailable, bubblewrap_status
from trace_gym.sandbox.jail import CommandLimits, CommandResult, sandbox_available
from trace_gym.sandbox.pool import MAX_RUNS, MAX_STDIN_BYTES, read_run_request
from trace_gym.testing import EnvRef, KitSettings, policies, run_property

needs_sandboxes = pytest.mark.skipif(not (bubblewrap_status()[0] and sandbox_available()[0]),
                                     reason="bubblewrap cannot run here")

GENERATED = REPO / "generated_envs"
SOURCES = {DOMAIN.target_env_id: EnvSource(entry_point=DOMAIN.target_entry_point),
           "trace/code_localization-v0": EnvSource.from_file(GENERATED / "code_localization.py"),
           "trace/issue_reproduction-v0": EnvSource.from_file(GENERATED / "issue_reproduction.py")}


# -- the coding envs in a worker -------------------------------------------------------------

def _episode(env, seed):
    obs, info = env.reset(seed=seed)
    steps = [(obs, info)]
    done = False
    while not done:
        obs, reward, terminated, truncated, info = env.step(policies.oracle(env, obs))
        steps.append((obs, reward, terminated, truncated, info))
        done = terminated or truncated
    return steps


@needs_sandboxes
@pytest.mark.parametrize("env_id", list(SOURCES))
def test_the_oracle_solves_each_coding_env_in_a_worker_as_in_process(env_id):
    local = gym.make(env_id).unwrapped
    with WorkerPool(1) as pool:
        remote = RemoteEnv(SOURCES[env_id], pool=pool, on_timeout="raise")
        for seed in (0, 3):
            steps = _episode(remote, seed)
            assert steps[-1][1] == 1.0, steps[-1][4].get("verdict")
            assert steps == _episode(local, seed)


@needs_sandboxes
def test_the_coding_target_is_deterministic_across_fresh_workers():
    result = run_property("determinism_across_processes", EnvRef(env_id=DOMAIN.target_env_id), KitSettings(examples=4))
    assert result.passed, result.detail


def test_the_client_imports_the_command_jail_only_when_a_worker_asks():
    script = ("import sys\nfrom trace_gym.sandbox import WorkerPool, RemoteEnv\n"
              "from trace_gym.testing import EnvRef\n"
              "assert 'trace_gym.sandbox.workspace' not in sys.modules\n"
              "assert 'trace_gym.sandbox.jail' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)


# -- hostile modules --------------------------------------------------------------------------

HOSTILE = '''
import base64, json, os, time

from trace_gym.coding.env import CodingEnv
from trace_gym.sandbox import workspace
from trace_gym.sandbox.jail import CommandLimits


def _raw(body, read=True):
    """Write a run message of our own on the answer stream, as the runner would."""
    requests, answers = workspace._runner.__self__.streams
    line = (json.dumps(body) + "\\n").encode()
    while line:
        line = line[os.write(answers, line):]
    if read:
        return requests.readline()
    time.sleep(600)


def _escape():
    workspace._runner = None  # the trusted path, in the worker: refused by its audit hook
    return workspace.run({}, ["true"])


ATTACKS = {
    "plain": lambda: workspace.run({"a.txt": "hi"}, ["sh", "-c", "cat a.txt; echo x > b.txt"]),
    "not_a_request": lambda: _raw({"run": {"files": {}, "argv": "true"}}),
    "run_and_answer": lambda: _raw({"run": 1, "ok": None}),
    "escaping_path": lambda: workspace.run({"../outside.txt": "x"}, ["true"]),
    "absolute_path": lambda: workspace.run({"/etc/x": "x"}, ["true"]),
    "file_and_folder": lambda: workspace.run({"a": "x", "a/b": "y"}, ["true"]),
    "empty_argv": lambda: workspace.run({}, []),
    "longer_wall_clock": lambda: workspace.run({}, ["true"], limits=CommandLimits(wall_seconds=60)),
    "more_memory": lambda: workspace.run({}, ["true"], limits=CommandLimits(memory_bytes=2 << 30)),
    "more_processes": lambda: workspace.run({}, ["true"], limits=CommandLimits(processes=65)),
    "many_runs": lambda: [workspace.run({}, ["true"]) for _ in range(1000)],
    "endless_commands": lambda: [workspace.run({}, ["sh", "-c", "while :; do :; done"]) for _ in range(1000)],
    "unread_reply": lambda: _raw({"run": {"files": {f"f{i}.txt": "x" * 250_000 for i in range(14)},
                                          "argv": ["true"], "stdin": "", "keep": True,
                                          "limits": json.loads(json.dumps(CommandLimits().__dict__))}}, read=False),
    "second_runner": lambda: workspace.set_runner(lambda *a: None),
    "escape": _escape,
}


class Hostile(CodingEnv):
    def __init__(self, render_mode=None, attack="plain"):
        super().__init__(render_mode)
        self.result = ATTACKS[attack]()

    def render(self):
        return repr(self.result)
'''


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> EnvSource:
    path = tmp_path_factory.mktemp("hostile") / "hostile_runs.py"
    path.write_text(HOSTILE)
    return EnvSource.from_file(path)


def _make(source: EnvSource, attack: str, request_seconds: float = 30.0) -> tuple[RemoteEnv, WorkerPool]:
    pool = WorkerPool(1, Limits(request_seconds=request_seconds))
    try:
        return RemoteEnv(source, {"attack": attack}, render_mode="ansi", pool=pool, on_timeout="raise"), pool
    except BaseException:
        pool.close()
        raise


@needs_sandboxes
def test_a_command_runs_in_the_clients_sandbox_and_its_files_come_back(hostile):
    env, pool = _make(hostile, "plain")
    with pool:
        env.reset(seed=0)
        expected = (CommandResult(0, "hi", "", False, None), {"a.txt": "hi", "b.txt": "x\n"}, [])
        assert env.render() == repr(expected)


@needs_sandboxes
@pytest.mark.parametrize(("attack", "words"), [
    ("not_a_request", "not {files, argv, stdin, limits, keep}"),
    ("run_and_answer", "not {files, argv, stdin, limits, keep}"),
    ("escaping_path", "not inside the repository"),
    ("absolute_path", "not inside the repository"),
    ("file_and_folder", "a file and a folder"),
    ("empty_argv", "argv is not 1 to 64 words"),
    ("longer_wall_clock", "wall_seconds=60"),
    ("more_memory", "memory_bytes=2147483648"),
    ("more_processes", "processes=65"),
    ("many_runs", f"more than {MAX_RUNS} commands in one request"),
])
def test_a_request_out_of_bounds_loses_the_worker(hostile, attack, words):
    start = time.monotonic()
    with pytest.raises(WorkerLost, match=words) as info:
        _make(hostile, attack)
    assert not isinstance(info.value, WorkerTimeout)
    assert time.monotonic() - start < 25


@needs_sandboxes
def test_commands_count_against_the_requests_wall_clock(hostile):
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match="did not answer within 3 s"):
        _make(hostile, "endless_commands", request_seconds=3)
    assert time.monotonic() - start < 15  # a single command of 20 s would overrun it


@needs_sandboxes
def test_a_worker_that_does_not_read_its_reply_cannot_hold_the_client(hostile):
    start = time.monotonic()
    with pytest.raises(WorkerTimeout):
        _make(hostile, "unread_reply", request_seconds=3)
    assert time.monotonic() - start < 15


@needs_sandboxes
@pytest.mark.parametrize(("attack", "words"), [
    ("second_runner", "RuntimeError: the command runner is set already"),
    # tempfile finds no directory it may write in, under the worker's audit hook
    ("escape", "FileNotFoundError: .*No usable temporary directory"),
])
def test_a_module_cannot_run_commands_but_through_the_client(hostile, attack, words):
    with pytest.raises(RemoteEnvError, match=words):
        _make(hostile, attack)


@needs_sandboxes
def test_a_command_the_client_cannot_run_is_an_error_of_the_env(hostile, monkeypatch):
    def unavailable(*args):
        raise IsolationUnavailable("no bubblewrap here")

    monkeypatch.setattr(workspace, "run", unavailable)
    with pytest.raises(RemoteEnvError, match="IsolationUnavailable: no bubblewrap here"):
        _make(hostile, "plain")


@needs_sandboxes
def test_a_sandboxed_workers_commands_never_run_under_the_fallback(hostile, monkeypatch):
    ran = []
    monkeypatch.setattr(workspace, "run", lambda *args: ran.append(args))
    monkeypatch.setenv("TRACE_GYM_ISOLATION", "fallback")
    pool = WorkerPool(1, isolation="bubblewrap")
    with pool, pytest.raises(RemoteEnvError, match="IsolationUnavailable: a worker under bubblewrap"):
        RemoteEnv(hostile, {"attack": "plain"}, pool=pool)
    assert ran == []


# -- the client's check of a request ------------------------------------------------------------

def _message(**changes):
    body = {"files": {"pkg/a.py": "x = 1\n", "tests/test_a.py": ""}, "argv": ["python", "-c", "pass"],
            "stdin": "aGk=", "limits": dict(CommandLimits().__dict__), "keep": True}
    for key, value in changes.items():
        if value is KeyError:
            del body[key]
        else:
            body[key] = value
    return {"run": body}


def test_a_request_within_bounds_is_read_as_runs_arguments():
    files, argv, stdin, limits, keep = read_run_request(_message(limits={**CommandLimits().__dict__, "cpu_seconds": 2}))
    assert files == {"pkg/a.py": "x = 1\n", "tests/test_a.py": ""} and argv == ["python", "-c", "pass"]
    assert stdin == b"hi" and limits == CommandLimits(cpu_seconds=2) and keep is True


LIMITS = CommandLimits().__dict__
REFUSED = {
    "not a dict": ([], "not {files"),
    "extra key": ({**_message(), "ok": 1}, "not {files"),
    "missing key": (_message(keep=KeyError), "not {files"),
    "files not a dict": (_message(files=["a"]), "files are not a map"),
    "too many files": (_message(files={f"f{i}": "" for i in range(workspace.MAX_FILES + 1)}), "files are not a map"),
    "parent path": (_message(files={"../a": ""}), "not inside the repository"),
    "inner parent": (_message(files={"a/../../b": ""}), "not inside the repository"),
    "absolute path": (_message(files={"/a": ""}), "not inside the repository"),
    "dot path": (_message(files={".": ""}), "not inside the repository"),
    "empty path": (_message(files={"": ""}), "not inside the repository"),
    "not canonical": (_message(files={"a//b": ""}), "not canonical"),
    "control character": (_message(files={"a\nb": ""}), "not inside the repository"),
    "text not str": (_message(files={"a": 1}), "not text"),
    "lone surrogate": (_message(files={"a": "\ud800"}), "not UTF-8"),
    "too big": (_message(files={"a": "x" * workspace.REPO_KEEP_BYTES, "b": "x"}), "more than 4 MiB"),
    "file and folder": (_message(files={"a": "", "a/b/c": ""}), "a file and a folder"),
    "argv empty": (_message(argv=[]), "argv is not"),
    "argv not a list": (_message(argv="true"), "argv is not"),
    "argv too long": (_message(argv=["x"] * 65), "argv is not"),
    "word too long": (_message(argv=["x" * 4097]), "argv is not"),
    "word not str": (_message(argv=["echo", 1]), "argv is not"),
    "nul in word": (_message(argv=["echo", "a\0b"]), "argv is not"),
    "stdin not str": (_message(stdin=None), "stdin is not base64"),
    "stdin not base64": (_message(stdin="!!!!"), "stdin is not base64"),
    "stdin too big": (_message(stdin="A" * ((MAX_STDIN_BYTES // 3 + 2) * 4)), "at most 1 MiB"),
    "limits not a dict": (_message(limits=None), "limits are not"),
    "limits missing a field": (_message(limits={k: v for k, v in LIMITS.items() if k != "processes"}), "limits are not"),
    "limits extra field": (_message(limits={**LIMITS, "nice": 1}), "limits are not"),
    "limit not a number": (_message(limits={**LIMITS, "cpu_seconds": "10"}), "invalid limits"),
    "limit a bool": (_message(limits={**LIMITS, "processes": True}), "invalid limits"),
    "limit below minimum": (_message(limits={**LIMITS, "memory_bytes": 1}), "invalid limits"),
    "more cpu": (_message(limits={**LIMITS, "cpu_seconds": 11}), "more than the default limits"),
    "more output": (_message(limits={**LIMITS, "output_bytes": (32 << 10) + 1}), "more than the default limits"),
    "a larger repository": (_message(limits={**LIMITS, "repo_bytes": (256 << 20) + 1}), "more than the default limits"),
    "more file size": (_message(limits={**LIMITS, "file_bytes": (64 << 20) + 1}), "more than the default limits"),
    "more wall clock": (_message(limits={**LIMITS, "wall_seconds": 20.5}), "more than the default limits"),
    "keep not a bool": (_message(keep=1), "keep is not a bool"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_request_out_of_bounds_is_refused(case):
    message, words = REFUSED[case]
    with pytest.raises(ValueError, match=words):
        read_run_request(copy.deepcopy(message))


def test_the_file_size_bound_counts_utf8_bytes():
    text = "é" * (workspace.REPO_KEEP_BYTES // 2)  # two bytes each: exactly the bound
    assert read_run_request(_message(files={"a": text}))[0] == {"a": text}
    with pytest.raises(ValueError, match="more than 4 MiB"):
        read_run_request(_message(files={"a": text + "é"}))


def test_a_worker_may_ask_for_less_than_the_defaults():
    low = {"cpu_seconds": 1, "memory_bytes": 64 << 20, "file_bytes": 0, "processes": 1, "wall_seconds": 0.5,
           "output_bytes": 0, "repo_bytes": 0}
    assert read_run_request(_message(limits=low))[3] == CommandLimits(**low)
