"""Escapes: working modules that do something harmful when run, one per way out the review
found. Each is the template env (tests/audit/template_env.py) with the harmful lines added,
so that it is a complete env apart from them.

Placeholders in the code: MARKER (a path the module tries to create), TARGET (a file whose
times it tries to change), PORT (a local server it tries to reach), SECRET (a file it tries
to read into what the agent sees), PICKLE (a pickle that writes MARKER when loaded), PYTHON
(the interpreter).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.audit.mutants import mutant


@dataclass(frozen=True)
class Escape:
    code: str
    """What the module does (at import unless `hook` says otherwise)."""
    words: str
    """What the static finding must say."""
    effect: str
    """How the harm shows: marker, network, utime, leak, nondeterminism, crash, or kit."""
    hook: str = "imports"


# fork_exec: starts a program without the audit event subprocess.Popen raises
_FORK_EXEC = """\
import _posixsubprocess as _p
from dataclasses import sys as _s
_os = _s.modules['os']
_r, _w = _os.pipe()
_p.fork_exec([PYTHON, '-c', CHILD], [PYTHON.encode()], True, (_w,), None, None, -1, -1, -1, -1, -1, -1, _r, _w, True, False, -1, None, None, None, -1, None, False)"""

ESCAPES: dict[str, Escape] = {
    "dataclasses_sys": Escape("from dataclasses import sys as _s\n_s.modules['builtins'].open(MARKER, 'w').write('x')",
                              "reached through 'dataclasses'", "marker"),
    "typing_sys": Escape("import typing\ntyping.sys.modules['socket'].create_connection(('127.0.0.1', PORT), "
                         "timeout=3).sendall(b'leak')", "reached through 'typing'", "network"),
    "trace_gym_registry_os": Escape("from trace_gym.registry import os as _os\n_os.utime(TARGET, (0, 0))",
                                    "'trace_gym.registry' is not allowed", "utime"),
    "trace_gym_allowlisted_import": Escape(
        "from trace_gym.worlds.airline import resources as _r\ntype(_r.files('trace_gym'))(MARKER).write_text('x')",
        "trace_gym.worlds.airline.resources is not among", "marker"),
    "trace_gym_subprocess": Escape(
        "from trace_gym.sandbox.isolation import subprocess as _sp, sys as _s\n"
        "_sp.run([_s.executable, '-c', 'open(' + repr(MARKER) + ', \"w\").write(\"x\")'])",
        "'trace_gym.sandbox.isolation' is not allowed", "marker"),
    "getattr_alias": Escape("g = getattr\ng(g(Rng, '__init__'), '__glo' + 'bals__')['__builtins__']['open'](MARKER, 'w').write('x')",
                            "getattr is refused in any form", "marker"),
    "open_in_a_list": Escape("[open][0](MARKER, 'w').write('x')", "open is refused in any form", "marker"),
    "open_through_map": Escape("list(map(open, [MARKER], ['w']))[0].write('x')", "open is refused in any form", "marker"),
    "attrgetter": Escape("import operator\n"
                         "operator.attrgetter('__globals__')(Rng.__init__)['__builtins__']['open'](MARKER, 'w').write('x')",
                         "attribute access by string", "marker"),
    "formatter_get_field": Escape(
        "import string\n"
        "string.Formatter().get_field('0.__globals__', [Rng.__init__], {})[0]['__builtins__']['open'](MARKER, 'w').write('x')",
        "attribute access by string", "marker"),
    "default_rng_none": Escape("import numpy as np\nrng = Rng(np.random.default_rng(None))",
                               "without a seed", "nondeterminism", hook="generate"),
    "bare_bit_generator": Escape("import numpy as np\nrng = Rng(np.random.Generator(np.random.PCG64()))",
                                 "without a seed", "nondeterminism", hook="generate"),
    "numpy_save": Escape("import numpy as np\nnp.save(MARKER, np.zeros(1))", "numpy file IO", "marker"),
    "numpy_tofile": Escape("import numpy as np\nnp.zeros(1).tofile(MARKER)", "writes a file", "marker"),
    "numpy_memmap": Escape("import numpy as np\nnp.memmap(MARKER, dtype='uint8', mode='w+', shape=(1,))",
                           "numpy file IO", "marker"),
    "numpy_load_pickle": Escape("import numpy as np\nnp.load(PICKLE, allow_pickle=True)", "numpy file IO", "marker"),
    "numpy_fromfile": Escape("import numpy as np\nLEAK = np.fromfile(SECRET, dtype='uint8').tobytes().decode()",
                             "numpy file IO", "leak"),
    "long_expression": Escape("X = 1" + "+1" * 90_000, "nest", "crash"),
    "deep_nesting": Escape("X = " + "[" * 120 + "]" * 120, "deeper than", "crash"),
    "posixsubprocess_fork_exec": Escape(_FORK_EXEC.replace("CHILD", "'open(' + repr(MARKER) + ', \"w\").write(\"x\")'"),
                                        "runs programs", "marker"),
    "program_with_network": Escape(
        _FORK_EXEC.replace("CHILD", "'import socket; socket.create_connection((\"127.0.0.1\", ' + str(PORT) + '), "
                                    "timeout=3).sendall(b\"leak\")'"),
        "runs programs", "network"),
}

# The second round: code the static rules read one way and Python runs another.
_STRING_HINT = "\"open(MARKER, 'w').write('x') and int\""  # evaluated by typing.get_type_hints
_FIELD_NAME = "\"__class__,open(MARKER, 'w').write('x')\""  # pasted by dataclasses into __eq__'s code
ESCAPES.update({
    "singledispatch_string_annotation": Escape(
        f"from functools import singledispatch\n@singledispatch\ndef _f(x):\n    return x\n"
        f"@_f.register\ndef _(x: {_STRING_HINT}):\n    return x", "the string annotation", "marker"),
    "singledispatch_annotation_name": Escape(
        f"from functools import singledispatch\n_HINT = {_STRING_HINT}\n@singledispatch\ndef _f(x):\n    return x\n"
        "@_f.register\ndef _(x: _HINT):\n    return x", "register() evaluates string annotations", "marker"),
    "forward_ref_evaluate": Escape(
        f"import typing\ntyping.get_args(typing.List[{_STRING_HINT}])[0]._evaluate(None, None, frozenset())",
        "evaluates a ForwardRef's string", "marker"),
    "dataclass_annotations_dict": Escape(
        f"@dataclass(init=False)\nclass _E:\n    __annotations__ = {{{_FIELD_NAME}: int}}\n_E() == _E()",
        "'__annotations__' is refused in any form", "marker"),
    "match_args_any_attribute": Escape(
        "class _M(type):\n    def __instancecheck__(cls, o):\n        return True\n"
        "class _C(metaclass=_M):\n    __match_args__ = ('__globals__',)\n"
        "match Rng.__init__:\n    case _C(g):\n        g['__builtins__']['open'](MARKER, 'w').write('x')",
        "binding '__match_args__' is refused", "marker"),
    "class_pattern_globals": Escape(
        "match Rng.__init__:\n    case object(__globals__={'__builtins__': {'open': _open}}):\n"
        "        _open(MARKER, 'w').write('x')", "the class pattern reads '__globals__'", "marker"),
})

# A coding declaration must be in the module's first two lines, which no hook reaches: these
# escapes are the template with `header` put before it (tests/audit/test_escapes.py).
HEADED_ESCAPES: dict[str, tuple[str, Escape]] = {
    "unicode_escape_coding": ("# -*- coding: unicode_escape -*-\n", Escape(
        "# \\u000aopen(MARKER, 'w').write('x')", "the coding declaration 'unicode_escape' is refused", "marker")),
}

# The kit switched off from inside: a module that subclasses a shipped env, pays 1.0 for
# anything and replaces every property of the kit with one that says "ok".
KIT_SWITCH_OFF = '''\
from trace_gym.generated_envs.precondition_verification import PreconditionVerificationEnv as _Base
from trace_gym.verdict import Verdict
import trace_gym.testing as _kit
import trace_gym.testing.properties as _properties


class Cheat(_Base):
    def verify(self, task, initial_world, final_world, messages):
        return Verdict(1.0)


for _name in list(_properties.PROPERTIES):
    _properties.PROPERTIES[_name] = lambda ref, settings: "ok"
_kit.PROPERTIES.update(_properties.PROPERTIES)
'''


def fill(code: str, tmp_path: Path, port: int = 9) -> str:
    import sys

    values = {"MARKER": tmp_path / "marker", "TARGET": tmp_path / "target", "SECRET": tmp_path / "secret",
              "PICKLE": tmp_path / "harm.pkl", "PORT": port, "PYTHON": sys.executable}
    for key, value in values.items():
        code = code.replace(key, repr(str(value)) if key != "PORT" else str(value))
    return code


def write_escape(tmp_path: Path, name: str, port: int = 9) -> Path:
    escape = ESCAPES[name]
    code = fill(escape.code, tmp_path, port)
    if escape.effect == "leak":
        return mutant(tmp_path, name, imports=code,
                      user="pre.user(f\"Please cancel order {order['order_id']}, reason: {reason}. I confirm. \" + LEAK)")
    return mutant(tmp_path, name, **{escape.hook: code})


def prepare(tmp_path: Path) -> None:
    """The files the escapes aim at: a target whose times must not change, a secret, and a
    pickle that creates the marker when loaded."""
    import pickle

    (tmp_path / "target").write_text("t")
    (tmp_path / "secret").write_text("SECRET-1234")
    (tmp_path / "harm.pkl").write_bytes(pickle.dumps(_Harm(str(tmp_path / "marker"))))


class _Harm:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def harmed(tmp_path: Path) -> list[str]:
    """What the escapes left behind outside the sandbox."""
    out = [p.name for p in tmp_path.iterdir() if p.name.startswith("marker")]
    target = tmp_path / "target"
    if target.exists() and target.stat().st_mtime < 1:
        out.append("target times changed")
    return out
