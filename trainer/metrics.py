"""The trainer's metrics: one table of names, a JSON Lines log, a live view, TensorBoard.

Every iteration writes one JSON object to `metrics.jsonl` in the run directory. `checks/*`
holds the mean credit of each of the verdict's checks over the iteration's episodes, so a
reward hack shows up as one check climbing while the others stay.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

METRICS = {
    "reward/mean": "mean episode reward over every episode played",
    "reward/std": "standard deviation of those rewards",
    "reward/pass_rate": "share of episodes with reward 1",
    "reward/hint_free": "mean reward of the episodes played without the hint (the policy's own)",
    "reward/hint_free_pass_rate": "pass rate of the episodes played without the hint",
    "groups/constant_share": "share of the first G groups whose K rewards were all equal (dropped)",
    "groups/constant_share_all": "share of every group played, resampling rounds included, that was constant",
    "groups/informative": "groups with reward variance in the batch",
    "groups/rounds": "rounds of seeds drawn (1: no resampling)",
    "episodes/total": "episodes played this iteration (the rollout budget)",
    "loss/policy": "clipped surrogate, weighted as the loss is",
    "loss/kl": "k3 KL estimate against the adapter-disabled model (0 when beta = 0)",
    "loss/clip_fraction": "share of completion tokens whose clipped term was taken",
    "loss/grad_norm": "gradient norm before clipping",
    "loss/logp_mismatch": "mean |log p_trainer - log p_sampler| on tokens sampled from the hint-free prompt",
    "tokens/completion": "completion tokens in the loss",
    "policy/logp_change": "mean change of the batch's completion tokens' log-probability over the update",
    "policy/logp_change_toward_advantage": "the same, signed by each token's advantage (> 0: the way the loss asks)",
    "policy/kl_to_base": "k3 KL of the updated policy to the adapter-disabled model on the batch's tokens",
    "tokens/prompt": "prompt tokens of the loss's samples",
    "tokens/turns": "agent turns played",
    "time/rollout_s": "seconds of rollouts (generation and env steps)",
    "time/sync_s": "of time/rollout_s, seconds giving the rollout backend the adapter (save, fuse, rebuild)",
    "time/update_s": "seconds of the loss, backward and optimiser steps",
    "time/forward_backward_s": "of time/update_s, seconds of the loss's forward and backward passes (every step)",
    "time/optimizer_s": "of time/update_s, seconds of gradient clipping and AdamW steps",
    "time/movement_s": "of time/update_s, seconds measuring the movement (policy/*: three fp32 passes on movement_samples samples)",
    "val/mean_reward": "mean reward on the validation slice (when evaluated)",
    "val/pass_rate": "pass rate on the validation slice (when evaluated)",
    "val/std_error": "standard error of val/mean_reward over its seeds (each seed's mean over eval_samples)",
}
"""Name -> meaning; `checks/<name>` (mean credit) and `checks_passed/<name>` (share of episodes
that passed it) add one entry each per verdict check."""


class MetricsLog:
    """`metrics.jsonl`: one line per iteration, flushed and synced as it is written."""

    def __init__(self, path: Path, keep_through: int | None = None) -> None:
        """Open the log; with `keep_through`, drop the lines of later iterations (a resumed
        run recomputes them)."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rows = self.read(self.path) if self.path.exists() else []
        if keep_through is not None:
            rows = [r for r in rows if r.get("iteration", -1) <= keep_through]
        else:
            rows = []
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
        os.replace(tmp, self.path)
        self.rows = rows
        self.tensorboard = _tensorboard(self.path.parent)

    @staticmethod
    def read(path: Path) -> list[dict[str, Any]]:
        """The rows of a metrics log, up to a line cut short by a crash."""
        rows = []
        for line in Path(path).read_text().splitlines():
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except ValueError:  # a line cut short by a crash
                    break
        return rows

    def write(self, row: dict[str, Any]) -> None:
        """Append one iteration's row, flushed and synced, and send its numbers to
        TensorBoard when it is on."""
        with open(self.path, "a") as f:
            f.write(json.dumps(row, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.rows.append(row)
        if self.tensorboard is not None:
            for name, value in row.items():
                if name != "iteration" and isinstance(value, (int, float)):
                    self.tensorboard.add_scalar(name, value, row["iteration"])
            self.tensorboard.flush()

    def close(self) -> None:
        """Close the TensorBoard writer, if any."""
        if self.tensorboard is not None:
            self.tensorboard.close()


def _tensorboard(directory: Path) -> Any:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is not installed: the JSONL log is the record
        return None
    return SummaryWriter(str(directory / "tensorboard"))


def summary_table(row: dict[str, Any], total: int) -> Any:
    """A rich table of one iteration's headline metrics."""
    from rich.table import Table

    table = Table(title=f"iteration {row['iteration'] + 1}/{total}", show_header=False, box=None)
    for name in ("reward/mean", "reward/hint_free", "reward/pass_rate", "groups/constant_share_all",
                 "loss/clip_fraction", "loss/logp_mismatch", "policy/logp_change_toward_advantage",
                 "policy/kl_to_base", "tokens/completion", "time/rollout_s", "time/sync_s", "time/update_s",
                 "time/forward_backward_s", "time/movement_s", "val/mean_reward"):
        if name in row:
            value = row[name]
            table.add_row(name, f"{value:.3f}" if isinstance(value, float) else str(value))
    checks = [(k, v) for k, v in row.items() if k.startswith("checks/")]
    if checks:
        table.add_row("checks", ", ".join(f"{k[7:]} {v:.2f}" for k, v in checks))
    return table
