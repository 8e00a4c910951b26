"""Guessed refusals: the oracle's refusal of each request kind, with its record facts guessed.

A refusal earns its full credit only when it states the record fact that breaks the rule
(`trace_gym.statements`). When that fact follows from the request's kind and the customer's
words (a flown flight that always left yesterday, always one more bag than the customer
asked for, a gift card always worth half the order), a policy states it without reading a
record. `guessed_refusal` is that policy at its strongest: it learns, per request kind, a
refusal template from the oracle, and replies with it filled from the conversation at once,
without a tool call.

Learning (once per env instance, on the train seeds of `adversaries.fit_seeds`): where the
oracle ends an episode without writing, its final reply is the refusal of the task's kind
(`task.to_json()["kind"]`). Each value in it becomes, where it can, a slot over the opening
conversation (what the agent sees before its first turn):

| value in the reply | its slots (else it stays literal) |
|--------------------|-----------------------------------|
| a number | a number the customer said plus -6..6 (OFFSETS); one of the tool results times 1/4..4 (RATIOS) |
| an id | an id the customer said; an id of the tool results, under the same key |
| a date | a date the customer said |
| a word (a status, a cabin) | none |

A value that is the task's fact (`fact` or `communicate` of `task.to_json()`, or of its
`requests`) is never copied from the tool results (not by a ratio of 1): that is the record
read, the capability itself; everything else it may take from them, as a policy that reads
the records but for the fact would. What stays literal is the guess. A reply gives every
template its values allow; the template given on most fit seeds of a kind is its refusal.

Variants (`GUESSED_VARIANTS`), so that the kit can bound more than one guess:

| name | template of each kind |
|------|-----------------------|
| `guessed_refusal` | the most common |
| `guessed_refusal_rank2`, `_rank3` | the most common on the fit seeds the better-ranked miss (another status, date) |
| `guessed_refusal_offset+k`, `_offset-k` | the most common that adds k to a customer's number (else the most common) |

Each returns the episode's reward, or None on a seed whose kind the oracle never refused.
"""

from __future__ import annotations

import itertools
import re
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from trace_gym.actions import parse_action
from trace_gym.testing.adversaries import DO_NOTHING, Adversary, fit_seeds, leaves, play_script, requests_of, shape_of
from trace_gym.testing.kitenv import PlayedEnv, toolset_of
from trace_gym.tools import ToolKind

OFFSETS = range(-6, 7)
"""What a number of the reply may add to a number the customer said."""
RATIOS = tuple(Fraction(n, d) for n, d in ((1, 1), (1, 2), (1, 3), (2, 3), (1, 4), (3, 4), (2, 1), (3, 1), (4, 1)))
"""What a number of the tool results may be multiplied by ("half the total")."""
MAX_TEMPLATES = 256
"""Templates one reply gives at most (the product of its values' slots)."""
RANKS = 3

# A date (a timestamp's too), else a word with a digit: a number ("45.50") or an id ("HAT123").
_VALUE = re.compile(r"\d{4}-\d{2}-\d{2}(?:T[\d:]+)?|#?\w*\d\w*(?:\.\d+)?")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


# -- what the conversation shows ---------------------------------------------------------

@dataclass(frozen=True)
class View:
    """The values of a conversation a template is filled from."""

    said_numbers: tuple[str, ...]
    """Numbers the customer said, in order."""
    said_tokens: tuple[str, ...]
    """Ids and dates the customer said, in order."""
    seen: dict[str, tuple[Any, ...]]
    """JSON key -> the numbers and ids under it in the tool results and calls, in order."""


def view_of(messages: list[dict[str, Any]]) -> View:
    """The values of a conversation a template can be filled from: the customer's numbers and ids,
    and the values under each key of the tool calls and results."""
    numbers: list[str] = []
    tokens: list[str] = []
    for m in messages[1:]:
        if m["role"] == "user" and m.get("content"):
            for token in _VALUE.findall(m["content"]):
                (numbers if _NUMBER.fullmatch(token) else tokens).append(token)
    seen: dict[str, list[Any]] = {}
    for key, value in leaves(messages):
        if key is not None and (_is_number(value) or _is_id(value)):
            seen.setdefault(key, []).append(value)
    return View(tuple(numbers), tuple(tokens), {k: tuple(v) for k, v in seen.items()})


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and bool(_VALUE.fullmatch(value)) and not _NUMBER.fullmatch(value)


