"""Position adversaries: choose a record by where it sits in a tool result, not by what it says.

A generator that builds the record the task needs and then appends its near misses (or
lists the right flight, order or payment method first) leaks the answer through its
position: a policy that learns "take the last variant" earns reward without comparing
options. Every list an agent chooses from must be ordered independently of the answer, so
that any position rule earns what a random pick earns. These adversaries measure it.

Each one plays the oracle, but in each of the oracle's write calls it replaces every id
the agent had to choose (see below) by the candidate at a fixed position of the group the
id was chosen from:

| adversary | the candidate it takes |
|-----------|----------------------|
| `by_position_first` | the first |
| `by_position_second` | the second |
| `by_position_last` | the last |
| `by_position_second_to_last` | the one before the last (where a task's variant sat, before its one near miss) |
| `by_position_third_to_last` | the third from the end, or the first of two (before two near misses) |
| `by_position_last_available` | the last available one (`"available": true`, a flight with a seat) |
| `random_available` | the baseline: a random available one (all, where records say nothing) |

The baseline draws from streams derived from the seed, apart from the env's, and its reward
is the mean of `RANDOM_DRAWS` such episodes; `by_position_last_available` takes the last
candidate when none is available.

A position rule may earn at most the baseline plus a margin (the kit's bound). The same
id at the same place gets the same replacement for the whole episode.

What counts as a choice. A group of siblings is a JSON list of ids (a user's orders), a
list of records that all hold an id under one key (search results by `flight_number`, an
order's items by `item_id`), or a dict of records keyed by id (a product's variants, a
user's payment methods), in any tool result so far; each sibling is an id once, in order of
first appearance. An id is *given* to a write, not chosen, when the customer said it, when
some tool result lists it alone (the only item of an order, the method an order was paid
with), or when the write copies it from a record it is about (one holding its `..._id`
argument) at the same place of a list of the same name (the return flight of a
reservation whose outbound flight changes). Any other id of a write's arguments (at any
depth) that is in a group is a choice, made within the smallest group holding it (an
order's items rather than the store's variants; of equal ones, the latest seen), among
the siblings that would not have been given had they been the answer (else the position
such a sibling sits at would hold fewer answers than its share, for every env). With fewer
than two such candidates it is no choice.

Each adversary returns its reward, or None on a seed where no write of the oracle holds a
choice (it would be the oracle itself). Like every adversary (`adversaries.py`), it touches
an env only through `reset`, `step`, `oracle_action`, the observation and
`toolset_of(env)`.

Rewards of 0 or 1 over a few hundred seeds move by several hundredths by chance, so
`oracle_choices` also lists the oracle's choices themselves (write, argument, candidates,
answer): how often a rule picks the answer, against how often a random available pick
would, tells a leak apart from noise choice by choice.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trace_gym.jsondata import loads
from trace_gym.rng import Rng
from trace_gym.testing.adversaries import Adversary, _calls_of, _message
from trace_gym.testing.kitenv import PlayedEnv, toolset_of
from trace_gym.tools import ToolKind

_TOKEN = re.compile(r"^#?[A-Za-z0-9_]{4,40}$")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class Siblings:
    """Ids listed side by side in one tool result, with the record of each (None for a bare id)."""

    ids: tuple[str, ...]
    records: tuple[Any, ...]

    def available(self) -> list[str]:
        """The ids whose record is available; every id when no record says."""
        flags = [_availability(r) for r in self.records]
        if all(f is None for f in flags):
            return list(self.ids)
        return [i for i, f in zip(self.ids, flags) if f]


def _availability(record: Any) -> bool | None:
    """Whether a record is available: a variant's flag, or a flight with a seat left."""
    if not isinstance(record, dict):
        return None
    if isinstance(record.get("available"), bool):
        return record["available"]
    seats = record.get("available_seats")
    if isinstance(seats, dict):
        return record.get("status", "available") == "available" and any(
            isinstance(n, int) and n > 0 for n in seats.values())
    return None


# -- what is in view ------------------------------------------------------------------------

def _ids_like(values: list[Any]) -> bool:
    """Whether the values are ids: tokens without spaces, some with a digit (reservation
    ids may have none)."""
    return (all(isinstance(v, str) and _TOKEN.match(v) for v in values)
            and any(_DIGIT.search(v) for v in values))


def _group(pairs: list[tuple[str, Any]]) -> Siblings:
    seen: dict[str, Any] = {}
    for key, record in pairs:
        seen.setdefault(key, record)
    return Siblings(tuple(seen), tuple(seen.values()))


