"""Mutation testing with cosmic-ray: `python mutation/run.py TARGET` (aggregate, verifiers).

Each target names the files to mutate, the functions whose mutants count (the rest are
skipped, so a verifier module's generator is not mutated), and the tests that must kill them.
The session (mutation/TARGET.sqlite) resumes where it stopped; at the end the surviving
mutants are written to mutation/TARGET-survivors.txt, one diff each, for
mutation/TARGET.md to kill or explain. Mutants are applied to the checkout's files in
place, one at a time, and restored: run it on a clean tree and do not edit while it runs.

    pip install -e '.[mutation]'
    python mutation/run.py aggregate
    python mutation/run.py aggregate --retest-survivors   # after adding tests
"""

from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {
    "aggregate": {
        "files": ["analysis/aggregate.py"],
        "functions": None,  # every function
        "tests": ["tests/analysis/test_aggregate.py"],
        "timeout": 60,
    },
    "verifiers": {
        # the shipped envs' verify functions and the target envs' verifier module
        "files": ["generated_envs/*.py", "trace_gym/targets/verify.py"],
        "functions": lambda path, name: name.startswith("verify") or path.endswith("targets/verify.py"),
        # the checks' own tests first: with -x a killed mutant stops at its first failure
        "tests": ["tests/generated_envs/test_verdict_checks.py", "tests/targets/test_verdict_checks.py",
                  "tests/generated_envs", "tests/targets"],
        "timeout": 300,
    },
}


def _files(target: dict) -> list[str]:
    out = []
    for pattern in target["files"]:
        out += sorted(p for p in glob.glob(str(ROOT / pattern)) if not p.endswith("__init__.py"))
    return out


def _config(name: str, target: dict) -> Path:
    tests = " ".join(target["tests"])
    path = ROOT / "mutation" / f"{name}.toml"
    files = ", ".join(json.dumps(os.path.relpath(f, ROOT)) for f in _files(target))
    path.write_text(
        "# written by mutation/run.py\n[cosmic-ray]\n"
        f"module-path = [{files}]\n"
        f"timeout = {target['timeout']}.0\nexcluded-modules = []\n"
        f'test-command = "{sys.executable} -m pytest -x -q -p no:cacheprovider -p no:xdist {tests}"\n\n'
        '[cosmic-ray.distributor]\nname = "local"\n')
    return path


def _spans(path: str, keep) -> list[tuple[int, int]]:
    """Line ranges of the functions whose mutants count."""
    tree = ast.parse(Path(path).read_text())
    return [(n.lineno, n.end_lineno) for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and keep(path, n.name)]


def _skip_outside(session: Path, target: dict) -> int:
    """Mark the mutants outside the target's functions as skipped; returns how many."""
    if target["functions"] is None:
        return 0
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    spans: dict[str, list[tuple[int, int]]] = {}
    skipped = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in db.work_items:
            for mutation in item.mutations:
                path = str((ROOT / mutation.module_path).resolve())
                if path not in spans:
                    spans[path] = _spans(path, target["functions"])
                line = mutation.start_pos[0]
                if not any(a <= line <= b for a, b in spans[path]):
                    db.set_result(item.job_id, WorkResult(worker_outcome=WorkerOutcome.SKIPPED))
                    skipped += 1
                    break
    return skipped


def _survivors(session: Path) -> list[dict]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    out = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.test_outcome == TestOutcome.SURVIVED:
                m = item.mutations[0]
                out.append({"job": item.job_id, "file": str(m.module_path), "line": m.start_pos[0],
                            "operator": m.operator_name, "occurrence": m.occurrence, "diff": result.diff})
    return sorted(out, key=lambda s: (s["file"], s["line"], s["operator"]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("target", choices=sorted(TARGETS))
    parser.add_argument("--fresh", action="store_true", help="start a new session instead of resuming")
    parser.add_argument("--retest-survivors", action="store_true",
                        help="run the surviving mutants again (after tests were added to kill them)")
    args = parser.parse_args()
    target = TARGETS[args.target]
    config = _config(args.target, target)
    session = ROOT / "mutation" / f"{args.target}.sqlite"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = lambda *a: subprocess.run([sys.executable, "-m", "cosmic_ray.cli", *a], cwd=ROOT, env=env, check=True)  # noqa: E731
    if args.fresh or not session.exists():
        session.unlink(missing_ok=True)
        run("init", str(config), str(session))
        print(f"{_skip_outside(session, target)} mutants outside the target functions skipped")
        run("baseline", str(config))
    elif args.retest_survivors:
        import sqlite3

        with sqlite3.connect(session) as db:  # forget their results: exec runs them again
            db.execute("DELETE FROM work_results WHERE test_outcome = 'SURVIVED'")
    run("exec", str(config), str(session))
    survivors = _survivors(session)
    report = ROOT / "mutation" / f"{args.target}-survivors.txt"
    with report.open("w") as f:
        for s in survivors:
            f.write(f"## job {s['job']}  {s['file']}:{s['line']}  {s['operator']} #{s['occurrence']}\n{s['diff']}\n")
    from cosmic_ray.work_db import WorkDB, use_db

    with use_db(str(session), WorkDB.Mode.open) as db:
        done = db.num_results
        total = db.num_work_items
    print(f"{args.target}: {total} mutants, {done} done, {len(survivors)} survived -> {report.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