def _decimals(token: str) -> int:
    return len(token.partition(".")[2])


# -- slots -------------------------------------------------------------------------------

@dataclass(frozen=True)
class SaidNumber:
    """The customer's `index`-th number plus `offset`."""

    index: int
    offset: int

    def fill(self, view: View) -> str | None:
        """The slot's text in `view`, or None when the customer said no such number."""
        if self.index >= len(view.said_numbers) or "." in view.said_numbers[self.index]:
            return None
        return str(int(view.said_numbers[self.index]) + self.offset)

    @property
    def label(self) -> str:
        """The slot as text, e.g. '{said0+1}'."""
        return f"{{said{self.index}{self.offset:+d}}}"


@dataclass(frozen=True)
class SaidToken:
    """The `index`-th id or date the customer said of those shaped like `shape` (ids of other
    shapes may or may not be said: a reservation id need not hold a digit)."""

    shape: str
    index: int

    def fill(self, view: View) -> str | None:
        """The slot's text in `view`, or None when the customer said no such token."""
        same = [t for t in view.said_tokens if shape_of(t) == self.shape]
        return same[self.index] if self.index < len(same) else None

    @property
    def label(self) -> str:
        """The slot as text, e.g. '{AAA000#0}'."""
        return f"{{{self.shape}#{self.index}}}"


@dataclass(frozen=True)
class Seen:
    """The `occurrence`-th value under `key` in the tool results, times `ratio` and written
    with `decimals` decimals (a number), or as it is (an id: `ratio` None)."""

    key: str
    occurrence: int
    ratio: Fraction | None = None
    decimals: int = 0

    def fill(self, view: View) -> str | None:
        """The slot's text in `view`, or None when the tool results have no such value."""
        values = view.seen.get(self.key, ())
        if self.occurrence >= len(values):
            return None
        value = values[self.occurrence]
        if self.ratio is None:
            return value if isinstance(value, str) else None
        return f"{value * float(self.ratio):.{self.decimals}f}" if _is_number(value) else None

    @property
    def label(self) -> str:
        """The slot as text, e.g. '{amount#0*1/2}'."""
        times = "" if self.ratio is None else f"*{self.ratio}"
        return f"{{{self.key}#{self.occurrence}{times}}}"


Slot = SaidNumber | SaidToken | Seen


@dataclass(frozen=True)
class Template:
    """A reply: literal text and slots, in order."""

    parts: tuple[str | Slot, ...]

    @property
    def label(self) -> str:
        """The template as text, its slots as their labels."""
        return "".join(p if isinstance(p, str) else p.label for p in self.parts)

    def fill(self, view: View) -> str | None:
        """The reply the template gives in `view`, or None when a slot has no value there."""
        out = []
        for part in self.parts:
            text = part if isinstance(part, str) else part.fill(view)
            if text is None:
                return None
            out.append(text)
        return "".join(out)

    def offsets(self) -> set[int]:
        """The offsets the template adds to numbers the customer said."""
        return {p.offset for p in self.parts if isinstance(p, SaidNumber)}


# -- learning ----------------------------------------------------------------------------

