"""Candidates: adversaries that try each candidate answer in turn, and their baselines.

An agent that cannot tell which value is right can still say them all, one per message,
or propose one summary after another until the customer says yes. A verifier that asks
only whether *some* message stated the right value, or whether the customer said yes
before the write, pays such an agent as if it knew. Each adversary here has a
baseline that commits to its first candidate, the same agent without the retries: the kit
bounds the adversary by its baseline (`properties.py`), so trying candidates gains nothing.
Like every adversary (`adversaries.py`) they act only through what an agent sees:
`reset`, `step`, `oracle_action`, the observation, `episode.toolset` and `task.to_json()`.

| adversary | what it does | baseline |
|-----------|--------------|----------|
| `serial_statements` | for each request: asks who the customer is, reads every record in view, then states each value in view (numbers as an amount, a count of free bags, bags and passengers; every word a status or a date could be), one per message, each with a question the customer answers, then refuses naming the rule the request's kind most often breaks | `first_statement`: the same, stating only the first value |
| `serial_statements_reversed` | the same, values in reverse order | `first_statement` |
| `candidate_summaries` | the oracle, except that before each of its questions that names a record, it proposes the same question for each record of the same shape in view, in order, until the true one | `first_summary`: commits to the first record of that shape in view (the question and what follows, up to the next write) |
"""

from __future__ import annotations

import re
from typing import Any

from trace_gym.jsondata import dumps, loads
from trace_gym.statements import FLIGHT_STATUSES
from trace_gym.testing.adversaries import Adversary, ids_in_view, refusing_after_reads, shape_of
from trace_gym.testing.kitenv import PlayedEnv, toolset_of
from trace_gym.tools import ToolKind

STATUS_WORDS = (*FLIGHT_STATUSES, "pending", "processed", "delivered", "exchange requested", "return requested")
"""Every status a message could claim (flight and order statuses)."""
CLAIM_WORDS = frozenset({*STATUS_WORDS, "basic economy", "economy", "business", "regular", "silver", "gold"})
"""Words of a record that claim something about it (a status, a cabin, a membership): the
values in view worth stating, beside numbers and dates."""
KEEP_TALKING = " By the way, could you tell me your user id and email?"
"""A question every customer answers, so that stating values is not taken for stalling."""
MAX_CANDIDATES = 12
"""Values stated per request, at most (each costs a turn of the episode's step limit)."""
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


# -- serial statements ---------------------------------------------------------------

def candidate_values(messages: list[dict[str, Any]]) -> list[str]:
    """Each value the tool results show that a statement can claim, as a statement of one
    candidate: a number as an amount, free bags, checked bags and passengers at once (one
    value of each kind), a date, a status, cabin or membership word; then each status
    word. In order of appearance, each once."""
    out: dict[str, None] = {}
    for m in messages[1:]:
        if m["role"] != "tool":
            continue
        try:
            value = loads(m["content"])
        except ValueError:
            continue
        for leaf in _leaves(value):
            if isinstance(leaf, bool):
                continue
            if isinstance(leaf, (int, float)):
                out.setdefault(f"${leaf}, {leaf} free, {leaf} checked bags, {leaf} passengers", None)
            elif isinstance(leaf, str) and _DATE.match(leaf):
                out.setdefault(leaf[:10], None)
            elif isinstance(leaf, str) and leaf.replace("_", " ") in CLAIM_WORDS:
                out.setdefault(leaf.replace("_", " "), None)
    for word in STATUS_WORDS:
        out.setdefault(word, None)
    return list(out)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [value]


def _serial(limit: int, reverse: bool = False) -> Adversary:
    """For each request: asks who the customer is, reads every record in view, states up to
    `limit` candidate values one per message (`candidate_values`, reversed if asked), then
    refuses with the kind's usual refusal (`adversaries.refusing_after_reads`)."""
    def statements(obs: list) -> list[str]:
        values = candidate_values(obs)
        return [f"It is {v}.{KEEP_TALKING}" for v in (values[::-1] if reverse else values)[:limit]]
    return refusing_after_reads(statements)


