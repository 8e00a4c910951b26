"""The coding domain's old places of what moved to the sandbox package: for one release
every name they had still imports from there, as the same object, with a DeprecationWarning
that names the new module and points at the importing line."""

from __future__ import annotations

import importlib

import pytest

from trace_gym.sandbox import jail, runner, workspace

MOVED = {
    "trace_gym.coding.sandbox": (jail, (
        "SANDBOX_BIN", "SANDBOX_ENV", "SANDBOX_REPO", "SANDBOX_UID", "TMP_BYTES", "CommandLimits", "CommandResult",
        "process_cap", "process_memory", "python_argv", "run_in_repo", "sandbox_available", "shm_bytes", "tmp_bytes")),
    "trace_gym.coding.workspace": (workspace, (
        "FILE_KEEP_BYTES", "MAX_DEPTH", "MAX_ENTRIES", "MAX_FILES", "REPO_KEEP_BYTES", "RUNNER", "RUNNER_IN_SANDBOX",
        "Runner", "clean_path", "materialize", "read_back", "run", "runner_argv", "set_runner")),
    "trace_gym.coding.runner": (runner, ("MARK", "exception_name", "main")),
}


def test_importing_a_name_from_the_old_place_warns_and_gives_the_same_object():
    with pytest.warns(DeprecationWarning, match=r"trace_gym\.sandbox\.jail\.run_in_repo") as caught:
        from trace_gym.coding.sandbox import run_in_repo
    assert run_in_repo is jail.run_in_repo
    assert [w.filename for w in caught] == [__file__]  # the warning names the importing line, not the shim


@pytest.mark.parametrize(("old", "name"), [(old, name) for old, (_, names) in MOVED.items() for name in names])
def test_every_name_of_an_old_place_is_the_moved_one(old, name):
    new, _ = MOVED[old]
    with pytest.warns(DeprecationWarning, match=f"{old}.{name} moved to {new.__name__}.{name}"):
        assert getattr(importlib.import_module(old), name) is getattr(new, name)


@pytest.mark.parametrize("old", list(MOVED))
def test_a_name_an_old_place_never_had_is_an_attribute_error(old):
    with pytest.raises(AttributeError, match="no_such_name"):
        importlib.import_module(old).no_such_name  # noqa: B018


def test_what_stays_in_the_coding_workspace_is_its_own_without_a_warning(recwarn):
    from trace_gym.coding.workspace import Repo

    assert Repo.__module__ == "trace_gym.coding.workspace" and recwarn.list == []
