"""The run's report: `report.md` with its PNGs beside it, and the same as one self-contained
HTML page (`report.html`, images inlined). Both are rendered from one list of blocks, so they
say the same thing; every number comes from the stage records and the evaluation records of
the run directory."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym.pipeline.config import knobs
from trace_gym.targets.config import scaled_knobs


@dataclass
class Block:
    """One piece of the report: a heading, a paragraph, a table (`rows`, the first the
    header) or an image (`path`, `text` its caption)."""

    kind: str
    """'h1', 'h2', 'p', 'table' or 'image'."""
    text: str = ""
    rows: list[list[str]] | None = None
    path: Path | None = None


def _curves(metrics: Path, out: Path, title: str) -> Path:
    from trace_gym.trainer.curves import plot_curves
    from trace_gym.trainer.metrics import MetricsLog

    return plot_curves(MetricsLog.read(metrics), out, title)


def _fmt(value: Any) -> str:
    return f"{value:.3f}" if isinstance(value, float) else str(value)


def paired_difference(method: str, rival: str, target: str, table: dict[str, Any]) -> dict[str, Any]:
    """`method`'s pass rate minus `rival`'s on the test seeds both played, with a 95%
    bootstrap interval over the seeds (paired: each seed's two outcomes resampled together)."""
    from trace_gym import evaluation
    from trace_gym.rollout import read_records

    theirs, mine = (read_records(Path(table[m][target]["records"])) for m in (rival, method))
    return evaluation.paired_difference(evaluation.paired(theirs, mine))


def verdict(low: float, high: float) -> str:
    """The word for a difference's 95% interval: "better" when it lies above 0, "worse"
    below, else "no detectable difference"."""
    if low > 0:
        return "better"
    if high < 0:
        return "worse"
    return "no detectable difference"


def headline(state: dict[str, Any]) -> list[Block]:
    """The answer first: did the method (the composed adapters) beat the base agent, and
    each baseline that was run, on each target, by how much, with intervals."""
    table, targets = state["eval"]["table"], state["config"]["pipeline"]["targets"]
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
            rows.append([target, f"{method} vs {rival}", f"{table[method][target]['pass_rate']:.3f}",
                         f"{table[rival][target]['pass_rate']:.3f}", f"{d['difference']:+.3f} [{lo:+.3f}, {hi:+.3f}]",
                         word])
            said.append(f"{target.split('/')[1]} vs {rival}: {word} ({d['difference']:+.3f})")
    name = "the token-level mixture of the adapters" if method == "mixture" else "the task router over the adapters"
    notes = [Block("p", state["gepa_note"])] if state.get("gepa_note") else []
    return [Block("h2", "The answer"), *notes,
            Block("p", f"TRACE ({name}) against the base agent and each baseline run, pass rate on the same "
                       f"{state['eval']['seeds']} test seeds of each target (greedy), the difference paired by seed "
                       f"with its 95% bootstrap interval: " + "; ".join(said) + "."),
            Block("table", rows=[["target", "comparison", "TRACE", "rival", "difference [95% interval]", "verdict"]]
                  + rows)]


def blocks(run: Path, state: dict[str, Any]) -> list[Block]:
    """The whole report as blocks: the headline answer, then configuration, analysis,
    calibration, training, composition and the final evaluation."""
    agent = state["agent"]
    served = (f", served as {agent['served_model']!r} by {state['config']['base_agent']['base_url']}"
              if "served_model" in agent else "")
    out: list[Block] = [Block("h1", "trace-gym pipeline report"), *headline(state),
                        Block("p", f"Configuration {state['config']['source']} (budget {state['config']['budget']}); "
                                   f"base agent {agent['path']}{served}.")]
    scaled = [[env_id, name, _fmt(value), _fmt(full)] for env_id in state["config"]["pipeline"]["targets"]
              for name, value, full in scaled_knobs(state["config"]["env_knobs"].get(env_id, {}))]
    if scaled:
        out.append(Block("p", "The targets are scaled down from the full ones `gym.make` builds, to what the base "
                              "agent's model can learn (the configuration's env_knobs):"))
        out.append(Block("table", rows=[["target", "knob", "this run", "full target"]] + scaled))
    out.append(Block("h2", "Capability analysis"))
    caps = state["analysis"]["capabilities"]
    out.append(Block("table", rows=[["capability", "status", "mean Delta", "mean coverage"]] +
                     [[c["name"], c["status"], _fmt(c["mean_delta"]), _fmt(c["mean_cov"])] for c in caps]))
    chart = run / "analysis" / "capabilities.png"
    if chart.is_file():
        out.append(Block("image", "Delta and coverage per capability, with the thresholds", path=chart))
    for note in state["envs"]["notes"]:
        out.append(Block("p", note))
    out.append(Block("h2", "Calibration of the base agent (temperature 1.0)"))
    out.append(Block("table", rows=[["env", "mean reward", "success rate", "reward std", "in the bands"]] +
                     [[env, _fmt(c["mean_reward"]), _fmt(c["success_rate"]), _fmt(c["reward_std"]),
                       "yes" if c["calibrated"] else "no: " + "; ".join(c["problems"])]
                      for env, c in state["calibration"].items()]))
    out.append(Block("h2", "Training"))
    for env_id, a in state["adapters"].items():
        png = _curves(Path(a["metrics"]), run / "report" / f"curves-{env_id.split('/')[1]}.png",
                      f"GRPO on {env_id}: success, reward and verdict checks")
        out.append(Block("image", f"{env_id}: {a['episodes']} episodes", path=png))
    for env_id, d in state.get("direct", {}).items():
        png = _curves(Path(d["metrics"]), run / "report" / f"curves-direct-{env_id.split('/')[1]}.png",
                      f"direct GRPO on {env_id}")
        out.append(Block("image", f"direct GRPO on {env_id}: {d['episodes']} episodes", path=png))
    composed = state.get("compose")
    out.append(Block("h2", "Composition"))
    if composed:
        accuracy = composed["routing"]["accuracy"]
        if composed["routing"].get("note"):
            out.append(Block("p", composed["routing"]["note"] + "."))
        else:
            out.append(Block("p", f"Gate data: {composed['gate_data']} trajectories. Held-out routing accuracy: " +
                             ", ".join(f"{k} {v:.3f}" for k, v in accuracy.items()) + "."))
        heat = Path(composed["directory"]) / "routing.png"
        if heat.is_file():
            out.append(Block("image", "expert chosen per token and layer, one held-out trajectory", path=heat))
    else:
        out.append(Block("p", state.get("compose_note", "No composition: fewer than one trained adapter.")))
    out.append(Block("h2", "Final evaluation"))
    table = state["eval"]["table"]
    targets = state["config"]["pipeline"]["targets"]
    styles = "/".join(sorted({knobs(state["config"], t).get("prompt_style", "full") for t in targets}))
    out.append(Block("p", f"Pass rate on the first {state['eval']['seeds']} test seeds of each target (greedy, "
                          f"{styles} prompts), with a 95% bootstrap interval."))
    out.append(Block("table", rows=[["policy", *targets]] + [
        [label, *(f"{table[label][t]['pass_rate']:.3f} [{table[label][t]['ci95'][0]:.3f}, "
                  f"{table[label][t]['ci95'][1]:.3f}]" for t in targets)]
        for label in state["eval"].get("order", list(table))]))
    if state["eval"]["seeds"] < 64:
        out.append(Block("p", f"At this budget ({state['eval']['seeds']} test seeds per target) the intervals are "
                              "wide: differences between the rows are not evidence either way. "
                              "`benchmarks/mini_trace.py` measures the paper's claims at a larger budget."))
    out.append(Block("h2", "Time per stage"))
    out.append(Block("table", rows=[["stage", "seconds", ""]] + [
        [name, f"{s:.0f}", "reused" if name in state["skipped"] else ""] for name, s in state["seconds"].items()]))
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
        elif b.kind == "table":
            head, *body = b.rows
            lines.append("| " + " | ".join(head) + " |")
            lines.append("|" + "|".join("---" for _ in head) + "|")
            lines += ["| " + " | ".join(r) + " |" for r in body]
            lines.append("")
        elif b.kind == "image":
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
        elif b.kind == "table":
            head, *body = b.rows
            parts.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body]
            parts.append("</table>")
        elif b.kind == "image":
            data = base64.b64encode(b.path.read_bytes()).decode()
            parts.append(f"<figure><img alt='{html.escape(b.text)}' src='data:image/png;base64,{data}'>"
                         f"<figcaption>{html.escape(b.text)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write(run: Path, state: dict[str, Any]) -> dict[str, str]:
    """Write report.md (PNGs in report/) and report.html; return their paths."""
    import shutil

    (run / "report").mkdir(parents=True, exist_ok=True)
    items = blocks(run, state)
    for b in items:  # every image beside the markdown
        if b.kind == "image" and b.path.parent != run / "report":
            target = run / "report" / f"{b.path.parent.name}-{b.path.name}"
            shutil.copyfile(b.path, target)
            b.path = target
    (run / "report.md").write_text(markdown(items), encoding="utf-8")
    (run / "report.html").write_text(page(items), encoding="utf-8")
    return {"markdown": str(run / "report.md"), "html": str(run / "report.html")}
