"""A token-level mixture of frozen LoRA experts (TRACE, step 4b).

The base model and N trained adapters stay frozen. Every decoder layer gets a gate
`Linear(hidden, N + 1)` with bias that reads the layer's input after its input layernorm;
slot 0 is the base (no adapter), slots 1..N the adapters. At init the gate's weights are
zero and bias[0] = 5.0, so the base wins every token and the mixture is the base model.

Each token goes top-1 to one expert, and every LoRA-adapted module of that layer (the
attention and MLP projections) adds only that expert's delta for it: the routed forward
groups a layer's tokens by expert and runs each expert's A and B on its own tokens only,
never every expert on every token. Gate training runs the soft mixture instead (every
expert's delta weighted by the gate's probabilities), so that the LM loss reaches the gates.

The adapters are read from peft's files (A, B and the scaling alpha / r of every module they
target); the model's own linear modules are wrapped in place, so the mixture is the same
transformers model with the same forward, caches and generation, for the Llama and Qwen3
families and any other whose decoder layers have an `input_layernorm`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from trace_gym.agents import prefix

BASE_BIAS = 5.0


@dataclass
class Adapter:
    """One peft LoRA adapter's tensors, by the model's module name."""

    name: str
    path: Path
    A: dict[str, torch.Tensor]
    """module name -> (r, in)"""
    B: dict[str, torch.Tensor]
    """module name -> (out, r)"""
    scaling: float


def load_adapter(path: str | Path, name: str | None = None) -> Adapter:
    """A peft adapter directory's LoRA tensors (adapter_config.json, adapter_model.safetensors)."""
    from safetensors.torch import load_file

    path = Path(path)
    config = json.loads((path / "adapter_config.json").read_text())
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{path}: not a LoRA adapter (peft_type {config.get('peft_type')!r})")
    r, alpha = config["r"], config["lora_alpha"]
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise ValueError(f"{path}: per-module ranks or alphas are not supported")
    scaling = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    A, B = {}, {}
    for key, tensor in load_file(str(path / "adapter_model.safetensors")).items():
        match = re.fullmatch(r"base_model\.model\.(.+)\.lora_([AB])\.weight", key)
        if match:
            (A if match.group(2) == "A" else B)[match.group(1)] = tensor
    if not A or set(A) != set(B):
        raise ValueError(f"{path}: the adapter's lora_A and lora_B weights do not pair up")
    return Adapter(name or path.name, path, A, B, scaling)


@dataclass
class Route:
    """A decoder layer's routing for the tokens in flight, written by its gate."""

    logits: torch.Tensor | None = None
    """(tokens, N + 1) gate logits of the last forward."""
    probs: torch.Tensor | None = None
    """(tokens, N + 1) in soft mode."""
    index: list[torch.Tensor | None] = field(default_factory=list)
    """Per expert 1..N (index e - 1): the flat token indices routed to it, in hard mode."""


