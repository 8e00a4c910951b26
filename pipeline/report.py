"""The run's report: `report.md` with its PNGs beside it, and the same as one self-contained
HTML page (`report.html`, images inlined). Both are rendered from one list of blocks (the
headline answer, then each stage's own blocks: `Stage.report`), so they say the same thing;
every number comes from the stage records and the evaluation records of the run directory."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from trace_gym.pipeline.contract import Block, State
from trace_gym.pipeline.stages.base_agent import STAGE as BASE_AGENT
from trace_gym.pipeline.stages.base_agent import BaseAgentTable
from trace_gym.pipeline.stages.baselines import STAGE as BASELINES
from trace_gym.pipeline.stages.eval import STAGE as EVAL
from trace_gym.pipeline.stages.eval import Cell, Evaluation
from trace_gym.targets.config import scaled_knobs


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def paired_difference(method: str, rival: str, target: str, table: dict[str, dict[str, Cell]]) -> dict[str, Any]:
    """`method`'s pass rate minus `rival`'s on the test seeds both played, with a 95%
    bootstrap interval over the seeds (paired: each seed's two outcomes resampled together)."""
    from trace_gym import evaluation
    from trace_gym.rollout import read_records

    theirs, mine = (read_records(Path(table[m][target].records)) for m in (rival, method))
    return evaluation.paired_difference(evaluation.paired(theirs, mine))


def verdict(low: float, high: float) -> str:
    """The word for a difference's 95% interval: "better" when it lies above 0, "worse"
    below, else "no detectable difference"."""
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return "no detectable difference"


def headline(result: Evaluation, targets: tuple[str, ...] | list[str], note: str | None = None) -> list[Block]:
    """The answer first: did the method (the composed adapters) beat the base agent, and
    each baseline that was run, on each target, by how much, with intervals (`note`: why a
    baseline that is on has no row)."""
    table = result.table
    method = next((m for m in ("mixture", "router") if m in table), None)
    if method is None:
        return [Block("h2", "The answer"),
                Block("p", "No composed policy was evaluated (no adapter was trained), so this run cannot say whether "
                           "the method helps; see the analysis and calibration below for why.")]
    rivals = ["base", *(label for label in table if label.startswith(("direct GRPO", "GEPA")))]
    rows, said = [], []
    for target in targets:
        for rival in rivals:
            d = paired_difference(method, rival, target, table)
            lo, hi = d["ci95"]
            word = verdict(lo, hi)
            rows.append([target, f"{method} vs {rival}", f"{table[method][target].pass_rate:.3f}",
                         f"{table[rival][target].pass_rate:.3f}", f"{d['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}]",
                         word])
            said.append(f"{target.split('/')[1]} vs {rival}: {word} ({d['difference']:+.3f})")
    name = "the token-level mixture of the adapters" if method == "mixture" else "the task router over the adapters"
    notes = [Block("p", note)] if note else []
    return [Block("h2", "The answer"), *notes,
            Block("p", f"TRACE ({name}) against the base agent and each baseline run, pass rate on the same "
                       f"{result.seeds} test seeds of each target (greedy), the difference paired by seed "
                       f"with its 95% bootstrap interval: " + "; ".join(said) + "."),
            Block("table", rows=[["target", "comparison", "TRACE", "rival", "difference [95% interval]", "verdict"]]
                  + rows)]


def blocks(state: State) -> list[Block]:
    """The whole report as blocks: the headline answer, the configuration, then each stage's
    blocks in the stages' order, and the time each stage took."""
    config = state.config
    agent = state.get(BASE_AGENT)
    served = (f", served as {agent.served_model!r} by {config.table(BaseAgentTable).base_url}"
              if agent.served_model else "")
    baselines, evaluation = state.find(BASELINES), state.find(EVAL)
    answer = headline(evaluation, config.targets, baselines.note if baselines else None) if evaluation else []
    out: list[Block] = [Block("h1", "trace-gym pipeline report"), *answer,
                        Block("p", f"Configuration {config.source} (budget {config.budget}); base agent "
                                   f"{agent.path}{served}.")]
    scaled = [[env_id, name, _fmt(value), _fmt(full)] for env_id in config.targets
              for name, value, full in scaled_knobs(config.env_knobs.get(env_id, {}))]
    if scaled:
        out.append(Block("p", "The targets are scaled down from the full ones `gym.make` builds, to what the base "
                              "agent's model can learn (the configuration's env_knobs):"))
        out.append(Block("table", rows=[["target", "knob", "this run", "full target"]] + scaled))
    for stage in state.stages:
        if state.find(stage) is not None or stage.name in state.notes:
            out += stage.report(state)
    out.append(Block("h2", "Time per stage"))
    out.append(Block("table", rows=[["stage", "seconds", ""]] + [
        [name, f"{s:.0f}", "reused" if name in state.run.skipped else ""] for name, s in state.run.seconds.items()]))
    return out


def markdown(items: list[Block]) -> str:
    """The blocks as Markdown, images linked from `report/`."""
    lines = []
    for b in items:
        if b.kind == "h1":
            lines.append(f"# {b.text}\n")
        elif b.kind == "h2":
            lines.append(f"## {b.text}\n")
        elif b.kind == "p":
            lines.append(b.text + "\n")
        elif b.kind == "table" and b.rows:
            head, *body = b.rows
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "|".join("---" for _ in head) + "|")
            lines += ["| " + " | ".join(r) + " |" for r in body]
            lines.append("")
        elif b.kind == "image" and b.path is not None:
            lines.append(f"![{b.text}](report/{b.path.name})\n")
    return "\n".join(lines)


def page(items: list[Block]) -> str:
    """The blocks as one self-contained HTML page, text escaped and images inlined."""
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>trace-gym pipeline report</title><style>",
             "body{font-family:sans-serif;max-width:980px;margin:2em auto;padding:0 1em;color:#222}",
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:4px 8px;text-align:left}",
             "th{background:#eee}img{max-width:100%;border:1px solid #ddd}figcaption{color:#555;font-size:90%}",
             "</style></head><body>"]
    for b in items:
        if b.kind in ("h1", "h2"):
            parts.append(f"<{b.kind}>{html.escape(b.text)}</{b.kind}>")
        elif b.kind == "p":
            parts.append(f"<p>{html.escape(b.text)}</p>")
        elif b.kind == "table" and b.rows:
            head, *body = b.rows
            parts.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body]
            parts.append("</table>")
        elif b.kind == "image" and b.path is not None:
            data = base64.b64encode(b.path.read_bytes()).decode()
            parts.append(f"<figure><img alt='{html.escape(b.text)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{html.escape(b.text)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write(state: State) -> dict[str, str]:
    """Write report.md (PNGs in report/) and report.html; return their paths."""
    import shutil

    run = state.out
    (run / "report").mkdir(parents=True, exist_ok=True)
    items = blocks(state)
    for b in items:  # every image beside the markdown
        if b.kind == "image" and b.path is not None and b.path.parent != run / "report":
            target = run / "report" / f"{b.path.parent.name}-{b.path.name}"
            shutil.copyfile(b.path, target)
            b.path = target
    (run / "report.md").write_text(markdown(items), encoding="utf-8")
    (run / "report.html").write_text(page(items), encoding="utf-8")
    return {"markdown": str(run / "report.md"), "html": str(run / "report.html")}
