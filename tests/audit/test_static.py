"""Every static rule refuses the code it is about, and the shipped envs pass them all."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from trace_gym.audit.static import REFUSED_BUILTINS, check_bytes, check_source

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
] + [(f"{name}('x')", "builtin", reason) for name, reason in REFUSED_BUILTINS.items()]

# reach: refused modules through allowed ones, builtins in any form, access by string,
# numpy IO and unseeded generators, module objects as values
SNIPPETS += [
    ("from dataclasses import sys", "reach", "reached through 'dataclasses'"),
    ("import typing\nx = typing.sys", "reach", "reached through 'typing'"),
    ("import json\nx = json.decoder", "reach", "reached through 'json'"),
    ("from trace_gym.registry import os", "import", "not allowed"),
    ("from trace_gym.capability_env import dataclass", "reach", "not among the trace_gym names"),
    ("from trace_gym.worlds import airline\nx = airline.resources", "reach", "not among the trace_gym names"),
    ("from trace_gym import registry", "reach", "not among the trace_gym names"),
    ("from trace_gym.capability_env import _private", "private", "private"),
    ("from trace_gym.jsondata import write_json_atomic", "reach", "writes files"),
    ("from trace_gym import jsondata\nf = jsondata.write_json_atomic", "reach", "writes files"),
    ("import typing\nx = typing._eval_type", "private", "private"),
    ("g = getattr", "builtin", "getattr is refused in any form"),
    ("x = [open][0]", "builtin", "open is refused in any form"),
    ("x = list(map(open, ['f']))", "builtin", "open is refused in any form"),
    ("def f(o=eval):\n    return o", "builtin", "eval is refused in any form"),
    ("def f(hash):\n    return 1", "builtin", "shadows a refused builtin"),
    ("import operator\nf = operator.attrgetter('x')", "reach", "attribute access by string"),
    ("from operator import methodcaller", "reach", "method access by string"),
    ("import string\nf = string.Formatter()", "reach", "attribute access by string"),
    ("x = '{0.__class__}'.format(1)", "format", "reaches an attribute or item"),
    ("x = '{0[k]}'.format({'k': 1})", "format", "reaches an attribute or item"),
    ("t = 'x'\ny = t.format(1)", "format", "computed format string"),
    ("x = str.format('{}', 1)", "format", "computed format string"),
    ("def f(g):\n    return g.gi_frame", "attribute", "frame, traceback and code"),
    ("def f(e):\n    return e.tb_frame.f_globals", "attribute", "frame, traceback and code"),
    ("import typing\nh = typing.get_type_hints", "reach", "evaluates strings as code"),
    ("import numpy as np\nnp.save('f', 1)", "reach", "numpy file IO"),
    ("import numpy as np\nx = np.load('f', allow_pickle=True)", "reach", "numpy file IO"),
    ("import numpy as np\nx = np.fromfile('f')", "reach", "numpy file IO"),
    ("import numpy as np\nx = np.memmap('f')", "reach", "numpy file IO"),
    ("import numpy as np\nx = np.loadtxt('f')", "reach", "numpy file IO"),
    ("def f(a):\n    a.tofile('f')", "attribute", "writes a file"),
    ("from numpy import save", "reach", "numpy file IO"),
    ("import numpy as np\nx = np.lib", "reach", "reached through 'numpy'"),
    ("import numpy as np\ng = np.random.default_rng(None)", "numpy_random", "without a seed"),
    ("import numpy as np\ng = np.random.default_rng(seed=None)", "numpy_random", "without a seed"),
    ("import numpy as np\ng = np.random.Generator(np.random.PCG64())", "numpy_random", "without a seed"),
    ("from numpy.random import SeedSequence\ns = SeedSequence()", "numpy_random", "without a seed"),
    ("import numpy as np\nb = np.random.MT19937()", "numpy_random", "without a seed"),
    ("import numpy as np\nf = print(np)", "module_value", "used as a value"),
    ("import numpy as np\nm = np", "module_value", "used as a value"),
    ("import json\nxs = [json]", "module_value", "used as a value"),
    ("import numpy\nr = numpy.random", "module_value", "used as a value"),
    ("from trace_gym.worlds import airline\nx = airline", "module_value", "used as a value"),
    ("import numpy as np\nnp.pi = 3", "reach", "changes a shared module"),
    ("from math import *", "import", "name each"),
    ("import _posixsubprocess", "import", "runs programs"),
    ("x = 1" + "+1" * 150, "size", "deeper than"),
    ("x = " + "(" * 300 + ")" * 300, "syntax", "too many nested parentheses"),
    ("x = 1" + "+1" * 90_000, "size", "nested too deeply for the parser"),
    ("x = '" + "a" * 250_000 + "'", "size", "characters"),
]

# the red team's second round: code that the rules read one way and Python runs another
CODING = [  # Python decodes the module as its coding declaration says
    ("# -*- coding: unicode_escape -*-\n# \\u000aopen('m', 'w')", "coding", "'unicode_escape' is refused"),
    ("#!/usr/bin/env python\n# vim: set fileencoding=latin-1 :\nx = 1", "coding", "'latin-1' is refused"),
    ("\ufeff# coding: utf-7\nx = 1", "coding", "'utf-7' is refused"),
]
ANNOTATIONS = [  # typing.get_type_hints (singledispatch's register) evaluates annotations
    ("def f(x: \"open('m') and int\"):\n    return x", "annotation", "string annotation"),
    ("x: 'open(1)' = 1", "annotation", "string annotation"),
    ("import typing\ndef f(x: typing.List['open(1)']):\n    pass", "annotation", "string annotation"),
    ("def f() -> 'open(1)':\n    pass", "annotation", "string annotation"),
    ("from typing import Literal, List\nLiteral = List\ndef f(x: Literal['open(1)']):\n    pass", "annotation",
     "string annotation"),
    ("def f(x: g()):\n    pass", "annotation", "may only name a type"),
    ("def f(x: (lambda: int)()):\n    pass", "annotation", "may only name a type"),
    ("from functools import singledispatch", "reach", "register() evaluates string annotations"),
    ("import functools\nf = functools.singledispatchmethod", "reach", "register() evaluates string annotations"),
    ("import typing\nx = typing.get_args(typing.List['1'])[0]._evaluate(None, None, frozenset())", "attribute",
     "evaluates a ForwardRef's string"),
]
NAMESPACES = [  # names the interpreter or dataclasses read as data
    ("class C:\n    __annotations__ = {'x=1': int}", "dunder", "'__annotations__' is refused in any form"),
    ("class C:\n    x: int\n    __annotations__['y=1'] = int", "dunder", "'__annotations__' is refused in any form"),
    ("import json as __annotations__", "dunder", "'__annotations__' is refused in any form"),
    ("class C:\n    __match_args__ = ('__globals__',)", "dunder", "binding '__match_args__' is refused"),
    ("class C:\n    for __match_args__ in [('x',)]:\n        pass", "dunder", "binding '__match_args__' is refused"),
    ("class M(type):\n    @property\n    def __match_args__(cls):\n        return ('x',)", "dunder",
     "defining '__match_args__' is refused"),
    ("class M(type):\n    def __prepare__(name, bases):\n        return {}", "dunder", "defining '__prepare__'"),
]
PATTERNS = [  # a class pattern reads attributes without an ast.Attribute
    ("def f(g):\n    match g:\n        case object(__globals__=d):\n            return d", "attribute",
     "the class pattern reads '__globals__'"),
    ("def f(e):\n    match e:\n        case object(tb_frame=t):\n            return t", "attribute",
     "frame, traceback and code"),
]
FORMAT_VALUES = [  # a format method that reaches attributes, not called at once on a constant
    ("f = '{0.__globals__}'.format", "format", "taken as a value"),
    ("xs = list(map('{0.__class__}'.format, [1]))", "format", "taken as a value"),
    ("f = str.format", "format", "taken as a value"),
    ("f = 'x'.format_map", "format", "taken as a value"),
    ("x = '{0:{1.__class__}}'.format(1, 2)", "format", "reaches an attribute or item"),
]
SNIPPETS += CODING + ANNOTATIONS + NAMESPACES + PATTERNS + FORMAT_VALUES


@pytest.mark.parametrize("source, rule, words", SNIPPETS)
def test_rule_refuses_its_mutant(source, rule, words):
    findings = check_source(source)
    assert any(f.rule == rule and words in f.message for f in findings), findings
    assert all(f.line >= 1 for f in findings)


def test_seeded_numpy_generators_are_allowed():
    source = ("import numpy as np\nfrom numpy.random import default_rng\n"
              "g = np.random.default_rng(3)\nh = np.random.Generator(np.random.PCG64(1))\nk = default_rng(5)")
    assert check_source(source) == []


def test_what_an_env_needs_is_allowed():
    source = ("from __future__ import annotations\nimport numpy as np\nimport collections.abc\n"
              "from dataclasses import dataclass, field\nfrom trace_gym import capabilities as cap\n"
              "from trace_gym.worlds import airline, retail\nfrom trace_gym.worlds.airline.data import TODAY\n"
              "from trace_gym.rng import Rng\nfrom trace_gym.verdict import Check, Verdict\n"
              "x = cap.PRECONDITION\nt = airline.TOOLS\nd = airline.data.FREE_BAGS\ny = np.array([1]).sum()\n"
              "s = '{} and {0}'.format(1)\nm = collections.abc.Mapping\nf = f'{x.upper()}'\n"
              "def g(self):\n    return self.__init__\n")
    assert check_source(source) == []


def test_plain_annotations_class_namespaces_and_patterns_are_allowed():
    source = ("# -*- coding: utf-8 -*-\nfrom __future__ import annotations\nimport typing\n"
              "from typing import Any, Literal\nfrom dataclasses import dataclass\n"
              "def f(x: dict[str, list[int]] | None, k: Literal['a', 'b'] = 'a', *a: int,\n"
              "      **kw: Any) -> tuple[int, ...]:\n"
              "    return ()\n"
              "def g(x: typing.Literal['c'], y: typing.Callable[[int], str], z: Literal[1, None]) -> None:\n"
              "    match x:\n        case str(s) if s:\n            pass\n"
              "        case Point(x=0, y=y1):\n            pass\n"
              "@dataclass\nclass Point:\n    \"\"\"A point.\"\"\"\n    __doc__ = __doc__\n"
              "    __slots__ = ('x', 'y')\n    __hash__ = None\n    x: int\n    y: int\n"
              "    def __post_init__(self) -> None:\n        pass\n"
              "s = '{0:>{1}}'.format('a', 3)\n")
    assert check_source(source) == []


@pytest.mark.parametrize("data, words", [
    (b"x = 1\n# \xff\n", "not valid UTF-8"),
    (b"\xff\xfex\x00 \x00=\x00 \x001\x00", "not valid UTF-8"),  # UTF-16
    (b"\xef\xbb\xbf# coding: latin-1\nx = 1\n", "'latin-1' is refused"),
])
def test_check_bytes_refuses_what_is_not_utf8(data, words):
    findings = check_bytes(data)
    assert any(f.rule == "coding" and words in f.message for f in findings), findings


def test_check_bytes_reads_utf8_with_or_without_a_bom():
    assert check_bytes("# coding: UTF_8\nx = 'é'\n".encode()) == []
    assert check_bytes(b"\xef\xbb\xbf# coding=utf8\nx = 1\n") == []
    assert [f.rule for f in check_bytes(b"import socket\n")] == ["import"]


def test_pathological_input_never_raises():
    for source in ("(" * 10_000, "x = " + "-" * 200_000 + "1", "\x00", "def f(:" * 1000, "[" * 50_000):
        assert check_source(source)


@pytest.mark.parametrize("module", sorted(p.name for p in (REPO / "generated_envs").glob("*.py") if p.name != "__init__.py"))
def test_shipped_envs_pass_every_static_rule(module):
    assert check_source((REPO / "generated_envs" / module).read_text()) == []


def test_findings_carry_their_line():
    findings = check_source("x = 1\n\nimport socket\n")
    assert [(f.line, f.rule) for f in findings] == [(3, "import")]
