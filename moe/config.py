"""The composition's configuration: the gate data (`ComposeConfig`) and the gates' training
(`GateConfig`), each field with its default and its rule. A module of its own, free of
torch, so that `trace-gym compose --help` builds its flags from these without loading it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trace_gym.validation import require


@dataclass(frozen=True)
class GateConfig:
    """How the gates train (`trace_gym.moe.gates`: the loss and its terms). Validated at
    construction: a bad value is an `InvalidConfig` naming the field and the rule."""

    label_weight: float = 0.5
    """Weight of the label term: each layer's gate logits against the token's capability."""
    balance_weight: float = 0.001
    """Weight of the Switch Transformer's load-balancing term."""
    lr: float = 5e-4
    """Peak AdamW learning rate (linear warm-up, then linear decay to 0)."""
    epochs: int = 3
    """Passes over the gate data."""
    warmup: float = 0.1
    """Share of the steps spent warming up the learning rate."""
    max_tokens: int = 2048
    """Trajectories are cut to this many tokens."""
    seed: int = 0
    """Seed of the gates' initialisation and the data order."""

    def __post_init__(self) -> None:
        for name in ("label_weight", "balance_weight"):
            require(self, name, isinstance(getattr(self, name), (int, float)) and getattr(self, name) >= 0,
                    "must be a number >= 0")
        require(self, "lr", isinstance(self.lr, (int, float)) and self.lr > 0, "must be a number > 0")
        require(self, "epochs", type(self.epochs) is int and self.epochs >= 1, "must be an integer >= 1")
        require(self, "warmup", isinstance(self.warmup, (int, float)) and 0 <= self.warmup < 1, "must be in [0, 1)")
        require(self, "max_tokens", type(self.max_tokens) is int and self.max_tokens >= 16, "must be an integer >= 16")
        require(self, "seed", type(self.seed) is int and self.seed >= 0, "must be an integer >= 0")


@dataclass(frozen=True)
class ComposeConfig:
    """How `compose` gathers the gate data and what it trains. Validated at construction: a
    bad value is an `InvalidConfig` naming the field and the rule."""

    episodes: int = 64
    """Episodes each adapter plays on its env for gate data."""
    held_out: float = 0.2
    """Share of each capability's trajectories held out for the routing accuracy."""
    max_new_tokens: int = 192
    """Tokens per agent turn at most, while an adapter plays for gate data."""
    batch_episodes: int = 32
    """Episodes an adapter plays together."""
    threads: int = 2
    """Torch threads of the rollouts and the gate training."""
    gates: GateConfig = field(default_factory=GateConfig)
    """How the gates train."""

    def __post_init__(self) -> None:
        for name in ("episodes", "max_new_tokens", "batch_episodes", "threads"):
            value = getattr(self, name)
            require(self, name, type(value) is int and value >= 1, "must be an integer >= 1")
        require(self, "held_out", isinstance(self.held_out, (int, float)) and not isinstance(self.held_out, bool)
                and 0 < self.held_out < 1, "must be a number in (0, 1)")
        require(self, "gates", isinstance(self.gates, GateConfig), "must be a GateConfig")
