"""Pieces shared by the airline and retail task generators."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from trace_gym import capabilities as cap
from trace_gym.rng import Rng
from trace_gym.targets.config import TargetConfig
from trace_gym.targets.task import Step
from trace_gym.targets.user import is_question
from trace_gym.worlds.world import Record


def money(amount: float) -> str:
    """Dollars as the agent should say them: '$120' or '$45.50'."""
    if float(amount).is_integer():
        return f"${int(amount)}"
    return f"${amount:.2f}"


def amount_text(amount: float) -> str:
    """The number a communicate check looks for ('120', '45.50')."""
    return money(amount)[1:]


def describe_method(method: Record) -> str:
    """A payment method as a customer names it."""
    source = method["source"]
    if source == "credit_card":
        return f"my {method['brand'].capitalize()} card ending in {method['last_four']}"
    if source == "gift_card":
        return "my gift card"
    if source == "certificate":
        return "my travel certificate"
    return "my PayPal account"


def told(kind: str, value: str, *also: str) -> dict[str, Any]:
    """A piece of information the agent must tell the customer (`trace_gym.statements`):
    `value` of `kind`, and no other value of the kind while the request is open but `also`
    (values the request itself involves, such as a fee per passenger)."""
    return {"kind": kind, "value": value, "also": list(also)}


def agent_method(method: Record) -> str:
    """A payment method as the agent names it back."""
    return describe_method(method).replace("my ", "your ", 1)


@dataclass
class Drafting:
    """State shared by the requests of one task while they are generated."""

    rng: Rng
    config: TargetConfig
    user: Record
    used_records: set[str] = field(default_factory=set)
    """Ids of records some request is about (one request per record)."""
    spent_methods: set[str] = field(default_factory=set)
    """Gift cards and certificates some request pays with (balances must stay valid)."""
    new_ids: int = 0
    """Records created by gold writes so far (bookings, certificates)."""
    vague: dict[str, tuple] = field(default_factory=dict)
    """Record id -> the description the customer gives instead of the id."""
    owner: int = 0
    """The request being drafted (it owns what it reads or changes)."""

    RULE_WORDS: ClassVar[tuple[str, ...]] = ()
    """Terms that name one of the domain's rules and no other."""

    def knows_id(self) -> bool:
        """Whether the customer knows the id of the record a request is about (drawn with
        `unknown_id_rate`)."""
        return not self.rng.chance(self.config.unknown_id_rate)

    def forbid(self, request: Any, rule: list[str], forbids: list[dict[str, Any]], *incidental: str,
               fact: dict[str, Any]) -> None:
        """Mark `request` as one to refuse: its refusal states the record `fact` that breaks
        the rule (`stated`), names one of `rule` and none of the domain's other rules (save
        `incidental`, words that describe the record itself, such as its status); attempting
        any of the `forbids` write calls voids the refusal."""
        request.rule = list(rule)
        request.conflicts = [w for w in self.RULE_WORDS if w not in rule and w not in incidental]
        request.forbids = forbids
        request.fact = fact


def record_fact(kind: str, value: str, *also: str) -> dict[str, Any]:
    """A record fact a refusal must state: `value` of `kind`, and no other value of the kind
    but `also` (`trace_gym.statements`)."""
    return {"kind": kind, "value": value, "also": list(also)}


def locate(table: str, record_id: str, known: bool) -> Step:
    """A placeholder the generator expands, once the world is final, into the lookups that
    find the record: one lookup when the customer gave the id, else each of the customer's
    records in order until the right one."""
    return {"locate": {"table": table, "id": record_id, "known": known}}


def expand_locates(steps: list[Step], owned_ids: list[str], lookup_tool: str, id_arg: str) -> list[Step]:
    """The plan with each `locate` placeholder replaced by the lookups that find its record: the
    one record when its id is known, else the customer's records in order up to it."""
    out: list[Step] = []
    for step in steps:
        spec: dict[str, Any] | None = step.get("locate")
        if spec is None:
            out.append(step)
            continue
        ids = [spec["id"]] if spec["known"] else owned_ids[: owned_ids.index(spec["id"]) + 1]
        out += [{"call": {"name": lookup_tool, "arguments": {id_arg: i}}} for i in ids]
    return out