def slots_for(token: str, view: View, is_fact: bool) -> list[str | Slot]:
    """Every way to write `token` from `view`, the literal first. A fact is never copied
    from the tool results: that is reading the record."""
    out: list[str | Slot] = [token]
    if _DATE.match(token) or not _NUMBER.fullmatch(token):  # a date or an id
        same = [t for t in view.said_tokens if shape_of(t) == shape_of(token)]
        out += [SaidToken(shape_of(token), i) for i, t in enumerate(same) if t == token]
        if not is_fact and not _DATE.match(token):
            out += [Seen(k, j) for k, values in view.seen.items() for j, v in enumerate(values) if v == token]
        return out
    if "." not in token:
        out += [SaidNumber(i, int(token) - int(n)) for i, n in enumerate(view.said_numbers)
                if "." not in n and int(token) - int(n) in OFFSETS]
    decimals = _decimals(token)
    for key, values in view.seen.items():
        for j, value in enumerate(values):
            if _is_number(value):
                out += [Seen(key, j, r, decimals) for r in RATIOS if not (is_fact and r == 1)
                        and f"{value * float(r):.{decimals}f}" == token]
    return out


def templates_of(reply: str, view: View, facts: set[str]) -> Iterator[Template]:
    """The templates that give `reply` on `view` (at most MAX_TEMPLATES)."""
    pieces: list[list[str | Slot]] = []
    start = 0
    for m in _VALUE.finditer(reply):
        pieces.append([reply[start:m.start()]])
        pieces.append(slots_for(m.group(), view, _is_fact(m.group(), facts)))
        start = m.end()
    pieces.append([reply[start:]])
    for parts in itertools.islice(itertools.product(*pieces), MAX_TEMPLATES):
        yield Template(tuple(p for p in parts if p != ""))


def _is_fact(token: str, facts: set[str]) -> bool:
    if token in facts:
        return True
    return bool(_NUMBER.fullmatch(token)) and any(_NUMBER.fullmatch(f) and float(f) == float(token) for f in facts)


def fact_values(task: dict[str, Any]) -> set[str]:
    """The values the task's verifier wants stated: each request's `fact` and `communicate`."""
    out: set[str] = set()
    for request in requests_of(task):
        told = request.get("communicate")
        for item in [request.get("fact"), *(told if isinstance(told, list) else [])]:
            if isinstance(item, dict) and isinstance(item.get("value"), (str, int, float)):
                out.add(str(item["value"]))
    return out


def oracle_refusal(env: PlayedEnv, seed: int) -> tuple[str, list[dict[str, Any]], str, set[str]] | None:
    """(kind, opening conversation, final reply, fact values) of the oracle's episode on
    `seed`, when it calls no write tool and ends with a reply; None otherwise."""
    obs, _ = env.reset(seed=seed)
    opening = list(obs)
    task = env.task.to_json()
    toolset = toolset_of(env)
    done = False
    while not done:
        action = env.oracle_action(obs)
        for call in parse_action(action).calls:
            if call.name in toolset and toolset[call.name].kind is ToolKind.WRITE:
                return None
        obs, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    replies = [m.get("content") for m in obs if m["role"] == "assistant" and not m.get("tool_calls")]
    kind = task.get("kind")
    if not isinstance(kind, str) or not replies or not replies[-1]:
        return None
    return kind, opening, replies[-1], fact_values(task)


@dataclass
class KindTemplates:
    """What the fit seeds of one request kind gave, and the templates chosen from it."""

    seeds: dict[str, set[int]] = field(default_factory=dict)
    """Template label -> the fit seeds whose refusal it gives."""
    templates: dict[str, Template] = field(default_factory=dict)
    ranked: list[Template] = field(default_factory=list)
    """Greedily: the template of most seeds, then the one of most seeds it misses, ..."""
    by_offset: dict[int, Template] = field(default_factory=dict)
    """Offset -> the most common template adding it to a number the customer said."""

    def add(self, seed: int, templates: Iterator[Template]) -> None:
        """Record that the fit seed `seed` gave these templates."""
        for template in templates:
            self.templates.setdefault(template.label, template)
            self.seeds.setdefault(template.label, set()).add(seed)

    def choose(self) -> None:
        """Fill `ranked` and `by_offset` from what the fit seeds gave."""
        covered: set[int] = set()
        while len(self.ranked) < RANKS:
            label = max(self.seeds, key=lambda k: (len(self.seeds[k] - covered), len(self.seeds[k])))
            if not self.seeds[label] - covered:
                break
            self.ranked.append(self.templates[label])
            covered |= self.seeds[label]
        for label in sorted(self.seeds, key=lambda k: -len(self.seeds[k])):  # stable: first seen wins ties
            for offset in self.templates[label].offsets():
                self.by_offset.setdefault(offset, self.templates[label])


