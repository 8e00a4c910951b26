"""What a verifier returns: a score in [0, 1] and the checks behind it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


def printable(text: str) -> str:
    """`text` with every character that is not printable (control characters such as ESC
    and BEL, line breaks, bidirectional overrides) written as its Python escape, so that text
    an agent chose (an exception's message) cannot drive a terminal or reorder a line."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


class Check(NamedTuple):
    """One verifier check. `credit` is what it contributes to the score. A named tuple
    rather than a frozen dataclass: as immutable, and several times cheaper to build (a
    verification builds one per check)."""

    name: str
    passed: bool
    credit: float
    detail: str = ""


@dataclass(frozen=True)
class Verdict:
    """A verifier's result: the score, clipped to [0, 1], and the checks behind it."""

    score: float
    checks: tuple[Check, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        # Rewards lie in [0, 1] (the env contract); a verifier outside that is clipped here.
        # Rounded so that credits adding up to 1 (1/7 seven times) give exactly 1.
        object.__setattr__(self, "score", round(min(1.0, max(0.0, float(self.score))), 9))
        # Details may quote what an agent wrote: one line each, no control characters.
        if not all(c.detail.isprintable() for c in self.checks):
            object.__setattr__(self, "checks", tuple(c._replace(detail=printable(c.detail)) for c in self.checks))

    @property
    def passed(self) -> bool:
        """True when the score is 1 (within 1e-9)."""
        return self.score >= 1.0 - 1e-9

    def to_json(self) -> dict[str, Any]:
        """The verdict as a JSON object."""
        return {"score": self.score, "checks": [
            {"name": c.name, "passed": c.passed, "credit": c.credit, "detail": c.detail}
            for c in self.checks]}


def all_or_nothing(checks: list[Check]) -> Verdict:
    """tau2-bench's rule: the score is 1 when every check passes, else 0."""
    ok = all(c.passed for c in checks)
    return Verdict(1.0 if ok else 0.0, tuple(checks))
