"""Every static rule refuses the code it is about, and the shipped envs pass them all."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from trace_gym.audit.static import REFUSED_CALLS, check_source

SNIPPETS = [
    ("import socket", "import", "network access"),
    ("import subprocess", "import", "runs programs"),
    ("import os.path", "import", "operating-system access"),
    ("from pathlib import Path", "import", "file-system access"),
    ("import shutil", "import", "file-system access"),
    ("import importlib", "import", "imports code at run time"),
    ("import ctypes", "import", "native memory"),
    ("import pickle", "import", "runs code from data"),
    ("import random", "import", "global random"),
    ("import time", "import", "clock"),
    ("from datetime import datetime", "import", "clock"),
    ("import sys", "import", "interpreter"),
    ("import xml.dom", "import", "not allowed"),
    ("from . import sibling", "import", "relative imports"),
    ("x = ().__class__.__bases__[0].__subclasses__()", "attribute", "__class__"),
    ("f = (lambda: 0).__globals__", "attribute", "__globals__"),
    ("b = __builtins__", "name", "__builtins__"),
    ("import numpy as np\nx = np.random.rand()", "numpy_random", "global state"),
    ("import numpy\nnumpy.random.seed(3)", "numpy_random", "global state"),
    ("from numpy import random as npr\nnpr.randint(3)", "numpy_random", "global state"),
    ("from numpy.random import shuffle", "numpy_random", "global state"),
    ("import numpy as np\ng = np.random.default_rng()", "numpy_random", "without a seed"),
    ("def f():\n    global counter", "global", "global state"),
    ("def broken(:\n    pass", "syntax", "syntax error"),
] + [(f"{name}('x')", "call", reason) for name, reason in REFUSED_CALLS.items()]


@pytest.mark.parametrize("source, rule, words", SNIPPETS)
def test_rule_refuses_its_mutant(source, rule, words):
    findings = check_source(source)
    assert any(f.rule == rule and words in f.message for f in findings), findings
    assert all(f.line >= 1 for f in findings)


def test_seeded_numpy_generators_are_allowed():
    source = ("import numpy as np\nfrom numpy.random import default_rng\n"
              "g = np.random.default_rng(3)\nh = np.random.Generator(np.random.PCG64(1))\nk = default_rng(5)")
    assert check_source(source) == []


@pytest.mark.parametrize("module", sorted(p.name for p in (REPO / "generated_envs").glob("*.py") if p.name != "__init__.py"))
def test_shipped_envs_pass_every_static_rule(module):
    assert check_source((REPO / "generated_envs" / module).read_text()) == []


def test_findings_carry_their_line():
    findings = check_source("x = 1\n\nimport socket\n")
    assert [(f.line, f.rule) for f in findings] == [(3, "import")]