@dataclass
class View:
    """What the tool results and the customer showed, as far as choices go."""

    groups: list[Siblings] = field(default_factory=list)
    """Every group of sibling ids in the tool results, in order seen."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """Every tool result that is one record (a reservation, an order, a user)."""
    said: str = ""
    """What the customer said."""

    def add(self, value: Any) -> None:
        """Take in one tool result."""
        if isinstance(value, dict):
            if value and _ids_like(list(value)) and all(isinstance(v, dict) for v in value.values()):
                self.groups.append(_group(list(value.items())))
            for v in value.values():
                self.add(v)
        elif isinstance(value, list):
            if value and _ids_like(value):
                self.groups.append(_group([(v, None) for v in value]))
            elif value and all(isinstance(v, dict) for v in value):
                for key in value[0]:
                    if all(key in v for v in value) and _ids_like([v[key] for v in value]):
                        self.groups.append(_group([(v[key], v) for v in value]))
            for v in value:
                self.add(v)


def view_of(messages: list[dict[str, Any]]) -> View:
    """What a conversation's tool results and customer turns show."""
    view = View(said="\n".join(m["content"] for m in messages
                                if m["role"] == "user" and isinstance(m.get("content"), str)))
    for m in messages:
        if m["role"] == "tool":
            try:
                result = loads(m["content"])
            except ValueError:
                continue
            view.add(result)
            if isinstance(result, dict):
                view.records.append(result)
    return view


def subjects_of(arguments: dict[str, Any], view: View) -> list[dict[str, Any]]:
    """The records a write is about: those holding one of its id arguments (`..._id`) under
    the same name (the reservation of `reservation_id`)."""
    ids = {k: v for k, v in arguments.items() if k.endswith("id") and isinstance(v, str) and _TOKEN.match(v)}
    return [r for r in view.records if any(r.get(k) == v for k, v in ids.items())]


Slot = tuple[str, int] | None
"""Where a write puts an id: (list argument, index) for an id in a list argument (at any
depth below it), None for one outside any list."""


def _copied(value: str, slot: Slot, subjects: list[dict[str, Any]]) -> bool:
    """Whether a record the write is about holds `value` at the same place of a list of the
    same name (the return flight of a reservation whose outbound flight changes)."""
    if slot is None:
        return False
    name, index = slot
    for record in subjects:
        listed = record.get(name)
        if isinstance(listed, list) and index < len(listed):
            entry = listed[index]
            if entry == value or isinstance(entry, dict) and value in entry.values():
                return True
    return False


def _given(value: str, slot: Slot, view: View, subjects: list[dict[str, Any]]) -> bool:
    """Whether `value` is given rather than chosen: the customer said it, some tool result
    lists it alone (the only item of an order, the method an order was paid with), or the
    write copies it from where a record holds it."""
    return (bool(re.search(rf"(?<![\w#]){re.escape(value)}(?!\w)", view.said))
            or any(g.ids == (value,) for g in view.groups)
            or _copied(value, slot, subjects))


def choices_for(value: str, slot: Slot, view: View, subjects: list[dict[str, Any]]) -> Siblings | None:
    """The candidates `value` was chosen from, at `slot` of a write about `subjects`, or None
    when it was not a choice (see the module docstring)."""
    if _given(value, slot, view, subjects):
        return None
    holding = [g for g in view.groups if value in g.ids]
    if not holding:
        return None
    smallest = min(len(g.ids) for g in holding)
    group = [g for g in holding if len(g.ids) == smallest][-1]
    # A sibling that would have been given, had it been the answer, is no candidate: keeping
    # it in would give the position it sits at a share of the answers it can never have.
    keep = [k for k, i in enumerate(group.ids) if not _given(i, slot, view, subjects)]
    if len(keep) < 2:
        return None
    return Siblings(tuple(group.ids[k] for k in keep), tuple(group.records[k] for k in keep))


# -- the rules -----------------------------------------------------------------------------

Rule = Callable[[Siblings, Rng], str]


def _last_available(group: Siblings, rng: Rng) -> str:
    available = group.available()
    return available[-1] if available else group.ids[-1]


def _random_available(group: Siblings, rng: Rng) -> str:
    available = group.available() or list(group.ids)
    return rng.choice(available)


RULES: dict[str, Rule] = {
    "by_position_first": lambda g, rng: g.ids[0],
    "by_position_second": lambda g, rng: g.ids[1],
    "by_position_last": lambda g, rng: g.ids[-1],
    "by_position_second_to_last": lambda g, rng: g.ids[-2],
    "by_position_third_to_last": lambda g, rng: g.ids[max(-3, -len(g.ids))],
    "by_position_last_available": _last_available,
}


# -- playing -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Choice:
    """One id the oracle chose in a write: where, among what, and which."""

    tool: str
    argument: str
    slot: Slot
    candidates: Siblings
    answer: str


Visit = Callable[[Choice], "str | None"]
"""What to put in place of a chosen id (None: keep it)."""