class RoutedLoRALinear(nn.Module):
    """A frozen linear layer plus the LoRA deltas of N experts, applied per token as its
    layer's `Route` says."""

    def __init__(self, base: nn.Linear, route: Route, A: list[torch.Tensor | None], B: list[torch.Tensor | None],
                 scaling: list[float]) -> None:
        super().__init__()
        self.base, self.route = base, route
        self.experts = [e for e, a in enumerate(A) if a is not None]
        for e in self.experts:
            self.register_buffer(f"A{e}", A[e].to(base.weight), persistent=False)
            self.register_buffer(f"B{e}", B[e].to(base.weight), persistent=False)
        self.scaling = scaling

    def delta(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert e's LoRA delta for rows `x` (n, in) -> (n, out)."""
        return (x @ getattr(self, f"A{e}").T) @ getattr(self, f"B{e}").T * self.scaling[e]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base(x)                                                     # (..., out)
        flat_x = x.reshape(-1, x.shape[-1])                                  # (tokens, in)
        route = self.route
        if route.probs is not None:  # soft: every expert on every token, weighted (gate training)
            delta = sum(route.probs[:, e + 1: e + 2] * self.delta(e, flat_x) for e in self.experts)
            return y + delta.reshape(y.shape) if self.experts else y
        flat_y = y.reshape(-1, y.shape[-1])
        for e in self.experts:
            index = route.index[e] if e < len(route.index) else None
            if index is not None and len(index):
                flat_y = flat_y.index_add(0, index, self.delta(e, flat_x[index]))
        return flat_y.reshape(y.shape)


class Gate(nn.Module):
    """`Linear(hidden, N + 1)` over the layer's normalised input; routes its tokens."""

    def __init__(self, hidden: int, n_experts: int, route: Route, device: Any = None) -> None:
        super().__init__()
        self.linear = nn.Linear(hidden, n_experts + 1, bias=True, device=device)
        with torch.no_grad():
            self.linear.weight.zero_()
            self.linear.bias.zero_()
            self.linear.bias[0] = BASE_BIAS
        self.route = route
        self.soft = False
        self.forced: int | None = None

    def observe(self, module: nn.Module, inputs: Any, normed: torch.Tensor) -> None:
        """Forward hook on the layer's input layernorm: route the tokens of this forward."""
        logits = self.linear(normed.reshape(-1, normed.shape[-1]).to(self.linear.weight.dtype))   # (tokens, N + 1)
        route = self.route
        route.logits = logits
        n = logits.shape[-1] - 1
        if self.soft:
            route.probs = torch.softmax(logits.float(), -1).to(normed.dtype)
            route.index = []
            return
        route.probs = None
        choice = logits.argmax(-1) if self.forced is None else torch.full(logits.shape[:1], self.forced,
                                                                           device=logits.device)
        route.index = [(choice == e + 1).nonzero()[:, 0] for e in range(n)]


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of a transformers causal LM (Llama, Qwen3 and alike), each with the
    input layernorm whose output its gate reads."""
    layers = prefix.decoder_layers(model)
    if not all(hasattr(layer, "input_layernorm") for layer in layers):
        raise ValueError(f"{type(model).__name__}: decoder layers without an input_layernorm (model.layers)")
    return layers


class Mixture:
    """The base model with N frozen adapters mixed by per-layer gates (the model is changed in
    place: its LoRA-targeted linear modules are wrapped, a gate hooked on every layer)."""

    def __init__(self, model: nn.Module, adapters: list[Adapter]) -> None:
        self.model, self.adapters = model, adapters
        for p in model.parameters():
            p.requires_grad_(False)
        layers = decoder_layers(model)
        hidden = model.config.hidden_size
        device = next(model.parameters()).device
        self.routes = [Route() for _ in layers]
        self.gates = nn.ModuleList(Gate(hidden, len(adapters), r, device) for r in self.routes)
        self._hooks = [layer.input_layernorm.register_forward_hook(g.observe) for layer, g in zip(layers, self.gates)]
        prefix = "model.layers."
        targets = sorted({m for a in adapters for m in a.A})
        named = dict(model.named_modules())
        for name in targets:
            match = re.match(rf"{re.escape(prefix)}(\d+)\.", name)
            module = named.get(name)
            if match is None or not isinstance(module, nn.Linear):
                raise ValueError(f"adapter module {name!r} is not a linear module of a decoder layer")
            route = self.routes[int(match.group(1))]
            wrapped = RoutedLoRALinear(module, route, [a.A.get(name) for a in adapters],
                                       [a.B.get(name) for a in adapters], [a.scaling for a in adapters])
            parent, _, child = name.rpartition(".")
            setattr(named[parent], child, wrapped)
        self.names = ["base"] + [a.name for a in adapters]

    @classmethod
    def from_dirs(cls, model: nn.Module, adapter_dirs: list[str | Path], names: list[str] | None = None) -> Mixture:
        return cls(model, [load_adapter(p, n) for p, n in zip(adapter_dirs, names or [None] * len(adapter_dirs))])

    def gate_parameters(self) -> list[nn.Parameter]:
        return list(self.gates.parameters())

    def soft(self, on: bool = True) -> None:
        for g in self.gates:
            g.soft = on

    def force(self, expert: int | None) -> None:
        """Route every token to `expert` (0: the base), or None to let the gates decide."""
        for g in self.gates:
            g.forced = expert

    def gate_logits(self) -> list[torch.Tensor]:
        """Per layer, the gate logits `(tokens, N + 1)` of the last forward."""
        return [r.logits for r in self.routes]

    def save_gates(self, path: str | Path) -> None:
        """The gates (a small safetensors file) and the adapters they route to (a JSON file beside it)."""
        from safetensors.torch import save_file

        from trace_gym.jsondata import write_json_atomic
        from trace_gym.runs import dir_sha256

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file({f"gates.{i}.{k}": v.detach().contiguous().cpu() for i, g in enumerate(self.gates)
                   for k, v in g.linear.state_dict().items()}, str(path / "gates.safetensors"))
        write_json_atomic(path / "mixture.json", {
            "schema_version": 1, "experts": self.names, "base_bias": BASE_BIAS,
            "layers": len(self.gates), "hidden": self.model.config.hidden_size,
            "adapters": [{"name": a.name, "path": str(a.path.resolve()), "sha256": dir_sha256(a.path)}
                         for a in self.adapters]})

    @classmethod
    def load(cls, model: nn.Module, path: str | Path) -> Mixture:
        """A mixture saved by `save_gates`, on `model` (the base the adapters were trained on)."""
        from safetensors.torch import load_file

        path = Path(path)
        info = json.loads((path / "mixture.json").read_text())
        mixture = cls.from_dirs(model, [a["path"] for a in info["adapters"]], [a["name"] for a in info["adapters"]])
        weights = load_file(str(path / "gates.safetensors"))
        for i, g in enumerate(mixture.gates):
            g.linear.load_state_dict({k: weights[f"gates.{i}.{k}"] for k in ("weight", "bias")})
        return mixture


def gate_parameter_count(model: nn.Module, n_experts: int) -> int:
    """Parameters of the gates a mixture of `n_experts` adds to `model` (built with the same
    code as a mixture's, so it works on a meta-device model too)."""
    layers = decoder_layers(model)
    device = next(model.parameters()).device
    gates = [Gate(model.config.hidden_size, n_experts, Route(), device) for _ in layers]
    return sum(p.numel() for g in gates for p in g.parameters())
