"""Every renamed public name is still importable under its old name for one release: the old
name warns (a DeprecationWarning that names the new one) and is the very same object."""

from __future__ import annotations

import importlib
import warnings

import pytest

RENAMED = [
    # (old module, old name, new module, new name)
    ("trace_gym.config", "require", "trace_gym.validation", "require"),
    ("trace_gym.tools_common", "calculate_tool", "trace_gym.worlds.generic_tools", "calculate_tool"),
    ("trace_gym.tools_common", "transfer_tool", "trace_gym.worlds.generic_tools", "transfer_tool"),
    ("trace_gym.tools_common", "evaluate_arithmetic", "trace_gym.worlds.generic_tools", "evaluate_arithmetic"),
    ("trace_gym.tools_common", "TRANSFER_MESSAGE", "trace_gym.worlds.generic_tools", "TRANSFER_MESSAGE"),
]


@pytest.mark.parametrize(("old_module", "old_name", "new_module", "new_name"), RENAMED,
                         ids=[f"{m}.{n}" for m, n, _, _ in RENAMED])
def test_an_old_name_warns_and_is_the_new_object(old_module, old_name, new_module, new_name):
    old = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning) as caught:
        value = getattr(old, old_name)
    assert value is getattr(importlib.import_module(new_module), new_name)
    message = str(caught[0].message)
    assert old_name in message and new_name in message and new_module in message


@pytest.mark.parametrize("old_module", sorted({m for m, _, _, _ in RENAMED}))
def test_an_old_module_has_no_other_names(old_module):
    old = importlib.import_module(old_module)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # hasattr swallows only AttributeError: a warning turned error would escape it
        assert not hasattr(old, "no_such_name") and not hasattr(old, "_private")


def test_a_from_import_of_an_old_name_warns():
    with pytest.warns(DeprecationWarning, match="trace_gym.validation"):
        from trace_gym.config import require
    from trace_gym.validation import require as new

    assert require is new