def _replace(value: Any, pick: Callable[[str, Slot], str | None], slot: Slot = None) -> Any:
    """`value` with each string leaf replaced by `pick(leaf, slot)` (None: kept)."""
    if isinstance(value, dict):
        return {k: [_replace(v, pick, (k, i)) for i, v in enumerate(item)] if isinstance(item, list)
                else _replace(item, pick, slot) for k, item in value.items()}
    if isinstance(value, list):
        return [_replace(v, pick, slot) for v in value]
    if isinstance(value, str):
        new = pick(value, slot)
        return value if new is None else new
    return value


def _write_arguments(tool: str, arguments: dict[str, Any], view: View, visit: Visit) -> dict[str, Any]:
    subjects = subjects_of(arguments, view)

    def pick(argument: str) -> Callable[[str, Slot], str | None]:
        def at(value: str, slot: Slot) -> str | None:
            candidates = choices_for(value, slot, view, subjects)
            return None if candidates is None else visit(Choice(tool, argument, slot, candidates, value))
        return at
    return {k: _replace({k: v}, pick(k))[k] for k, v in arguments.items()}


def rewrite_choices(env: PlayedEnv, obs: list[dict[str, Any]], action: Any, visit: Visit) -> Any:
    """`action` with every chosen id of its write calls replaced by `visit(choice)` (the
    action itself when nothing changed)."""
    toolset = toolset_of(env)
    _, calls = _calls_of(action)
    writes = [c["name"] in toolset and toolset[c["name"]].kind is ToolKind.WRITE
              and isinstance(c["arguments"], dict) for c in calls]
    if not any(writes):
        return action
    view = view_of(obs)
    new = [{"name": c["name"], "arguments": _write_arguments(c["name"], c["arguments"], view, visit)} if write else c
           for c, write in zip(calls, writes)]
    return _message(new) if new != calls else action


def _play(env: PlayedEnv, seed: int, visit: Visit) -> float:
    obs, _ = env.reset(seed=seed)
    done = False
    while not done:
        action = rewrite_choices(env, obs, env.oracle_action(obs), visit)
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return float(reward)


def _own_streams(seed: int, n: int) -> list[Rng]:
    """`n` streams apart from the episode's: `Rng.from_seed(seed)` is the one the env draws
    the task from, whose first draws (which kind of task, where a variant goes) would then
    pick the baseline's candidates too."""
    return [Rng(np.random.default_rng(child)) for child in np.random.SeedSequence(seed).spawn(n)]


def _play_rule(env: PlayedEnv, seed: int, rule: Rule, rng: Rng) -> float | None:
    """One episode of the oracle with every choice made by `rule`, the same pick each time
    the same id comes at the same place; None when no write held a choice."""
    picked: dict[tuple[str, Slot], str] = {}

    def visit(choice: Choice) -> str:
        key = (choice.answer, choice.slot)
        if key not in picked:
            picked[key] = rule(choice.candidates, rng)
        return picked[key]
    reward = _play(env, seed, visit)
    return reward if picked else None


def choosing_by(rule: Rule) -> Adversary:
    """The oracle with every chosen id of its writes replaced by what `rule` picks from the
    id's candidates (see the module docstring); None on seeds with no chosen id."""
    return lambda env, seed: _play_rule(env, seed, rule, _own_streams(seed, 1)[0])


RANDOM_DRAWS = 4
"""Episodes the baseline averages, each with its own random picks. A position rule's mean
is compared with the baseline's over a few hundred seeds, and a single random pick per seed
would add as much noise as the rule's own: with rewards of 0 or 1, the pair differs by
0.05 by chance alone."""


def random_available(env: PlayedEnv, seed: int) -> float | None:
    """The baseline: the mean reward of RANDOM_DRAWS episodes whose every choice is a
    random candidate, among the available ones."""
    rewards = [_play_rule(env, seed, _random_available, rng) for rng in _own_streams(seed, RANDOM_DRAWS)]
    played = [r for r in rewards if r is not None]
    return sum(played) / len(played) if played else None


def chance_of(choice: Choice) -> float:
    """How often a random available pick (`random_available`'s) finds the choice's answer."""
    available = choice.candidates.available() or list(choice.candidates.ids)
    return 1 / len(available) if choice.answer in available else 0.0


def oracle_choices(env: PlayedEnv, seed: int) -> list[Choice]:
    """The choices of the oracle's writes on `seed`, in order. Where the answers sit among
    their candidates shows a leak with far less noise than the rewards of a few hundred
    episodes do."""
    found: list[Choice] = []
    _play(env, seed, lambda choice: found.append(choice))
    return found


POSITION_ADVERSARIES: dict[str, Adversary] = {name: choosing_by(rule) for name, rule in RULES.items()}
"""Each position rule, by name; each is bounded by `random_available` (the baseline, apart)."""
