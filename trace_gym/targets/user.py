"""The scripted customer: deterministic, no LLM.

It opens with its reason for calling (no ids, no details; at `opening = "given"`, who it
is, the record's id and every detail of the request, and so for each later request), answers the questions it is
asked from what it knows (identity, then the current request's facts), says yes to an
action summary only when the summary names what it wants (every term of the request's
`confirm`, and none of the customer's other records), and otherwise declines it by
restating the request, as a tau2 user does; it ends the call at the second declined
summary (the strict verifier fails an episode at the first: proposing candidates until
the customer says yes is no way to find the right one). It moves to its next request once
the current one is handled (a write was made, the agent refused, or the information it
asked for was stated, with no other value of its kind), and ends the conversation after
the last one. An agent that keeps
talking without helping is nudged, then left.

Questions are recognised by keywords, so any agent, not only the oracle, can be served:
the phrases below are the ones a customer service agent naturally uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from trace_gym.statements import states
from trace_gym.targets.task import CustomerRequest, TargetTask

# topic -> phrases that, in a question, ask about it
TOPICS: dict[str, tuple[str, ...]] = {
    "user_id": ("user id", "user-id", "userid"),
    "email": ("email", "e-mail"),
    "name_zip": ("zip", "postal code"),
    "reservation": ("reservation id", "reservation number", "which reservation", "booking reference",
                    "confirmation number"),
    "order": ("order id", "order number", "which order"),
    "reason": ("reason", "why"),
    "payment": ("payment method", "which card", "pay with", "how would you like to pay", "refund go",
                "refund to"),
    "flight": ("which flight", "new flight", "what date", "which date", "new date", "preferred flight"),
    "trip": ("flying from", "where are you flying", "origin", "destination", "one way or round trip"),
    "cabin": ("cabin",),
    "passengers": ("passenger",),
    "bags": ("bag",),
    "insurance": ("insurance",),
    "items": ("which item", "what item", "which product", "what would you like to change",
              "what would you like to exchange", "what would you like to return"),
    "address": ("new address", "shipping address", "which address", "home address",
                "mailing address"),
}

_TOPIC_OF = {cue: topic for topic, cues in TOPICS.items() for cue in cues}
# One scan for every cue; longer cues first so that "payment method" wins over "payment".
_TOPICS = re.compile("|".join(map(re.escape, sorted(_TOPIC_OF, key=len, reverse=True))))

CONFIRM_CUES = ("confirm", "yes/no", "(yes", "shall i proceed", "should i proceed", "proceed?",
                "go ahead?", "do you want me to", "would you like me to", "shall i go ahead")
REFUSAL_CUES = ("cannot", "can't", "can not", "unable to", "not able to", "not possible",
                "not allowed", "not eligible", "isn't eligible", "is not eligible",
                "does not qualify", "doesn't qualify", "not permitted", "won't be able")
_CONFIRM = re.compile("|".join(map(re.escape, CONFIRM_CUES)))
_REFUSAL = re.compile("|".join(map(re.escape, REFUSAL_CUES)))
_QUESTION = re.compile(r"\?|please provide|please share|let me know")

MAX_NUDGES = 3
MAX_DECLINES = 2
YES = "Yes, please go ahead."
DECLINE = "No, that's not what I asked for."
STOP = "Thank you, that's all I needed. Goodbye!"
GIVE_UP = "I don't think this is going anywhere. I'll call back later. Goodbye."


def follow_up(opening: str) -> str:
    """A later request's opening: 'Hi, I'd like X.' -> 'Thanks. Also, I'd like X.'"""
    body = opening.removeprefix("Hi, ")
    return f"Thanks. Also, {body[0].lower()}{body[1:]}"


def is_question(text: str) -> bool:
    """Whether an agent's text asks the customer something that is not an action summary to
    confirm (what the customer answers from what it knows)."""
    lowered = text.lower()
    return bool(_QUESTION.search(lowered)) and not _CONFIRM.search(lowered)


def _details(request: CustomerRequest) -> str:
    return " ".join(dict.fromkeys(request.facts.values()))


