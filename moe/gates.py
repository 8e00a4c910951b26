"""Gate training for the mixture of LoRA experts, and its diagnostics.

Data: successful (reward 1) trajectories of each capability env, played by that
capability's adapter on train seeds. Every assistant token of a trajectory is labelled with
its env's capability (slots 1..N); the base (slot 0) gets no label, it is the default its
bias sets. The backbone and the adapters stay frozen: only the gates train (asserted).

    loss = lm + label_weight * label + balance_weight * balance

- lm: next-token loss on the assistant tokens through the soft-routed model (every expert's
  delta weighted by the gate's probabilities; inference routes hard, top-1);
- label: cross-entropy of each layer's gate logits against the token's capability, averaged
  over layers (weight 0.5);
- balance: the Switch Transformer's load-balancing term, (N + 1) * sum_e f_e * P_e per layer
  (f_e: share of tokens whose top-1 is e, P_e: mean probability of e), averaged over layers
  (weight 0.001).

AdamW at lr 5e-4, 3 epochs, a linear warm-up over the first tenth of the steps, then a
linear decay to 0.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trace_gym.errors import InternalError
from trace_gym.moe.config import GateConfig
from trace_gym.moe.mixture import Mixture

logger = logging.getLogger(__name__)


@dataclass
class Example:
    """One gate-training example: a trajectory's token ids, which of them are assistant
    tokens, and its capability's slot."""

    ids: list[int]
    assistant: list[bool]
    """Per token: part of an assistant turn (labelled, and in the LM loss)."""
    label: int
    """The capability's slot (1..N)."""


def example(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]], label: int,
            max_tokens: int) -> Example:
    """A trajectory as token ids with the mask of its assistant tokens (the chat template's
    generation markers)."""
    rendered = tokenizer.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True,
                                             return_assistant_tokens_mask=True)
    ids, mask = rendered["input_ids"][:max_tokens], [bool(m) for m in rendered["assistant_masks"][:max_tokens]]
    return Example(ids, mask, label)


def _step_losses(mixture: Mixture, ex: Example, n: int) -> dict[str, torch.Tensor]:
    lm_model = mixture.model
    ids = torch.tensor([ex.ids], device=next(lm_model.parameters()).device)
    assistant = torch.tensor(ex.assistant, device=ids.device)                        # (T,)
    logits = lm_model(ids).logits[0, :-1].float()                                   # (T-1, V)
    targets = assistant[1:]
    lm = torch.nn.functional.cross_entropy(logits[targets], ids[0, 1:][targets]) if targets.any() \
        else logits.sum() * 0
    label, balance = [], []
    for gate_logits in mixture.gate_logits():                                       # each (T, N + 1)
        gate_logits = gate_logits.float()
        if assistant.any():
            wanted = torch.full((int(assistant.sum()),), ex.label, device=ids.device)
            label.append(torch.nn.functional.cross_entropy(gate_logits[assistant], wanted))
        probs = torch.softmax(gate_logits, -1)
        share = torch.nn.functional.one_hot(probs.argmax(-1), n + 1).float().mean(0)   # f_e
        balance.append((n + 1) * (share * probs.mean(0)).sum())                    # (N+1) sum f_e P_e
    zero = logits.sum() * 0
    return {"lm": lm, "label": torch.stack(label).mean() if label else zero, "balance": torch.stack(balance).mean()}


