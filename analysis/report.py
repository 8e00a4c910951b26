"""Step 1 outputs: selected_capabilities.json, a rich table and a PNG chart."""

from __future__ import annotations

import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from trace_gym.analysis.aggregate import Params
from trace_gym.jsondata import write_json_atomic

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1


def shipped_capabilities() -> set[str]:
    """The capabilities a registered capability env already covers (by exact name)."""
    from trace_gym.registry import list_envs

    return {e.capability for e in list_envs() if e.kind == "capability" and e.capability}


def selection(summaries: list[dict[str, Any]], definitions: dict[str, str], records: list[dict[str, Any]],
              runs: list[dict[str, dict[str, str]]], params: Params, inputs_sha256: str) -> dict[str, Any]:
    """The content of selected_capabilities.json: every candidate with its figures, status and
    failed examples, the parameters and the inputs' sha256."""
    shipped = shipped_capabilities()
    failed = {r["id"] for r in records if not r["passed"]}
    capabilities = []
    for s in summaries:
        lacking_failed = sorted({t for run in runs for t, lab in run.get(s["name"], {}).items()
                                 if lab == "LACKING" and t in failed})
        status = "NOT_SELECTED"
        if s["passes_consistency"]:
            status = "SHIPPED" if s["name"] in shipped else "PENDING"
        capabilities.append({
            "name": s["name"], "description": definitions.get(s["name"], ""),
            "mean_cov": round(s["mean_cov"], 6), "std_cov": round(s["std_cov"], 6),
            "mean_delta": round(s["mean_delta"], 6), "std_delta": round(s["std_delta"], 6),
            "runs_passed": s["runs_passed"], "runs": s["runs"], "passes_consistency": s["passes_consistency"],
            "example_failed_ids": lacking_failed[:5], "status": status,
        })
    return {"schema_version": SCHEMA_VERSION, "params": asdict(params), "inputs_sha256": inputs_sha256,
            "trajectories": {"passed": sum(r["passed"] for r in records), "failed": len(failed)},
            "capabilities": capabilities}


def write(out_dir: Path, data: dict[str, Any]) -> Path:
    """Write selected_capabilities.json to `out_dir`; returns its path."""
    path = Path(out_dir) / "selected_capabilities.json"
    write_json_atomic(path, data)
    return path


def chart(out_dir: Path, data: dict[str, Any]) -> Path | None:
    """Draw the capabilities' mean Delta and coverage as a PNG chart in `out_dir`; returns its
    path, or None (with a warning naming the extra) where matplotlib is not installed."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        logger.warning("capabilities.png not drawn: matplotlib is not installed (pip install 'trace-gym[plot]')")
        return None

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    caps = data["capabilities"]
    names = [c["name"].replace("_", "\n", 1) for c in caps]
    xs = range(len(caps))
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(caps)), 4.5))
    width = 0.38
    ax.bar([x - width / 2 for x in xs], [c["mean_delta"] for c in caps], width, yerr=[c["std_delta"] for c in caps],
           label="Delta (ER- minus ER+)", color=["#2b7bba" if c["passes_consistency"] else "#9bbbd4" for c in caps])
    ax.bar([x + width / 2 for x in xs], [c["mean_cov"] for c in caps], width, yerr=[c["std_cov"] for c in caps],
           label="coverage of failures", color=["#e08a2c" if c["passes_consistency"] else "#f2c594" for c in caps])
    ax.axhline(data["params"]["delta"], color="#2b7bba", linestyle="--", linewidth=1, label=f"delta = {data['params']['delta']}")
    ax.axhline(data["params"]["rho"], color="#e08a2c", linestyle=":", linewidth=1, label=f"rho = {data['params']['rho']}")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(names, fontsize=8)
    for label, c in zip(ax.get_xticklabels(), caps):  # the selected ones named in bold as well as drawn dark
        label.set_fontweight("bold" if c["passes_consistency"] else "normal")
    ax.set_ylabel("mean over labelling runs")
    selected = sum(bool(c["passes_consistency"]) for c in caps)
    ax.set_title(f"Capability analysis: {selected} of {len(caps)} selected (dark bars, bold names; light: not)")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    path = Path(out_dir) / "capabilities.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def table(data: dict[str, Any]) -> None:
    """Print the selection as a table on the console."""
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"capabilities ({data['trajectories']['passed']} passed, {data['trajectories']['failed']} failed "
                    f"trajectories; rho {data['params']['rho']}, delta {data['params']['delta']}, "
                    f"K {data['params']['k']} of N {data['params']['n']})")
    for col in ("capability", "mean Delta", "mean Cov", "runs passed", "status"):
        t.add_column(col)
    for c in data["capabilities"]:
        t.add_row(c["name"], f"{c['mean_delta']:.3f} ± {c['std_delta']:.3f}", f"{c['mean_cov']:.3f} ± {c['std_cov']:.3f}",
                  f"{c['runs_passed']}/{c['runs']}", c["status"])
    Console().print(t)
