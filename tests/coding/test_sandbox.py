"""`trace_gym.coding.sandbox`, the command jail's old place: for one release every name it
had still imports from there, as the same object, with a DeprecationWarning that names the
new module and points at the importing line."""

from __future__ import annotations

import importlib

import pytest

from trace_gym.sandbox import jail

OLD = "trace_gym.coding.sandbox"
NAMES = ("SANDBOX_BIN", "SANDBOX_ENV", "SANDBOX_REPO", "SANDBOX_UID", "TMP_BYTES", "CommandLimits", "CommandResult",
         "process_cap", "process_memory", "python_argv", "run_in_repo", "sandbox_available", "shm_bytes", "tmp_bytes")


def test_importing_a_name_from_the_old_place_warns_and_gives_the_same_object():
    with pytest.warns(DeprecationWarning, match=r"trace_gym\.sandbox\.jail\.run_in_repo") as caught:
        from trace_gym.coding.sandbox import run_in_repo
    assert run_in_repo is jail.run_in_repo
    assert [w.filename for w in caught] == [__file__]  # the warning names the importing line, not the shim


@pytest.mark.parametrize("name", NAMES)
def test_every_name_of_the_old_module_is_the_moved_one(name):
    old = importlib.import_module(OLD)
    with pytest.warns(DeprecationWarning, match=f"moved to trace_gym.sandbox.jail.{name}"):
        assert getattr(old, name) is getattr(jail, name)


def test_a_name_the_old_module_never_had_is_an_attribute_error():
    old = importlib.import_module(OLD)
    with pytest.raises(AttributeError, match="no_such_name"):
        old.no_such_name  # noqa: B018
    with pytest.raises(ImportError):
        from trace_gym.coding.sandbox import no_such_name  # noqa: F401
