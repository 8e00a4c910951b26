"""Checkpoints of a training run, written so that a crash loses at most the iteration in flight.

A checkpoint is a directory `checkpoints/iter-NNNNN/` with the adapter (peft's own format),
the optimiser's state and `state.json` (the iteration it follows, the config's key, the best
validation figure so far). It is written under a temporary name and renamed into place, and
`checkpoints/latest.json` names the newest one (written atomically after the rename), so a
reader never sees half of one. Every random stream of the trainer derives from (seed,
iteration), so the model, the optimiser and the iteration number are the whole state.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from trace_gym.errors import TraceGymError
from trace_gym.jsondata import write_json_atomic


def save(run_dir: Path, iteration: int, model: Any, optimizer: Any, state: dict[str, Any], keep: int = 2) -> Path:
    """Write the checkpoint of `iteration` (adapter, optimiser state, `state.json`) under a
    temporary name, rename it into place, point `latest.json` at it, and keep only the
    newest `keep` checkpoints. Returns its directory."""
    import torch

    root = Path(run_dir) / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"iter-{iteration:05d}"
    tmp = root / f".iter-{iteration:05d}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp / "adapter")
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    write_json_atomic(tmp / "state.json", {**state, "iteration": iteration})
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    write_json_atomic(root / "latest.json", {"checkpoint": final.name, "iteration": iteration})
    older = sorted(p for p in root.glob("iter-*") if p != final)
    for old in older[: max(0, len(older) - (keep - 1))]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest(run_dir: Path) -> Path | None:
    """The newest complete checkpoint of a run, or None."""
    pointer = Path(run_dir) / "checkpoints" / "latest.json"
    if not pointer.is_file():
        return None
    try:
        name = json.loads(pointer.read_text())["checkpoint"]
    except (ValueError, KeyError, TypeError):
        raise TraceGymError(f"{pointer} is not a checkpoint pointer (JSON with a 'checkpoint' name)") from None
    path = pointer.parent / name
    if not (path / "state.json").is_file():
        raise TraceGymError(f"{pointer} names {name}, which is not a complete checkpoint")
    return path


def load(path: Path, model: Any, optimizer: Any) -> dict[str, Any]:
    """Put a checkpoint's adapter and optimiser state into `model` and `optimizer`; return its state."""
    import torch
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    weights = load_file(str(path / "adapter" / "adapter_model.safetensors"))
    result = set_peft_model_state_dict(model, weights)
    unexpected = getattr(result, "unexpected_keys", [])
    if unexpected:
        raise TraceGymError(f"{path}: the checkpoint's adapter does not fit the model ({unexpected[:3]} ...)")
    optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    return json.loads((path / "state.json").read_text())