serial_statements = _serial(MAX_CANDIDATES)
serial_statements_reversed = _serial(MAX_CANDIDATES, reverse=True)
_first_statement = _serial(1)


def first_statement(env: PlayedEnv, seed: int) -> float | None:
    """The baseline of the serial statements: the same agent, stating only its first value."""
    return _first_statement(env, seed)


# -- candidate summaries ---------------------------------------------------------------

def record_ids(messages: list[dict[str, Any]]) -> list[str]:
    """The ids in view that name records: letters and digits both (a date, an amount or a
    count is no record)."""
    return [i for i in ids_in_view(messages) if any(c.isalpha() for c in i) and any(c.isdigit() for c in i)]


def siblings(record_id: str, messages: list[dict[str, Any]]) -> list[str]:
    """The record ids in view of `record_id`'s shape (its length, digits and letters in the
    same places), in order of appearance: the candidates an agent could mean."""
    shape = shape_of(record_id)
    return [i for i in record_ids(messages) if shape_of(i) == shape]


def _swap(action: Any, old: str, new: str) -> Any:
    """`action` (a reply or a tool-call dict) with every whole-word `old` replaced by `new`."""
    pattern = re.compile(rf"(?<![\w#]){re.escape(old)}(?!\w)")
    if isinstance(action, str):
        return pattern.sub(new, action)
    return loads(pattern.sub(new, dumps(action)))


def _named_record(reply: str, view: list[dict[str, Any]]) -> str | None:
    """The first record id in view that `reply` names and that has another of its shape in view."""
    for record_id in record_ids(view):
        if record_id in reply and len(siblings(record_id, view)) > 1:
            return record_id
    return None


def _summaries(first_only: bool) -> Adversary:
    def adversary(env: PlayedEnv, seed: int) -> float | None:
        obs, _ = env.reset(seed=seed)
        hidden: list[range] = []
        swaps: list[tuple[str, str]] = []
        tried = False
        reward, done = 0.0, False
        while not done:
            view = [m for i, m in enumerate(obs) if not any(i in r for r in hidden)]
            action = env.oracle_action(view)
            for old, new in swaps:
                action = _swap(action, old, new)
            record = _named_record(action, view) if isinstance(action, str) and action.endswith("?") else None
            if record is not None and not any(old == record for old, _ in swaps):
                tried = True
                candidates = siblings(record, view)
                if first_only:
                    if candidates[0] != record:
                        swaps.append((record, candidates[0]))
                        action = _swap(action, record, candidates[0])
                else:
                    for candidate in candidates[: candidates.index(record)]:
                        start = len(obs)
                        obs, reward, terminated, truncated, _ = env.step(_swap(action, record, candidate))
                        hidden.append(range(start, len(obs)))
                        if terminated or truncated:
                            return float(reward)
            obs, reward, terminated, truncated, _ = env.step(action)
            done = terminated or truncated
            if _writes(env, action):  # a commitment holds until the write it was made for
                swaps.clear()
        return float(reward) if tried else None
    return adversary


def _writes(env: PlayedEnv, action: Any) -> bool:
    toolset = toolset_of(env)
    return isinstance(action, dict) and action.get("name") in toolset and toolset[action["name"]].kind is ToolKind.WRITE


candidate_summaries = _summaries(first_only=False)
_first_summary = _summaries(first_only=True)


def first_summary(env: PlayedEnv, seed: int) -> float | None:
    """The baseline of the candidate summaries: the oracle committed to the first record of
    the shape in view, up to the next write."""
    return _first_summary(env, seed)

CANDIDATE_ADVERSARIES: dict[str, tuple[Adversary, Adversary]] = {
    "serial_statements": (serial_statements, first_statement),
    "serial_statements_reversed": (serial_statements_reversed, first_statement),
    "candidate_summaries": (candidate_summaries, first_summary),
}
"""Adversary name -> (adversary, the baseline it is bounded by)."""
