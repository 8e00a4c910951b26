"""`trace-gym pipeline` end to end with the committed fixture and a micro budget: every stage
runs and the report is written; a second run reuses every stage; a run killed during
adapter training resumes to the uninterrupted run's adapters and table; the report's
numbers are the evaluation records' numbers."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest

from tests.conftest import REPO
from trace_gym.evaluation import bootstrap_interval
from trace_gym.pipeline.stages.baselines import STAGE as BASELINES
from trace_gym.pipeline.stages.compose import STAGE as COMPOSE
from trace_gym.pipeline.stages.eval import STAGE as EVAL
from trace_gym.pipeline.stages.train import STAGE as TRAIN

pytest.importorskip("torch")
pytest.importorskip("peft")

MICRO = """
[rollout]
episodes = 2
[calibrate]
seeds = 1
samples = 2
[train]
iterations = 2
checkpoint_every = 1
[compose]
episodes = 2
[eval]
seeds = 2
"""


def _config(tmp_path: Path) -> Path:
    """The smoke budget of configs/embedded.toml (the pipeline's default), smaller still."""
    text = (REPO / "configs" / "embedded.toml").read_text()
    extra = re.sub(r"^\[(\w+)\]", r"[budgets.smoke.\1]", MICRO, flags=re.MULTILINE)
    path = tmp_path / "micro.toml"
    path.write_text(_merge_tables(text, extra))
    return path


def _merge_tables(text: str, extra: str) -> str:
    """Append `extra`'s keys into the same-named tables of `text` (TOML allows a table once)."""
    tables = re.findall(r"^\[(budgets\.smoke\.\w+)\]\n((?:[^\[\n].*\n?)*)", extra, flags=re.MULTILINE)
    for name, body in tables:
        header = f"[{name}]\n"
        if header in text:
            keys = {line.split("=")[0].strip() for line in body.splitlines() if "=" in line}
            start = text.index(header) + len(header)
            end = text.find("\n[", start)
            end = len(text) if end == -1 else end
            kept = [line for line in text[start:end].splitlines() if line.split("=")[0].strip() not in keys]
            text = text[:start] + body + "\n".join(kept) + text[end:]
        else:
            text += f"\n{header}{body}"
    return text


def _chromium():
    import os
    import shutil

    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None and os.environ.get("CI"):
        pytest.fail("Chromium must run in CI (.ci/run installs Debian's chromium)")
    return path


def _in_browser(page: Path, tmp_path: Path) -> tuple[bytes, str]:
    """A screenshot of the page in headless Chromium, and the page's title after a script
    appended to a copy of it counted the images that loaded."""
    import subprocess

    browser = _chromium()
    flags = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'chromium'}"]
    shot = tmp_path / "report.png"
    subprocess.run([*flags, f"--screenshot={shot}", "--window-size=1200,2400", page.resolve().as_uri()],
                   capture_output=True, timeout=120, check=True)
    probe = tmp_path / "probe.html"
    probe.write_text(page.read_text().replace("</body>", (
        "<script>window.addEventListener('load', () => { const all = [...document.images];"
        "document.title = 'images ' + all.filter(i => i.complete && i.naturalWidth > 0).length + '/' + all.length; });"
        "</script></body>")))
    dom = subprocess.run([*flags, "--dump-dom", "--virtual-time-budget=10000", probe.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    title = re.search(r"<title>(.*?)</title>", dom)
    return shot.read_bytes(), title.group(1) if title else ""


def _final_table(report: str, targets: list[str]) -> dict[str, list[str]]:
    """The rows of report.md's final table: policy -> its cells, in the targets' order."""
    section = report.split("## Final evaluation", 1)[1].split("\n## ", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()
            if line.startswith("|")]
    head, _rule, *body = rows
    assert head == ["policy", *targets]
    return {row[0]: row[1:] for row in body}


def _table_from_records(run: Path, order: list[str], targets: list[str]) -> dict[str, list[str]]:
    """The same table from the evaluation's record files alone: pass rate and 95% bootstrap
    interval per policy and target."""
    from trace_gym.evaluation import bootstrap_interval

    table = {}
    for label in order:
        cells = []
        for env_id in targets:
            files = list(run.rglob(f"{env_id.split('/')[1]}-{label.replace(' ', '_')}.jsonl"))
            assert len(files) == 1, files
            passes = [float(json.loads(line)["passed"]) for line in files[0].read_text().splitlines()]
            assert len(passes) == 2
            lo, hi = bootstrap_interval(passes)
            cells.append(f"{sum(passes) / len(passes):.3f} [{lo:.3f}, {hi:.3f}]")
        table[label] = cells
    return table


def _run(config: Path, out: Path, **kw):
    from trace_gym.pipeline.run import run_pipeline

    return run_pipeline(config, out, "smoke", **kw)


def _digest(path: Path) -> str:
    return hashlib.sha256(Path(path, "adapter_model.safetensors").read_bytes()).hexdigest()


@pytest.mark.slow
def test_the_pipeline_runs_resumes_and_reports_its_records(tmp_path, monkeypatch):
    config = _config(tmp_path)
    started = time.perf_counter()
    whole = _run(config, tmp_path / "whole")
    assert time.perf_counter() - started < 180, "the micro budget's whole pipeline takes at most 3 minutes"
    report = (tmp_path / "whole" / "report.md").read_text()
    assert "## Final evaluation" in report and (tmp_path / "whole" / "report.html").is_file()
    assert "| trace/airline-v0 | compound_rate | 0.000 | 0.300 |" in report  # a knob of the miniature, named
    assert "| trace/retail-v0 | opening | given | ask |" in report  # the embedded default's miniature of both
    assert whole.get(TRAIN).adapters and whole.find(COMPOSE) is not None
    assert set(whole.get(EVAL).order) >= {"base", "router", "mixture"}

    # the report's final table is recomputed, cell by cell, from the run directory's records
    targets = list(whole.config.targets)
    assert _final_table(report, targets) == _table_from_records(tmp_path / "whole", whole.get(EVAL).order, targets)

    # the answer comes first: the mixture against the base on each target, paired by seed
    assert report.startswith("# trace-gym pipeline report\n\n## The answer\n")
    answer = report.split("## The answer", 1)[1].split("\n## ", 1)[0]
    for env_id in targets:
        files = {label: next((tmp_path / "whole").rglob(f"{env_id.split('/')[1]}-{label}.jsonl"))
                 for label in ("mixture", "base")}
        passed = {label: {json.loads(line)["seed"]: float(json.loads(line)["passed"])
                          for line in f.read_text().splitlines()} for label, f in files.items()}
        diffs = [passed["mixture"][seed] - passed["base"][seed] for seed in sorted(passed["base"])]
        lo, hi = bootstrap_interval(diffs)
        row = f"| {env_id} | mixture vs base | "
        assert row in answer and f"| {sum(diffs) / len(diffs):+.3f} [{lo:+.3f}, {hi:+.3f}] |" in \
            answer.split(row, 1)[1].split("\n", 1)[0]

    # the page renders in a real browser, every image loaded
    if _chromium():
        png, title = _in_browser(tmp_path / "whole" / "report.html", tmp_path)
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
        loaded, total = map(int, title.removeprefix("images ").split("/"))
        assert total >= 4 and loaded == total, title

    # a second run reuses every stage
    again_start = time.perf_counter()
    again = _run(config, tmp_path / "whole")
    assert set(again.run.skipped) == set(again.run.seconds) and time.perf_counter() - again_start < 60

    # a target's code changes: the stages that play it run again, the others are reused
    from trace_gym import registry

    real_sha = registry.env_sha256
    with monkeypatch.context() as m:
        m.setattr(registry, "env_sha256", lambda env_id: real_sha(env_id) + ("x" if env_id in targets else ""))
        changed = _run(config, tmp_path / "whole")
    assert {"rollouts", "eval"} <= set(changed.run.seconds) - set(changed.run.skipped)
    assert "base_agent" in changed.run.skipped

    # killed during adapter training, then run again: the same adapters and table
    from trace_gym.pipeline.stages import train as train_stage

    real_train = train_stage.train_adapter
    calls = []

    def killed(config_, agent, env_id, directory, **overrides):
        calls.append(env_id)
        if len(calls) == 2:  # the second adapter: after its first iteration's checkpoint
            from trace_gym.trainer import training as trainer

            original = trainer.train

            def one_then_crash(*a, **k):
                def crash(row):
                    if row["iteration"] == 1:  # iteration 0 is checkpointed, 1 is lost
                        raise KeyboardInterrupt

                return original(*a, **k, on_iteration=crash)

            monkeypatch.setattr(trainer, "train", one_then_crash)
            try:
                return real_train(config_, agent, env_id, directory, **overrides)
            finally:
                monkeypatch.setattr(trainer, "train", original)
        return real_train(config_, agent, env_id, directory, **overrides)

    monkeypatch.setattr(train_stage, "train_adapter", killed)
    with pytest.raises(KeyboardInterrupt):
        _run(config, tmp_path / "killed")
    monkeypatch.setattr(train_stage, "train_adapter", real_train)
    resumed = _run(config, tmp_path / "killed")
    assert {e: _digest(a.adapter) for e, a in resumed.get(TRAIN).adapters.items()} == \
        {e: _digest(a.adapter) for e, a in whole.get(TRAIN).adapters.items()}
    strip = lambda t: {k: {e: {x: v for x, v in c.to_json().items() if x != "records"} for e, c in r.items()}
                       for k, r in t.items()}
    assert strip(resumed.get(EVAL).table) == strip(whole.get(EVAL).table)
    assert time.perf_counter() - started < 600


def test_a_stage_reruns_afresh_when_its_inputs_change_and_resumes_when_killed(tmp_path):
    """A killed stage finds its partial work under the same inputs; changed inputs start it
    afresh (its parts would refuse the new settings) instead of stopping the run."""
    from trace_gym.pipeline.contract import Run

    run = Run(tmp_path, log=lambda m: None)
    seen = []

    def work(directory, fail=False):
        seen.append(sorted(p.name for p in directory.iterdir() if not p.name.startswith(".")))
        (directory / "part").write_text("played")
        if fail:
            raise KeyboardInterrupt
        return {"n": len(seen)}

    with pytest.raises(KeyboardInterrupt):
        run.stage("rollouts", {"episodes": 4}, lambda d: work(d, fail=True))
    assert run.stage("rollouts", {"episodes": 4}, work) == {"n": 2}
    assert seen[1] == ["part"]  # resumed: the killed run's part was still there
    assert run.stage("rollouts", {"episodes": 4}, work) == {"n": 2}  # unchanged: reused, not run
    assert run.stage("rollouts", {"episodes": 8}, work) == {"n": 3}
    assert seen[2] == []  # changed: afresh


def test_the_answer_says_better_worse_or_no_difference_from_the_paired_interval(tmp_path):
    from trace_gym.pipeline.report import headline, markdown
    from trace_gym.pipeline.stages.eval import Cell, Evaluation

    def records(name, passes):
        path = tmp_path / name
        path.write_text("".join(json.dumps({"seed": 7 + i, "passed": bool(v)}) + "\n" for i, v in enumerate(passes)))
        return Cell(sum(passes) / len(passes), [0.0, 1.0], len(passes), 0.0, str(path))

    target = "trace/airline-v0"
    result = Evaluation({}, [], 16)
    for mixture, base, word in (([1, 1, 1, 0] * 4, [1, 0, 0, 0] * 4, "better"),
                                ([0] * 16, [1, 1, 1, 0] * 4, "worse"),
                                ([1, 0] * 8, [0, 1] * 8, "no detectable difference")):
        result.table = {"base": {target: records("base.jsonl", base)},
                        "mixture": {target: records("mixture.jsonl", mixture)}}
        text = markdown(headline(result, [target]))
        assert text.startswith("## The answer") and f"airline-v0 vs base: {word} (" in text
        assert f"| {target} | mixture vs base |" in text and text.rstrip().endswith(f"| {word} |")
    result.table = {"base": {target: records("base.jsonl", [1] * 16)}}
    assert "cannot say whether the method helps" in markdown(headline(result, [target]))


@pytest.mark.slow
def test_the_gepa_baseline_adds_a_row_or_says_why_not(tmp_path):
    pytest.importorskip("gepa")
    from tests.agents.fake_server import FakeServer

    config = _config(tmp_path)
    gepa = {"gepa": True, "gepa_model": "reflector", "gepa_max_metric_calls": 6, "gepa_train_seeds": 2,
            "gepa_val_seeds": 2}
    with FakeServer(lambda body: ("ok", {"content": "```\nLook up every record first.\n```"})) as server:
        state = _run(config, tmp_path / "run", overrides={"baselines": {**gepa, "gepa_base_url": server.url}})
    assert server.requests and server.requests[0]["model"] == "reflector"
    targets = state.config.targets
    gepa_runs, table = state.get(BASELINES).gepa, state.get(EVAL).table
    assert set(gepa_runs) == set(targets) and "GEPA" in state.get(EVAL).order
    for target in targets:  # the GEPA row played the target with its instructions, the base row without
        gepa_records = Path(table["GEPA"][target].records).read_text().splitlines()
        base_records = Path(table["base"][target].records).read_text().splitlines()
        knobs = json.loads(gepa_records[0])["run"]["env_kwargs"]
        assert knobs["agent_instructions"] == gepa_runs[target].instructions
        assert "agent_instructions" not in json.loads(base_records[0])["run"]["env_kwargs"]
    report = (tmp_path / "run" / "report.md").read_text()
    assert "mixture vs GEPA" in report.split("## The answer", 1)[1].split("\n## ", 1)[0]

    state = _run(config, tmp_path / "run", overrides={"baselines": {**gepa, "gepa_base_url": ""}})
    assert "GEPA" not in state.get(EVAL).order and "rollouts" in state.run.skipped
    assert "gepa_base_url names no reflection model" in (tmp_path / "run" / "report.md").read_text()
