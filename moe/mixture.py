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

Fused MoE experts (Qwen3-MoE's `mlp.experts`, whose experts are 3-D parameters that peft
reaches through `target_parameters`, the GPU recipe's shape) are not linear modules: the
experts module is wrapped whole (`RoutedParameters`), and an expert's tokens run the module's
own forward with its parameters plus that expert's delta (`torch.func.functional_call`;
the delta of each expert is formed for the forward, a tensor the size of the parameter). In
gate training its output is the gate-weighted sum of the base's and each expert's outputs.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn

from trace_gym.agents import prefix
from trace_gym.errors import InternalError, InvalidConfig

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
    P: dict[str, dict[int, tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)
    """Parameter targets (peft `target_parameters`): module name -> nesting depth -> (A
    (experts x r, in), B (out, r x experts)), as peft's nested ParamWrappers store them; which
    parameter a depth is follows from the module (`targeted_parameters`)."""
    target_parameters: tuple[str, ...] = ()


def targeted_parameters(module: nn.Module, name: str, targets: tuple[str, ...]) -> list[str]:
    """The parameters of `module` (named `name`) that peft wraps for `targets`, innermost
    first: peft wraps them in the module's own order, each wrapper around the last, so the
    wrapper at depth k (k `base_layer`s down) holds the (n - 1 - k)-th."""
    return [n for n, _ in module.named_parameters(recurse=False)
            if any(f"{name}.{n}" == t or f"{name}.{n}".endswith(f".{t}") for t in targets)]


def load_adapter(path: str | Path, name: str | None = None) -> Adapter:
    """A peft adapter directory's LoRA tensors (adapter_config.json, adapter_model.safetensors);
    a missing or malformed one is refused, naming the directory and what is wrong."""
    from safetensors.torch import load_file

    path = Path(path)
    try:
        config = json.loads((path / "adapter_config.json").read_text())
        tensors = load_file(str(path / "adapter_model.safetensors"))
    except (OSError, ValueError) as exc:
        raise InvalidConfig(f"adapter {str(path)!r}: not a peft adapter directory ({exc})") from None
    if not isinstance(config, dict) or config.get("peft_type") != "LORA":
        raise InvalidConfig(f"{path}: not a LoRA adapter (peft_type {config.get('peft_type')!r})"
                            if isinstance(config, dict) else f"{path}: adapter_config.json is not an object")
    r, alpha = config["r"], config["lora_alpha"]
    if config.get("rank_pattern") or config.get("alpha_pattern"):
        raise InvalidConfig(f"{path}: per-module ranks or alphas are not supported")
    scaling = alpha / math.sqrt(r) if config.get("use_rslora") else alpha / r
    targeted = tuple(config.get("target_parameters") or ())
    A: dict[str, torch.Tensor] = {}
    B: dict[str, torch.Tensor] = {}
    factors: dict[str, dict[int, dict[str, torch.Tensor]]] = {}  # module -> depth -> "A" / "B" -> tensor
    for key, tensor in tensors.items():
        match = re.fullmatch(r"base_model\.model\.(.+?)((?:\.base_layer)*)\.lora_([AB])\.weight", key)
        if not match:
            continue
        module, depth, kind = match.group(1), match.group(2).count(".base_layer"), match.group(3)
        if depth or any(f".{module}".endswith(f".{t.rpartition('.')[0]}") for t in targeted):  # a ParamWrapper's
            factors.setdefault(module, {}).setdefault(depth, {})[kind] = tensor
        else:
            (A if kind == "A" else B)[module] = tensor
    pairs = [f for by_depth in factors.values() for f in by_depth.values()]
    if (not A and not factors) or set(A) != set(B) or any(set(f) != {"A", "B"} for f in pairs):
        raise InvalidConfig(f"{path}: the adapter's lora_A and lora_B weights do not pair up")
    return Adapter(name or path.name, path, A, B, scaling,
                   {m: {d: (f["A"], f["B"]) for d, f in by_depth.items()} for m, by_depth in factors.items()}, targeted)


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
            a, b = A[e], B[e]
            if a is None or b is None:
                raise InvalidConfig(f"expert {e}: its lora_A and lora_B weights do not pair up")
            self.register_buffer(f"A{e}", a.to(base.weight), persistent=False)
            self.register_buffer(f"B{e}", b.to(base.weight), persistent=False)
        self.scaling = scaling

    def delta(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Expert e's LoRA delta for rows `x` (n, in) -> (n, out)."""
        return (x @ getattr(self, f"A{e}").T) @ getattr(self, f"B{e}").T * self.scaling[e]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The base layer's output plus the experts' deltas: in soft mode every expert's,
        weighted by the gate's probabilities; in hard mode each expert's on the tokens
        routed to it."""
        y = self.base(x)                                                     # (..., out)
        flat_x = x.reshape(-1, x.shape[-1])                                  # (tokens, in)
        route = self.route
        if route.probs is not None:  # soft: every expert on every token, weighted (gate training)
            if not self.experts:
                return y
            terms = [route.probs[:, e + 1: e + 2] * self.delta(e, flat_x) for e in self.experts]
            return y + sum(terms[1:], terms[0]).reshape(y.shape)
        flat_y = y.reshape(-1, y.shape[-1])
        for e in self.experts:
            index = route.index[e] if e < len(route.index) else None
            if index is not None and len(index):
                flat_y = flat_y.index_add(0, index, self.delta(e, flat_x[index]))
        return flat_y.reshape(y.shape)


def parameter_delta(A: torch.Tensor, B: torch.Tensor, scaling: float, like: torch.Tensor,
                    transposed: bool) -> torch.Tensor:
    """peft's delta of a 3-D experts parameter `like` (experts, out, in), or (experts, in, out)
    where its module says `is_transposed`: per expert, scaling * B_e @ A_e."""
    experts = like.shape[0]
    a = A.reshape(experts, -1, A.shape[-1])                        # (experts, r, in)
    b = B.reshape(B.shape[0], -1, experts).permute(2, 0, 1)        # (experts, out, r)
    delta = torch.bmm(b, a) * scaling                              # (experts, out, in)
    return (delta.transpose(-2, -1) if transposed else delta).to(like)


class RoutedParameters(nn.Module):
    """A module whose parameters LoRA experts target (fused MoE experts): an expert's tokens
    run the module's own forward with its parameters plus that expert's deltas. Tensor
    arguments whose first dimension is the layer's token count are sliced with the tokens."""

    def __init__(self, base: nn.Module, route: Route, factors: list[dict[str, tuple[torch.Tensor, torch.Tensor]]],
                 scaling: list[float]) -> None:
        super().__init__()
        self.base, self.route, self.scaling = base, route, scaling
        self.transposed = bool(getattr(base, "is_transposed", False))
        self.experts = [e for e, f in enumerate(factors) if f]
        self.names = sorted({n for f in factors for n in f})
        for e in self.experts:
            for n, (a, b) in factors[e].items():
                self.register_buffer(f"A{e}_{n}", a.to(getattr(base, n)), persistent=False)
                self.register_buffer(f"B{e}_{n}", b.to(getattr(base, n)), persistent=False)

    def _run(self, e: int, args: tuple, kwargs: dict) -> torch.Tensor:
        from torch.func import functional_call

        params = {n: getattr(self.base, n) + parameter_delta(getattr(self, f"A{e}_{n}"), getattr(self, f"B{e}_{n}"),
                                                              self.scaling[e], getattr(self.base, n), self.transposed)
                  for n in self.names if hasattr(self, f"A{e}_{n}")}
        return functional_call(self.base, params, args, kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """The base module's output; in soft mode mixed with every expert's by the gate's
        probabilities, in hard mode replaced, for the tokens routed to an expert, by that
        expert's."""
        y = self.base(*args, **kwargs)                                   # (tokens, ...)
        route = self.route
        if route.probs is not None:  # soft: the gate-weighted outputs of the base and every expert
            shape = (-1,) + (1,) * (y.dim() - 1)
            mixed = route.probs[:, 0].reshape(shape) * y
            for e in self.experts:
                mixed = mixed + route.probs[:, e + 1].reshape(shape) * self._run(e, args, kwargs)
            return mixed
        tokens = y.shape[0]
        for e in self.experts:
            index = route.index[e] if e < len(route.index) else None
            if index is None or not len(index):
                continue
            cut = lambda v: v[index] if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == tokens else v  # noqa: E731
            y = y.index_copy(0, index, self._run(e, tuple(cut(a) for a in args),
                                                 {k: cut(v) for k, v in kwargs.items()}))
        return y


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


def _hidden_size(model: nn.Module) -> int:
    """The hidden size of a transformers model, from its config."""
    size = getattr(model.config, "hidden_size", None)  # torch's stubs type `config` Tensor | Module: it is neither
    if not isinstance(size, int):
        raise InvalidConfig(f"{type(model).__name__}: its config has no hidden_size")
    return size


def _input_layernorm(layer: nn.Module) -> nn.Module:
    """A decoder layer's input layernorm (the module whose output its gate reads)."""
    norm = layer.input_layernorm
    if not isinstance(norm, nn.Module):
        raise InvalidConfig(f"{type(layer).__name__}: no input_layernorm module")
    return norm


def decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of a transformers causal LM (Llama, Qwen3 and alike), each with the
    input layernorm whose output its gate reads."""
    layers = prefix.decoder_layers(model)
    if not all(hasattr(layer, "input_layernorm") for layer in layers):
        raise InvalidConfig(f"{type(model).__name__}: decoder layers without an input_layernorm (model.layers)")
    return layers


class Mixture:
    """The base model with N frozen adapters mixed by per-layer gates (the model is changed in
    place: its LoRA-targeted linear modules are wrapped, a gate hooked on every layer)."""

    def __init__(self, model: nn.Module, adapters: list[Adapter]) -> None:
        self.model, self.adapters = model, adapters
        for p in model.parameters():
            p.requires_grad_(False)
        layers = decoder_layers(model)
        hidden = _hidden_size(model)
        device = next(model.parameters()).device
        self.routes = [Route() for _ in layers]
        gates = [Gate(hidden, len(adapters), r, device) for r in self.routes]
        self.gates = nn.ModuleList(gates)
        self._hooks = [_input_layernorm(layer).register_forward_hook(g.observe) for layer, g in zip(layers, gates)]
        prefix = "model.layers."
        targets = sorted({m for a in adapters for m in a.A})
        owners = sorted({m for a in adapters for m in a.P})
        named = dict(model.named_modules())
        wraps: dict[str, nn.Module] = {}
        for name in targets:  # every check before any module is wrapped: a refused mixture leaves the model as it was
            match = re.match(rf"{re.escape(prefix)}(\d+)\.", name)
            module = named.get(name)
            if match is None or not isinstance(module, nn.Linear):
                raise InvalidConfig(f"adapter module {name!r} is not a linear module of a decoder layer of "
                                    f"{type(model).__name__}")
            for a in adapters:
                if name in a.A and (a.A[name].shape[1], a.B[name].shape[0]) != (module.in_features,
                                                                                 module.out_features):
                    raise InvalidConfig(f"adapter {a.name!r}: {name} is {a.A[name].shape[1]} -> {a.B[name].shape[0]}, "
                                        f"the model's {module.in_features} -> {module.out_features} (another base?)")
            wraps[name] = RoutedLoRALinear(module, self.routes[int(match.group(1))], [a.A.get(name) for a in adapters],
                                           [a.B.get(name) for a in adapters], [a.scaling for a in adapters])
        for owner in owners:
            match = re.match(rf"{re.escape(prefix)}(\d+)\.", owner)
            module = named.get(owner)
            if match is None or module is None:
                raise InvalidConfig(f"adapter parameters of {owner!r}: not a module of a decoder layer of "
                                    f"{type(model).__name__}")
            factors = []
            for a in adapters:
                owned = targeted_parameters(module, owner, a.target_parameters)
                depths = a.P.get(owner, {})
                if depths and sorted(depths) != list(range(len(owned))):
                    raise InvalidConfig(f"adapter {a.name!r}: {owner} holds {len(depths)} wrapped parameter(s), the "
                                        f"model's module has {len(owned)} that {list(a.target_parameters)} name")
                factors.append({owned[len(owned) - 1 - d]: f for d, f in depths.items()})
            for a, mine in zip(adapters, factors):
                for n, (fa, fb) in mine.items():
                    param = getattr(module, n, None)
                    if not isinstance(param, torch.Tensor) or param.dim() != 3 or fa.shape[0] % param.shape[0]:
                        raise InvalidConfig(f"adapter {a.name!r}: {owner}.{n} is not a 3-D experts parameter of "
                                            "the model")
                    experts = param.shape[0]
                    shape = (experts, fb.shape[0], fa.shape[1])  # the delta's (experts, out, in)
                    if getattr(module, "is_transposed", False):
                        shape = (experts, fa.shape[1], fb.shape[0])
                    if shape != tuple(param.shape) or fb.shape[1] != fa.shape[0]:
                        raise InvalidConfig(f"adapter {a.name!r}: {owner}.{n}'s factors make a {shape} delta, the "
                                            f"model's parameter is {tuple(param.shape)} (another base?)")
            wraps[owner] = RoutedParameters(module, self.routes[int(match.group(1))], factors,
                                            [a.scaling for a in adapters])
        for name, wrapped in wraps.items():
            parent, _, child = name.rpartition(".")
            setattr(named[parent], child, wrapped)
        self.names = ["base"] + [a.name for a in adapters]

    @classmethod
    def from_dirs(cls, model: nn.Module, adapter_dirs: list[str | Path], names: list[str] | None = None) -> Mixture:
        """A mixture over `model` of the adapters in these directories (named by `names`, or
        by their directories)."""
        given: list[str | None] = list(names) if names else [None] * len(adapter_dirs)
        return cls(model, [load_adapter(p, n) for p, n in zip(adapter_dirs, given)])

    def _gates(self) -> list[Gate]:
        """The gates as Gates (iterating an nn.ModuleList yields plain Modules)."""
        return cast(list[Gate], list(self.gates))  # __init__ puts only Gates in `gates`

    def gate_parameters(self) -> list[nn.Parameter]:
        """The gates' parameters: the only ones gate training updates."""
        return list(self.gates.parameters())

    def soft(self, on: bool = True) -> None:
        """Switch every gate to soft routing (every expert, weighted by its probability), or
        back to hard top-1 routing."""
        for g in self._gates():
            g.soft = on

    def force(self, expert: int | None) -> None:
        """Route every token to `expert` (0: the base), or None to let the gates decide."""
        for g in self._gates():
            g.forced = expert

    def gate_logits(self) -> list[torch.Tensor]:
        """Per layer, the gate logits `(tokens, N + 1)` of the last forward."""
        logits = []
        for r in self.routes:
            if r.logits is None:
                raise InternalError("gate_logits: the gates have not seen a forward yet")
            logits.append(r.logits)
        return logits

    def save_gates(self, path: str | Path) -> None:
        """The gates (a small safetensors file) and the adapters they route to (a JSON file beside it)."""
        from safetensors.torch import save_file

        from trace_gym.jsondata import write_json_atomic
        from trace_gym.provenance import dir_sha256

        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        save_file({f"gates.{i}.{k}": v.detach().contiguous().cpu() for i, g in enumerate(self._gates())
                   for k, v in g.linear.state_dict().items()}, str(path / "gates.safetensors"))
        write_json_atomic(path / "mixture.json", {
            "schema_version": 1, "experts": self.names, "base_bias": BASE_BIAS,
            "layers": len(self.gates), "hidden": _hidden_size(self.model),
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
        for i, g in enumerate(mixture._gates()):
            g.linear.load_state_dict({k: weights[f"gates.{i}.{k}"] for k in ("weight", "bias")})
        return mixture


def gate_parameter_count(model: nn.Module, n_experts: int) -> int:
    """Parameters of the gates a mixture of `n_experts` adds to `model` (built with the same
    code as a mixture's, so it works on a meta-device model too)."""
    layers = decoder_layers(model)
    device = next(model.parameters()).device
    gates = [Gate(_hidden_size(model), n_experts, Route(), device) for _ in layers]
    return sum(p.numel() for g in gates for p in g.parameters())
