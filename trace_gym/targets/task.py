"""What a target task is: a customer with one or more requests, each carrying what the
scripted user knows, the gold writes, what must be said, and the oracle's turns."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.deprecation import renamed
from trace_gym.jsondata import copy_json

# An oracle turn: {"say": text} or {"call": {"name": ..., "arguments": {...}}}.
Step = dict[str, Any]


def say(text: str) -> Step:
    """An oracle turn that says `text` to the customer."""
    return {"say": text}


def call(name: str, **arguments: Any) -> Step:
    """An oracle turn that calls the tool `name` with these arguments."""
    return {"call": {"name": name, "arguments": arguments}}


@dataclass
class CustomerRequest:
    """One thing the customer wants (a target task holds one or more)."""

    kind: str
    """Request kind, e.g. 'cancel_reservation'."""
    opening: str
    """How the customer first states it (no ids or details)."""
    instruction: str
    """The request as the customer's instructions describe it."""
    facts: dict[str, str] = field(default_factory=dict)
    """Topic -> what the customer answers when asked about it."""
    confirm: list[str] = field(default_factory=list)
    """Terms an action summary must contain for the customer to say yes."""
    writes: list[dict[str, Any]] = field(default_factory=list)
    """The gold write calls, in order ({'name', 'arguments'})."""
    communicate: list[dict[str, str]] = field(default_factory=list)
    """Information the agent must tell the customer: {'kind', 'value'}, stated in one message
    with no other value of its kind (`trace_gym.statements`)."""
    rule: list[str] = field(default_factory=list)
    """For a request the policy forbids: the refusal must name one of these terms."""
    conflicts: list[str] = field(default_factory=list)
    """For a request the policy forbids: terms of rules that do not apply, which the refusal
    must not name (words that describe the record itself are left out)."""
    fact: dict[str, Any] = field(default_factory=dict)
    """For a request the policy forbids: the record fact that breaks the rule, which the
    refusal must state (`{'kind', 'value', 'also'}` for `trace_gym.statements.stated`: the
    value and no other of its kind but those of `also`, the rule's own words or what the
    customer asked for). Naming the rule alone is what a policy that never reads the record
    says too."""
    forbids: list[dict[str, Any]] = field(default_factory=list)
    """For a request the policy forbids: the write calls that would carry it out
    ({'name', 'arguments'}, the arguments a call must contain to be one of them). Attempting
    one voids the refusal, even when the tool rejects the call."""
    decision: str | None = None
    """What the agent must find out from the records: 'allowed' or 'forbidden' for a kind the
    policy can forbid, None for the others."""
    capabilities: list[str] = field(default_factory=list)
    subject: str | None = None
    """Id of the record the request is about; a refusal counts only after it was looked up."""
    plan: list[Step] = field(default_factory=list)
    """The oracle's turns for this request."""

    @property
    def forbidden(self) -> bool:
        """Whether the policy forbids this request (it has a rule to name)."""
        return bool(self.rule)


_REQUEST_FIELDS = fields(CustomerRequest)  # `asdict`, without its generic walk (several times the cost)


@dataclass
class TargetTask:
    """One conversation's task: the customer, how they identify themselves, their requests in
    order, and the oracle's identification turns."""

    domain: str
    user_id: str
    identity: dict[str, str]
    """Topic -> answer for identification questions (user id, email, name and zip)."""
    requests: list[CustomerRequest]
    intro: list[Step]
    """The oracle's identification turns, before the first request's."""
    persona: str
    opening: str = "ask"
    """How the customer opens (`TargetConfig.opening`): at "given", the first message states
    who they are and the whole first request, and each later request comes whole."""

    @property
    def kind(self) -> str:
        """The request's kind, or 'compound' when there are several."""
        return self.requests[0].kind if len(self.requests) == 1 else "compound"

    @property
    def kinds(self) -> list[str]:
        """The kinds of the requests, in order."""
        return [r.kind for r in self.requests]

    @property
    def capabilities_needed(self) -> list[str]:
        """The capabilities the requests need as drawn, plus multi-step task completion when there
        are several, in `capabilities.ALL` order."""
        needed = {c for r in self.requests for c in r.capabilities}
        if len(self.requests) > 1:
            needed.add(cap.MULTI_STEP)
        return [c for c in cap.ALL if c in needed]

    @property
    def hidden(self) -> list[str]:
        """What the agent must find out and the customer never says: payment method ids of
        the gold writes, and ids of records the customer only describes."""
        out: list[str] = []
        for r in self.requests:
            for w in r.writes:
                for key in ("payment_id", "payment_method_id"):
                    if key in w["arguments"]:
                        out.append(w["arguments"][key])
            for step in r.plan:
                if "locate" in step and not step["locate"]["known"]:
                    out.append(step["locate"]["id"])
        return out

    @property
    def plan(self) -> list[Step]:
        """The oracle's turns for the whole conversation: identification, then each request's."""
        return [*self.intro, *(s for r in self.requests for s in r.plan)]

    @property
    def instructions(self) -> str:
        """The customer's instructions: the persona, the requests in order, and how they behave."""
        lines = [self.persona, "In this call you want, in this order:"]
        lines += [f"{i}. {r.instruction}" for i, r in enumerate(self.requests, 1)]
        lines.append("You give every detail of a request when you make it, and you confirm an action only "
                     "when its summary matches what you want." if self.opening == "given" else
                     "You give details only when the agent asks for them, and you confirm an "
                     "action only when its summary matches what you want.")
        return "\n".join(lines)

    @property
    def decision(self) -> str | None:
        """The task's verdict as the records decide it: 'forbidden' when some request must be
        refused, 'allowed' when every request that could be forbidden is allowed, None when
        no request could be."""
        decisions = [r.decision for r in self.requests if r.decision is not None]
        if not decisions:
            return None
        return "forbidden" if "forbidden" in decisions else "allowed"

    def to_json(self) -> dict[str, Any]:
        """The task as JSON (what trajectories record)."""
        return {
            "domain": self.domain,
            "decision": self.decision,
            "kind": self.kind,
            "kinds": self.kinds,
            "user_id": self.user_id,
            "identity": dict(self.identity),
            "persona": self.persona,
            "capabilities_needed": self.capabilities_needed,
            "intro": self.intro,
            "opening": self.opening,
            "requests": [{f.name: copy_json(getattr(r, f.name)) for f in _REQUEST_FIELDS} for r in self.requests],
        }


# `Request` was also the trainer's name for an episode to play: the old name still works, warning.
__getattr__ = renamed(__name__, {"Request": "CustomerRequest"})