_LEARNED: weakref.WeakKeyDictionary[PlayedEnv, dict[str, KindTemplates]] = weakref.WeakKeyDictionary()


def learned_templates(env: PlayedEnv) -> dict[str, KindTemplates]:
    """Request kind -> the templates of its oracle refusals on the fit seeds (kinds the
    oracle never refused are left out). Learned once per env instance."""
    if env in _LEARNED:
        return _LEARNED[env]
    out: dict[str, KindTemplates] = {}
    for seed in fit_seeds(env):
        found = oracle_refusal(env, seed)
        if found is not None:
            kind, opening, reply, facts = found
            out.setdefault(kind, KindTemplates()).add(seed, templates_of(reply, view_of(opening), facts))
    for templates in out.values():
        templates.choose()
    _LEARNED[env] = out
    return out


# -- playing -----------------------------------------------------------------------------

Pick = Callable[[KindTemplates], "Template | None"]


def _ranked(rank: int) -> Pick:
    return lambda kind: kind.ranked[rank - 1] if len(kind.ranked) >= rank else None


def _offset(offset: int) -> Pick:
    return lambda kind: kind.by_offset.get(offset) or _ranked(1)(kind)


_OPENINGS: weakref.WeakKeyDictionary[PlayedEnv, dict[int, tuple[Any, View]]] = weakref.WeakKeyDictionary()
_REPLIES: weakref.WeakKeyDictionary[PlayedEnv, dict[tuple[int, str], float]] = weakref.WeakKeyDictionary()


def _opening(env: PlayedEnv, seed: int) -> tuple[Any, View]:
    """(task kind, view of the opening conversation) of `seed`: one reset per env instance
    and seed, whatever the number of variants that fill a template from it."""
    openings = _OPENINGS.setdefault(env, {})
    if seed not in openings:
        obs, _ = env.reset(seed=seed)
        openings[seed] = (env.task.to_json().get("kind"), view_of(obs))
    return openings[seed]


def _replying(env: PlayedEnv, seed: int, reply: str) -> float:
    """The reward of sending `reply` every turn on `seed`, played once per env instance:
    the variants often fill the same reply (an episode is a function of the seed, the reset
    and the actions; the kit's determinism property holds every env to that)."""
    played = _REPLIES.setdefault(env, {})
    if (seed, reply) not in played:
        played[seed, reply] = play_script(env, seed, lambda e, o, turn: reply)
    return played[seed, reply]


def guessing(pick: Pick) -> Adversary:
    """The adversary that replies, at once and every turn, with the template `pick` chooses
    for the seed's kind, filled from the opening conversation (the do-nothing reply where a
    slot finds nothing to fill it); None on seeds of a kind with no template."""
    def adversary(env: PlayedEnv, seed: int) -> float | None:
        kinds = learned_templates(env)
        kind, view = _opening(env, seed)
        template = pick(kinds[kind]) if isinstance(kind, str) and kind in kinds else None
        if template is None:
            return None
        return _replying(env, seed, template.fill(view) or DO_NOTHING)
    return adversary


guessed_refusal = guessing(_ranked(1))

GUESSED_VARIANTS: dict[str, Adversary] = {
    "guessed_refusal": guessed_refusal,
    **{f"guessed_refusal_rank{r}": guessing(_ranked(r)) for r in range(2, RANKS + 1)},
    **{f"guessed_refusal_offset{k:+d}": guessing(_offset(k)) for k in OFFSETS if k},
}
"""Every variant by name (see the module docstring)."""
KIT_VARIANTS = ("guessed_refusal", "guessed_refusal_rank2", "guessed_refusal_rank3",
                "guessed_refusal_offset-1", "guessed_refusal_offset+1")
"""The variants the kit plays (every variant: `benchmarks/reward_integrity.py`)."""