def train_gates(mixture: Mixture, data: list[Example], config: GateConfig = GateConfig()) -> list[dict[str, float]]:
    """Train the gates on `data` (one trajectory a step); return per-step losses."""
    params = mixture.gate_parameters()
    trainable = [p for p in mixture.model.parameters() if p.requires_grad]
    if trainable:
        raise InternalError("gate training: the backbone or the adapters have trainable parameters")
    n = len(mixture.adapters)
    generator = torch.Generator().manual_seed(config.seed)
    order = [i for _ in range(config.epochs) for i in torch.randperm(len(data), generator=generator).tolist()]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.0)
    history = []
    mixture.soft(True)
    mixture.model.eval()  # dropout off: the adapters and the backbone are frozen
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn

    from trace_gym.progress import progress_bar

    try:
        with progress_bar(logger, TextColumn("gates"), BarColumn(), MofNCompleteColumn(),
                          TextColumn("{task.fields[loss]}"), TimeRemainingColumn()) as bar:
            task = bar.add_task("gates", total=len(order), loss="")
            for step, i in enumerate(order):
                for group in optimizer.param_groups:
                    group["lr"] = lr_at(step, len(order), config)
                parts = _step_losses(mixture, data[i], n)
                loss = parts["lm"] + config.label_weight * parts["label"] + config.balance_weight * parts["balance"]
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if any(p.grad is not None for p in mixture.model.parameters()):
                    raise InternalError("gate training: a gradient reached the backbone or an adapter")
                optimizer.step()
                history.append({k: float(v.detach()) for k, v in parts.items()} | {"loss": float(loss.detach())})
                bar.update(task, advance=1, loss=f"loss {history[-1]['loss']:.3f}")
    finally:
        mixture.soft(False)
    return history


@torch.no_grad()
def routing(mixture: Mixture, data: list[Example]) -> dict[str, Any]:
    """Hard routing on `data`: per capability, the share of its assistant tokens whose top-1
    expert is its own (over layers), and per layer the share of all tokens each expert takes."""
    correct: dict[int, list[float]] = defaultdict(list)
    n = len(mixture.adapters)
    load = torch.zeros(len(mixture.gates), n + 1)
    tokens = 0
    for ex in data:
        mixture.model(torch.tensor([ex.ids], device=next(mixture.model.parameters()).device))
        assistant = torch.tensor(ex.assistant)
        for layer, gate_logits in enumerate(mixture.gate_logits()):
            choice = gate_logits.argmax(-1).cpu()
            load[layer] += torch.bincount(choice, minlength=n + 1).float()
            if assistant.any():
                correct[ex.label].append(float((choice[assistant] == ex.label).float().mean()))
        tokens += len(ex.ids)
    return {"accuracy": {mixture.names[k]: sum(v) / len(v) for k, v in sorted(correct.items())},
            "load": (load / max(1, tokens)).tolist(), "experts": mixture.names}


@torch.no_grad()
def heatmap(mixture: Mixture, ex: Example, path: str | Path, title: str = "") -> Path:
    """A PNG of the expert each layer chose for each token of one trajectory."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    mixture.model(torch.tensor([ex.ids], device=next(mixture.model.parameters()).device))
    grid = torch.stack([g.argmax(-1).cpu() for g in mixture.gate_logits()]).numpy()        # (layers, T)
    n = len(mixture.names)
    fig, ax = plt.subplots(figsize=(min(24, 4 + len(ex.ids) / 40), 4 + len(grid) / 8))
    colors = plt.get_cmap("tab10")(range(n))
    image = ax.imshow(grid, aspect="auto", interpolation="nearest", cmap=ListedColormap(colors), vmin=-0.5,
                      vmax=n - 0.5)
    spans = [i for i in range(len(ex.assistant)) if ex.assistant[i] and (i == 0 or not ex.assistant[i - 1])]
    for start in spans:
        ax.axvline(start - 0.5, color="black", linewidth=0.5)
    bar = fig.colorbar(image, ax=ax, ticks=range(n))
    bar.ax.set_yticklabels(mixture.names)
    ax.set_xlabel("token (lines: an assistant turn starts)")
    ax.set_ylabel("layer")
    ax.set_title(title or "expert chosen per token and layer")
    path = Path(path)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def lr_at(step: int, total: int, config: GateConfig) -> float:
    """The learning rate of a step (warm-up, then linear decay)."""
    warmup = max(1, int(config.warmup * total))
    return config.lr * ((step + 1) / warmup if step < warmup else max(0.0, (total - step) / (total - warmup)))
