"""What a message to the customer states: the checks that a required value was told, or a
rule named.

tau2-bench counts a value as told when it is a substring of any assistant message. An agent
passes that by saying every value at once: every flight status, "0 free, 1 free, ... 15
free", a long digit string that holds every amount, a refusal that names every rule. Here a
message *states* a value when it names that value and no other value of the same kind, and
a check passes when some message to the customer states it:

| kind | a value in a message | example |
|------|----------------------|---------|
| `amount` | a sum of money: `$45.50`, `45.50 dollars`, `USD 45.5` (commas ignored) | `"45.50"` |
| `flight_status` | a flight status word (available, on time, delayed, flying, landed, cancelled) | `"delayed"` |
| `free_bags` | a count followed by "free" (`4 free`) | `"4"` |
| `token` | a word of the value's shape (same length, digits where it has digits) | `"724109372910"` |
| `date` | a date as the records write it, `2024-05-09` (a timestamp's date too) | `"2024-05-09"` |
| `cabin` | basic economy, economy, business (`basic_economy` too) | `"basic_economy"` |
| `bags` | a count followed by "bags" or "checked bags" (`5 checked bags`, `1 bag`) | `"5"` |
| `passengers` | a count followed by "passengers" (`2 passengers`) | `"2"` |
| `membership` | regular, silver, gold | `"regular"` |
| `order_status` | an order status (pending, processed, delivered, cancelled, exchange or return requested) | `"delivered"` |

A check may allow some other values of the kind besides the one stated (`also`): the
words of the rule itself ("only *pending* orders can be cancelled: this one is delivered")
or what the customer asked for ("you asked for 3 bags, and the reservation already has 5
checked bags"), which are no claim about the record.

A refusal names its rule when it mentions one of the rule's terms and none of the terms of
the rules that do not apply (`names_rule`); terms match case-insensitively, commas ignored
(and, for the rules that do not apply, an underscore read as a space).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from trace_gym.errors import InvalidConfig

FLIGHT_STATUSES = ("available", "on time", "delayed", "flying", "landed", "cancelled")

_AMOUNT = re.compile(r"\$\s?(\d+(?:\.\d+)?)|\busd\s?(\d+(?:\.\d+)?)|(\d+(?:\.\d+)?)\s?(?:dollars?|usd)\b")
_STATUS = re.compile(r"\b(available|on time|delayed|flying|landed|cancell?ed)\b")
_FREE = re.compile(r"\b(\d+)\s+free\b")
_PATTERNS = {
    "date": re.compile(r"\b(\d{4}-\d{2}-\d{2})(?!\d)"),
    "cabin": re.compile(r"\b(basic[ _]economy|economy|business)\b"),
    "bags": re.compile(r"\b(\d+)\s+(?:checked\s+)?bags?\b"),
    "passengers": re.compile(r"\b(\d+)\s+passengers?\b"),
    "membership": re.compile(r"\b(regular|silver|gold)\b"),
    "order_status": re.compile(r"\b(pending|processed|delivered|cancell?ed|exchange requested|return requested)\b"),
}
"""The kinds whose values are one group of a pattern, normalised by `_normal_value`."""
KINDS = ("amount", "flight_status", "free_bags", "token", *_PATTERNS)


def normalise(text: str) -> str:
    """tau2's normalisation for required information: lower case, commas dropped."""
    return text.lower().replace(",", "")


def mentions(text: str, term: str) -> bool:
    """tau2's matching rule: `term` occurs in `text`, case-insensitively, commas ignored."""
    return normalise(term) in normalise(text)


def _cents(number: str) -> int:
    whole, _, frac = number.partition(".")
    return int(whole) * 100 + int((frac + "00")[:2])


def _token_pattern(value: str) -> re.Pattern[str]:
    """Words shaped like `value`: its length, a digit where it has one, a letter where it has one."""
    shape = "".join(r"\d" if c.isdigit() else "[a-z]" if c.isalpha() else re.escape(c) for c in value.lower())
    return re.compile(rf"(?<![a-z0-9_]){shape}(?![a-z0-9_])")