def draw_kinds(rng: Rng, config: TargetConfig, all_kinds: tuple[str, ...],
               limits: dict[str, int] | None = None) -> list[str]:
    """The request kinds of one conversation: one, or with probability `compound_rate`
    2..max_requests, drawn from the configured kinds (some kinds at most `limits` times)."""
    pool = list(config.kinds or all_kinds)
    n = 1
    if config.max_requests > 1 and rng.chance(config.compound_rate):
        n = rng.integer(2, config.max_requests)
    limits = limits or {}
    kinds: list[str] = []
    while len(kinds) < n:
        kind = rng.choice(pool)
        if kinds.count(kind) < limits.get(kind, n):
            kinds.append(kind)
        elif all(kinds.count(k) >= limits.get(k, n) for k in pool):
            break
    return kinds


def settle_vague(requests: list, drafting: Drafting, candidates: list[str],
                 matches: Callable[[str, tuple], bool], topic: str, known_fact: str) -> None:
    """Where the customer's description of a record also fits another of their records,
    the customer gives the id instead: a task must have one right answer."""
    for record_id, description in drafting.vague.items():
        if sum(1 for c in candidates if matches(c, description)) == 1:
            continue
        for request in requests:
            for step in request.plan:
                spec = step.get("locate")
                if spec is not None and spec["id"] == record_id:
                    spec["known"] = True
                    request.facts[topic] = known_fact.format(id=record_id)
    for request in requests:  # finding a record from a description is data reasoning
        if any(not s["locate"]["known"] for s in request.plan if "locate" in s):
            if cap.STRUCTURED not in request.capabilities:
                request.capabilities.append(cap.STRUCTURED)


class Conflict(Exception):
    """Two requests of one task need the same record in different states."""


def draft_requests(draft: Drafting, table: dict[str, Callable], forbiddable: frozenset[str],
                   kinds: list[str]) -> list:
    """One request per kind; a request that conflicts with earlier ones is drawn again. A
    request of a kind the policy can forbid records its decision."""
    requests = []
    for kind in kinds:
        forbidden = kind in forbiddable and draft.rng.chance(draft.config.forbidden_rate)
        for _ in range(10):
            draft.owner += 1
            try:
                request = table[kind](draft, forbidden)
                if kind in forbiddable:
                    request.decision = "forbidden" if request.forbidden else "allowed"
                requests.append(request)
                break
            except Conflict:  # draw this request again, on other records
                continue
        else:
            raise RuntimeError(f"could not draft a {kind} request that fits the others")
    return requests


def _asks(step: Step) -> bool:
    """Whether an oracle turn asks the customer for a detail (a question that is no action
    summary to confirm)."""
    return "say" in step and is_question(step["say"])


def give_everything(requests: list, topic: str, known_fact: str) -> None:
    """At `opening = "given"`: the customer states the whole request, so each record's id is
    known (its fact under `topic` says it: `known_fact` formatted with the id) and the oracle
    asks nothing. Call before `settle_vague` (no record is then found from a description) and
    `expand_locates`; the task's identification is one read of the customer's own record
    (`given_intro`)."""
    for request in requests:
        for step in request.plan:
            spec = step.get("locate")
            if spec is not None:
                spec["known"] = True
                request.facts[topic] = known_fact.format(id=spec["id"])
        request.plan = [step for step in request.plan if not _asks(step)]


def given_identity(identity: dict[str, str], user_id: str) -> dict[str, str]:
    """The customer's identity answers at `opening = "given"`: their user id, said first."""
    return {"user_id": f"My user id is {user_id}.", **identity}


def given_intro(user_id: str) -> list[Step]:
    """The oracle's identification at `opening = "given"`: read the customer's own record."""
    return [{"call": {"name": "get_user_details", "arguments": {"user_id": user_id}}}]
