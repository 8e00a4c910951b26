"""The examples in the front doors' docstrings run as written."""

from __future__ import annotations

import doctest
import importlib

import pytest

FRONT_DOORS = ("trace_gym.env", "trace_gym.interop", "trace_gym.interop.aio", "trace_gym.interop.tasks",
               "trace_gym.interop.turns", "trace_gym.agents.registry", "trace_gym.registry",
               "trace_gym.cli.flags", "trace_gym.runconfig", "trace_gym.testing")


@pytest.mark.parametrize("module", FRONT_DOORS)
def test_docstring_examples_run(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{module} has no example"
    assert result.failed == 0
