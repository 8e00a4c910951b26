"""A training run's curves: success, reward and each verdict check by iteration, as a PNG.

Read from the run's `metrics.jsonl` (`trace_gym.trainer.metrics`). Success is the pass rate
of the rollouts played without the hint (the policy's own), where the log has it; a check's
line is the share of the iteration's episodes that passed it (its mean credit in logs written
before `checks_passed/*` existed), so a reward hack shows as one check climbing while the
others stay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plot_curves(rows: list[dict[str, Any]], out: str | Path, title: str) -> Path:
    """Write the curves of these metrics rows (one per iteration) to the PNG `out`; return it."""
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    out = Path(out)
    x = [r["iteration"] + 1 for r in rows]
    success = "reward/hint_free_pass_rate" if any("reward/hint_free_pass_rate" in r for r in rows) \
        else "reward/pass_rate"
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(x, [r.get(success, float("nan")) for r in rows], label="success (hint-free)"
            if success.endswith("hint_free_pass_rate") else "success", linewidth=2.5, color="black", marker="o")
    ax.plot(x, [r.get("reward/mean", float("nan")) for r in rows], label="reward (mean)", linewidth=1.5,
            color="grey", linestyle="--")
    prefix = "checks_passed/" if any(k.startswith("checks_passed/") for r in rows for k in r) else "checks/"
    for name in sorted({k for r in rows for k in r if k.startswith(prefix)}):
        ax.plot(x, [r.get(name, float("nan")) for r in rows], label=name[len(prefix):], linewidth=1, marker=".")
    ax.set_xlabel("iteration")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="best")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90, bbox_inches="tight")
    plt.close(fig)
    return out