def first_message(task: TargetTask) -> str:
    """The customer's first message: the first request's opening; at `opening = "given"`,
    with who they are and every detail of the request."""
    opening = task.requests[0].opening
    if task.opening != "given":
        return opening
    return " ".join(x for x in (opening, task.identity.get("user_id", ""), _details(task.requests[0])) if x)


def ask_message(task: TargetTask, index: int) -> str:
    """The message that asks for request `index` (> 0) once the one before is handled; at
    `opening = "given"`, with every detail of it."""
    request = task.requests[index]
    text = follow_up(request.opening)
    return f"{text} {_details(request)}" if task.opening == "given" and request.facts else text


@dataclass
class UserTurn:
    """The customer's answer to one reply of the agent, and whether it ends the conversation."""

    text: str
    ended: bool = False


class ScriptedUser:
    """One customer for one task; call `respond` with each reply the agent sends."""

    def __init__(self, task: TargetTask, records: Iterable[str] = ()) -> None:
        self.task = task
        self.records = tuple(records)
        """Ids of the customer's records (reservations, orders): a summary naming one that is
        not the current request's is about something else."""
        self.index = 0
        self.nudges = 0
        self.declines = 0
        self.writes_at_start = 0

    @property
    def request(self) -> CustomerRequest:
        """The request the customer is on now."""
        return self.task.requests[self.index]

    def opening(self) -> str:
        """The customer's first message: why they call, with no ids or details (at
        `opening = "given"`, with who they are and the whole request: `first_message`)."""
        return first_message(self.task)

    def respond(self, reply: str, writes_so_far: int) -> UserTurn:
        """The customer's answer to the agent's reply `reply`, given the writes made so far (see
        the module docstring)."""
        text = reply.lower()
        req = self.request
        if _CONFIRM.search(text):
            if self._wanted(req, text):
                self.nudges = 0
                return UserTurn(YES)
            self.declines += 1
            restated = f"{DECLINE} {req.opening.removeprefix('Hi, ')}"
            if self.declines >= MAX_DECLINES:
                return UserTurn(f"{restated} {GIVE_UP}", ended=True)
            return UserTurn(restated)
        if _QUESTION.search(text):
            answer = self._answer(text)
            if answer:
                self.nudges = 0
                return UserTurn(answer)
        if self._handled(req, reply, writes_so_far):
            return self._next(writes_so_far)
        self.nudges += 1
        if self.nudges > MAX_NUDGES:
            return UserTurn(GIVE_UP, ended=True)
        return UserTurn("Could you help me with my request? " + req.opening)

    def _wanted(self, req: CustomerRequest, text: str) -> bool:
        """Whether a summary is of what the customer wants: it names every term of the
        request's `confirm`, and no record of theirs the request is not about."""
        if not req.confirm or not all(term.lower() in text for term in req.confirm):
            return False
        return not any(r.lower() in text for r in self.records if r != req.subject)

    def _answer(self, text: str) -> str:
        known = {**self.task.identity, **self.request.facts}
        answers: list[str] = []
        found = {_TOPIC_OF[m] for m in _TOPICS.findall(text)}
        asked = [topic for topic in TOPICS if topic in found]
        for topic in asked:
            if topic in known and known[topic] not in answers:
                answers.append(known[topic])
        if not answers and asked:
            return "Sorry, I don't know that."
        return " ".join(answers)

    def _handled(self, req: CustomerRequest, reply: str, writes_so_far: int) -> bool:
        text = reply.lower()
        if _REFUSAL.search(text):
            return True
        if req.writes:
            return writes_so_far > self.writes_at_start
        return bool(req.communicate) and all(states(reply, info["kind"], info["value"]) for info in req.communicate)

    def _next(self, writes_so_far: int) -> UserTurn:
        self.index += 1
        self.nudges = 0
        self.writes_at_start = writes_so_far
        if self.index >= len(self.task.requests):
            self.index -= 1
            return UserTurn(STOP, ended=True)
        return UserTurn(ask_message(self.task, self.index))
