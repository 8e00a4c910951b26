"""The test runner that runs inside the command jail (standard library only; bound read-only
into every command a workspace runs, `trace_gym.sandbox.workspace`, and started as
`python -I -S runner.py MODE` with the repository at /repo).

Modes, each reading a JSON request on stdin before any code of the repository runs:

- `calls`: {"package": name, "calls": [[module, function, args], ...]}: import
  `package.module` and call `function(*args)` for each; report the outcome of each call as
  one line `{"i": i, "value": v}` or `{"i": i, "raises": "ExceptionName"}`. No verdict is
  made here: the values go back to the verifier, which compares them, outside the sandbox,
  with expected values that never enter it. So code under test that prints lines of its
  own, exits early or patches this runner can only report values, which must be the right
  ones to pass.
- `tests`: {"files": ["tests/test_x.py", ...]}: run each `test_*` function of the files
  (plain asserts, no pytest) and report `{"file": f, "test": name, "passed": bool,
  "error": text}` per test. The verifier of issue reproduction reads it; its tests are the
  agent's, run against trace-gym's two versions of the package (buggy and fixed), so what a
  test reports is what that test observes of the package.

Result lines start with the record separator character (\\x1e); everything else on stdout
is the code's own output and is ignored.
"""

import builtins
import importlib
import importlib.util
import json
import os
import sys

MARK = "\x1e"


def exception_name(exc):
    """The name an outcome records for an exception: a built-in's own name ("ValueError"),
    any other class's module and qualified name, so a class of the package's own that is
    called ValueError is not taken for the built-in."""
    cls = type(exc)
    if cls is getattr(builtins, cls.__name__, None):  # the class itself, not one claiming its module
        return cls.__name__
    return f"{cls.__module__}.{cls.__qualname__}"


def _emit(out, record):
    try:
        line = json.dumps(record, allow_nan=False)
    except Exception:  # noqa: BLE001 - a value JSON cannot write (a cycle, a nan, nesting too deep)
        line = json.dumps({k: v for k, v in record.items() if k != "value"} | {"raises": "UnserializableResult"})
    out.write(MARK + line + "\n")
    out.flush()


def _calls(request, out):
    package = request["package"]
    for i, (module, function, args) in enumerate(request["calls"]):
        try:
            fn = getattr(importlib.import_module(f"{package}.{module}"), function)
            value = fn(*args)
            record = {"i": i, "value": value}
        except BaseException as exc:
            if isinstance(exc, (KeyboardInterrupt,)):
                raise
            record = {"i": i, "raises": exception_name(exc)}
        _emit(out, record)


def _tests(request, out):
    for index, path in enumerate(request["files"]):
        spec = importlib.util.spec_from_file_location(f"trace_gym_test_{index}", os.path.join("/repo", path))
        try:
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        except BaseException as exc:  # noqa: BLE001
            _emit(out, {"file": path, "test": None, "passed": False, "error": f"{exception_name(exc)}: {exc}"[:300]})
            continue
        for name in sorted(n for n in vars(module) if n.startswith("test_") and callable(getattr(module, n))):
            try:
                getattr(module, name)()
                _emit(out, {"file": path, "test": name, "passed": True, "error": ""})
            except BaseException as exc:  # noqa: BLE001
                _emit(out, {"file": path, "test": name, "passed": False,
                            "error": f"{exception_name(exc)}: {exc}"[:300]})


def main():
    """Read the request, run its mode, write the results."""
    mode = sys.argv[1]
    request = json.loads(sys.stdin.read())
    # Results go to a duplicate of stdout taken before any repository code runs; that code's
    # own prints go to the original stdout (the same pipe, without the mark).
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.path.append("/repo")  # after the standard library: the repo cannot shadow it
    {"calls": _calls, "tests": _tests}[mode](request, out)


if __name__ == "__main__":
    main()
