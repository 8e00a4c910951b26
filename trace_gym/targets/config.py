"""Difficulty knobs of the target envs (passed as `gym.make` keyword arguments)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from trace_gym.errors import InvalidConfig
from trace_gym.validation import require
from trace_gym.worlds.domain import PROMPT_STYLES


OPENINGS = ("ask", "given")
"""How a customer may open a conversation (`TargetConfig.opening`)."""


@dataclass(frozen=True)
class TargetConfig:
    """How a target env's tasks are drawn and scored. Every field is validated at construction."""

    max_requests: int = 3
    """Most requests one customer makes in a conversation (1-4)."""
    compound_rate: float = 0.3
    """Probability that a conversation has more than one request (in [0, 1])."""
    forbidden_rate: float = 0.3
    """Probability that a request the policy can forbid is a forbidden one (in [0, 1])."""
    unknown_id_rate: float = 0.4
    """Probability that the customer does not know the id of the record concerned (in [0, 1])."""
    distractors: int = 2
    """Extra records of the same customer, sharing routes or products (0-6)."""
    kinds: tuple[str, ...] | None = None
    """Request kinds to draw from (None: all of the domain's)."""
    prompt_style: str = "full"
    """System prompt: the full policy ("full") or a short one for tiny models ("compact")."""
    opening: str = "ask"
    """How the customer opens: "ask" (the reason for calling, no ids or details: the agent asks
    for what it needs) or "given" (their user id, the record's id and every detail of the
    request in the first message, and of each later request in the message that asks for it:
    the first useful action is a read). The agent must still read the customer's own record
    before any other record of theirs."""
    strict: bool = True
    """Score the agent's protocol too (True): no attempted forbidden write, the customer's
    explicit yes to a summary before each write, the customer identified before any record
    of theirs is read. False: tau2-bench's rule only (final database and required
    information), for comparison with tau2 figures."""
    agent_instructions: str = ""
    """Text appended to the agent's system prompt, after the policy: what a prompt
    optimisation baseline (GEPA, `trace_gym.pipeline.gepa`) tunes. Not a difficulty knob."""

    def __post_init__(self) -> None:
        def need(name: str, ok: bool, rule: str) -> None:
            require(self, name, ok, rule)

        need("max_requests", isinstance(self.max_requests, int) and 1 <= self.max_requests <= 4,
             "must be an integer in 1..4")
        for name in ("compound_rate", "forbidden_rate", "unknown_id_rate"):
            value = getattr(self, name)
            need(name, isinstance(value, (int, float)) and 0.0 <= value <= 1.0,
                 "must be a number in [0, 1]")
        need("distractors", isinstance(self.distractors, int) and 0 <= self.distractors <= 6,
             "must be an integer in 0..6")
        need("strict", isinstance(self.strict, bool), "must be True or False")
        need("agent_instructions", isinstance(self.agent_instructions, str) and len(self.agent_instructions) <= 4000,
             "must be a string of at most 4000 characters")
        need("prompt_style", self.prompt_style in PROMPT_STYLES,
             f"allowed: {', '.join(PROMPT_STYLES)}")
        need("opening", self.opening in OPENINGS, f"allowed: {', '.join(OPENINGS)}")
        if self.kinds is not None:
            object.__setattr__(self, "kinds", tuple(self.kinds))
            need("kinds", len(self.kinds) > 0, "must name at least one request kind, or be None")

    def check_kinds(self, allowed: tuple[str, ...]) -> None:
        """Refuse `kinds` naming a kind outside `allowed` (the domain's task kinds), saying which."""
        if self.kinds is None:
            return
        bad = [k for k in self.kinds if k not in allowed]
        if bad:
            raise InvalidConfig(f"kinds={list(self.kinds)!r} is invalid: unknown kind(s) "
                                f"{bad}; allowed: {', '.join(allowed)}")

    @classmethod
    def field_names(cls) -> list[str]:
        """The names of the config's fields, in order (the env's keyword arguments besides world_size)."""
        return [f.name for f in fields(cls)]


def scaled_knobs(knobs: dict[str, object]) -> list[tuple[str, object, object]]:
    """(knob, value, full target's value) for each difficulty knob in `knobs` that differs
    from the full target `gym.make` builds (`prompt_style`, `agent_instructions` and unknown keys are
    not difficulty knobs and are left out): what a report says when a run scales its targets down."""
    full = TargetConfig()
    out = []
    for name in TargetConfig.field_names():
        if name in ("prompt_style", "agent_instructions") or name not in knobs:
            continue
        value, default = knobs[name], getattr(full, name)
        if (tuple(value) if isinstance(value, list) else value) != default:
            out.append((name, value, default))
    return out