def _values(text: str, kind: str, value: str) -> Iterator[str]:
    """The values of `kind` in `text`, already normalised."""
    if kind == "amount":
        return (str(_cents(m.group(1) or m.group(2) or m.group(3))) for m in _AMOUNT.finditer(text))
    if kind == "flight_status":
        return ("cancelled" if m.group(1) == "canceled" else m.group(1) for m in _STATUS.finditer(text))
    if kind == "free_bags":
        return (str(int(m.group(1))) for m in _FREE.finditer(text))
    if kind == "token":
        return (m.group(0) for m in _token_pattern(value).finditer(text))
    if kind in _PATTERNS:
        return (_normal_value(kind, m.group(1)) for m in _PATTERNS[kind].finditer(text))
    raise InvalidConfig(f"unknown statement kind {kind!r}; known: {', '.join(KINDS)}")


def values_stated(text: str, kind: str, value: str) -> list[str]:
    """The values of `kind` that `text` states, normalised to compare with `value`'s
    normalised form (`value` gives a token its shape)."""
    return list(_values(normalise(text), kind, value))


def _normal_value(kind: str, value: str) -> str:
    value = normalise(value)
    if kind == "amount":
        return str(_cents(value))
    if kind in ("free_bags", "bags", "passengers"):
        return str(int(value))
    if kind == "date":
        return value[:10]
    if kind == "cabin":
        return value.replace("_", " ")
    if kind in ("flight_status", "order_status") and value == "canceled":
        return "cancelled"
    return value


def _clue(kind: str, value: str) -> str:
    """A piece of text every statement of `value` contains (most messages lack it, and
    checking for it is far cheaper than reading their values)."""
    if kind == "amount":
        return normalise(value).partition(".")[0]
    if kind in ("flight_status", "order_status") and value == "cancelled":
        return "cancel"
    if kind in ("bags", "passengers"):
        return kind[:-1]
    if kind == "cabin":
        return normalise(value).replace("_", " ").split()[-1]
    if kind == "date":
        return normalise(value)[:10]
    return normalise(value)


def states(text: str, kind: str, value: str, also: Iterable[str] = ()) -> bool:
    """Whether `text` states `value` and no other value of the same kind but those of
    `also` (it stops at the first other value: a stuffed message is long)."""
    return _states(normalise(text), kind, value, _allowed(kind, also))


def _allowed(kind: str, also: Iterable[str]) -> frozenset[str]:
    return frozenset(_normal_value(kind, v) for v in also)


def _states(text: str, kind: str, value: str, allowed: frozenset[str] = frozenset()) -> bool:
    if kind not in KINDS:
        raise InvalidConfig(f"unknown statement kind {kind!r}; known: {', '.join(KINDS)}")
    if _clue(kind, value) not in text:
        return False
    wanted, found = _normal_value(kind, value), False
    for v in _values(text, kind, value):
        if v == wanted:
            found = True
        elif v not in allowed:
            return False
    return found


def stated(texts: Iterable[str], kind: str, value: str, also: Iterable[str] = ()) -> bool:
    """Whether some message of `texts` states `value` (see `states`)."""
    allowed = _allowed(kind, also) if also else frozenset()
    return any(_states(normalise(text), kind, value, allowed) for text in texts)


def told_alone(texts: Iterable[str], kind: str, value: str, also: Iterable[str] = ()) -> tuple[bool, str | None]:
    """(whether some text of `texts` states `value`, the first value of `kind` some text
    states besides `value` and those of `also`, or None): a check that needs the value
    told and never contradicted reads each text once."""
    allowed = _allowed(kind, also)
    wanted, told = _normal_value(kind, value), False
    for text in texts:
        found = False
        for v in _values(normalise(text), kind, value):
            if v == wanted:
                found = True
            elif v not in allowed:
                return told, _as_said(kind, v)
        told = told or found
    return told, None


def _as_said(kind: str, normal: str) -> str:
    """A normalised value as a message would say it (amounts are kept in cents)."""
    return f"{int(normal) / 100:.2f}" if kind == "amount" else normal


def _words(text: str) -> str:
    return normalise(text).replace("_", " ")


def names_rule(text: str, terms: Iterable[str], conflicts: Iterable[str] = ()) -> bool:
    """Whether `text` names the rule (one of its `terms`, in words) and no rule that does not
    apply (none of `conflicts`, in words or as an identifier: "basic_economy" names basic
    economy there). A list of raw record values, which spell a cabin "basic_economy", thus
    names no rule, and cannot hide a rule that does not apply."""
    words = _words(text)
    return any(normalise(t) in normalise(text) for t in terms) and not any(_words(c) in words for c in conflicts)
