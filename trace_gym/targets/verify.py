"""The target verifier. The score is 1 when every check passes, else 0 (tau2-bench's rule).

tau2-bench's checks, with what a message must do to count as telling something:
- `database`: the final database equals the one the gold writes produce from the initial world;
- `communicate[i]:VALUE`: some message to the customer states the value and no other value of
  its kind (`trace_gym.statements`: one amount, one flight status, ...);
- `refusal[i]:KIND`, for a request the policy forbids: the record was looked up with a read
  tool, one message states the record fact that breaks the rule (the date it was booked, the
  cabin, the bags or passengers it has, the order's status, the gift card's balance, ...)
  with no other value of its kind and names the violated rule and no rule that does not
  apply, and no write that would carry the request out was attempted (the tool rejecting it
  does not excuse it). Naming the rule alone is what a policy that never reads the record
  says as well, on every request of the kind.

A statement, like a write, cannot be taken back: once a message sent while request i is the
customer's open one states a value of a kind the request needs (its `communicate` values,
its refusal's fact) other than the right one (or those the request allows besides, `also`),
that request's check fails. Otherwise an agent could state each candidate in its own
message. Request i is open from the customer's message that asks for it
(`trace_gym.targets.user.ask_message`) to the one that asks for the next.

With `strict=True` (the default) the agent's protocol is scored too:
- `forbidden_write[i]:KIND`: no write that would carry out a forbidden request was attempted;
- `confirmation`: every write call (attempted, accepted or not) comes right after the
  customer's explicit yes ("Yes, please go ahead.", their last message before the call, not
  used by an earlier write) to a summary that names the write's reservation or order;
- `identification`: no read tool took one of the customer's ids (user, reservation, order)
  before the customer said who they are (at `opening = "given"`, where they say it at once:
  no read of their reservations or orders before a read of their own user record);
- `summaries`: the customer declined no action summary (proposing candidates until the
  customer says yes is guessing, not finding out).
`strict=False` is tau2-bench's rule, for comparison with tau2 figures.
"""

from __future__ import annotations

from typing import Any

from trace_gym.jsondata import json_equal
from trace_gym.messages import Message, call_arguments
from trace_gym.statements import names_rule, states, told_alone
from trace_gym.targets.task import CustomerRequest, TargetTask
from trace_gym.targets.user import DECLINE, YES, ask_message
from trace_gym.tools import ToolKind, Toolset
from trace_gym.verdict import Check, Verdict, all_or_nothing
from trace_gym.worlds import domain_named
from trace_gym.worlds.world import World

SUBJECT_ARGUMENTS = ("reservation_id", "order_id")
"""Arguments a summary must name for the customer's yes to cover the write."""


def expected_world(task: TargetTask, initial_world: World, toolset: Toolset) -> World:
    """The world the gold writes leave (a gold write that fails is a generator bug)."""
    world = initial_world.fork()
    for request in task.requests:
        for write in request.writes:
            toolset[write["name"]].fn(world, **write["arguments"])
    return world


def verify(task: TargetTask, initial_world: World, final_world: World,
           messages: list[Message], toolset: Toolset, strict: bool = True) -> Verdict:
    """The verdict of a target episode: the checks of the module docstring, scored all or nothing."""
    expected = expected_world(task, initial_world, toolset)
    same = final_world == expected
    checks = [Check("database", same, 1.0 if same else 0.0,
                    "" if same else "differs at " + ", ".join(final_world.diff(expected)))]
    spans = request_spans(task, messages)
    calls = _calls(messages, toolset)
    for i, request in enumerate(task.requests):
        said = spans[i]
        for info in request.communicate:
            told, wrong = told_alone(said, info["kind"], info["value"], info.get("also", ()))
            ok = told and not wrong
            checks.append(Check(f"communicate[{i}]:{info['value']}", ok, 1.0 if ok else 0.0, "" if ok else (
                f"a message states the {info['kind']} {wrong}, not {info['value']}" if wrong else
                f"no message states the {info['kind']} {info['value']} alone")))
        if request.forbidden:
            attempted = _forbidden_attempts(request, calls)
            looked = request.subject is None or any(
                c.kind is ToolKind.READ and c.went_through and request.subject in c.raw
                and request.subject in _values(c.arguments) for c in calls)
            fact = request.fact
            wrong = told_alone(said, fact["kind"], fact["value"], fact["also"])[1] if fact else None
            refused = any(names_rule(text, request.rule, request.conflicts)
                          and (not fact or states(text, fact["kind"], fact["value"], fact["also"])) for text in said)
            ok = looked and refused and not wrong and not attempted
            checks.append(Check(f"refusal[{i}]:{request.kind}", ok, 1.0 if ok else 0.0, _refusal_detail(
                request, looked, refused, wrong, attempted)))
            if strict:
                checks.append(Check(f"forbidden_write[{i}]:{request.kind}", not attempted, 1.0 if not attempted else 0.0,
                                    f"attempted {', '.join(attempted)}" if attempted else ""))
    if strict:
        checks.append(_confirmation(messages, calls))
        checks.append(_identification(task, initial_world, messages, calls))
        declined = sum(1 for m in messages if m["role"] == "user" and (m.get("content") or "").startswith(DECLINE))
        checks.append(Check("summaries", not declined, 0.0 if declined else 1.0,
                            f"the customer declined {declined} action summar{'y' if declined == 1 else 'ies'}"
                            if declined else ""))
    return all_or_nothing(checks)


def request_spans(task: TargetTask, messages: list[Message]) -> list[list[str]]:
    """For each request, the texts the agent sent the customer while it was the open one:
    from the customer's message that asks for it to the one that asks for the next (the
    first request's span starts with the conversation)."""
    spans: list[list[str]] = [[] for _ in task.requests]
    asks = [ask_message(task, i) for i in range(1, len(task.requests))]
    open_request = 0
    for m in messages:
        role = m["role"]
        if role == "user":
            if open_request < len(asks) and m.get("content") == asks[open_request]:
                open_request += 1
        elif role == "assistant" and m.get("content") and not m.get("tool_calls"):
            spans[open_request].append(m["content"])
    return spans


class Call:
    """A call as the verifier reads it: the index of its assistant message, the tool's name
    and kind (None for an unknown tool), whether the tool accepted it, and its arguments,
    parsed only when a check needs them (`raw` lets a check rule a call out first: parsing
    every call's JSON was most of a verification's cost)."""

    __slots__ = ("index", "name", "kind", "went_through", "raw", "_arguments")

    def __init__(self, index: int, name: Any, kind: Any, went_through: bool, raw: Any) -> None:
        self.index, self.name, self.kind, self.went_through = index, name, kind, went_through
        self.raw = raw if isinstance(raw, str) else ""
        self._arguments: Any = _UNREAD

    @property
    def arguments(self) -> Any:
        """The call's arguments, parsed from JSON on first use ({} when there were none)."""
        if self._arguments is _UNREAD:
            self._arguments = call_arguments({"function": {"arguments": self.raw}}) if self.raw else {}
        return self._arguments


_UNREAD = object()


def _calls(messages: list[Message], toolset: Toolset) -> list[Call]:
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    out = []
    for index, m in enumerate(messages):
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        for tc in m["tool_calls"]:
            function = tc.get("function", {})
            name = function.get("name")
            tool = toolset.get(name) if isinstance(name, str) else None
            went_through = not results.get(tc.get("id"), "Error").startswith("Error")
            out.append(Call(index, name, tool.kind if tool else None, went_through, function.get("arguments")))
    return out


def _values(arguments: Any) -> list[Any]:
    return list(arguments.values()) if isinstance(arguments, dict) else []


def _forbidden_attempts(request: CustomerRequest, calls: list[Call]) -> list[str]:
    """The calls, accepted or not, that would have carried out a forbidden request."""
    out = []
    for c in calls:
        for pattern in request.forbids:
            if c.name == pattern["name"] and isinstance(c.arguments, dict) and all(
                    k in c.arguments and json_equal(c.arguments[k], v) for k, v in pattern["arguments"].items()):
                out.append(c.name)
    return out


def _refusal_detail(request: CustomerRequest, looked: bool, refused: bool, wrong: str | None,
                    attempted: list[str]) -> str:
    problems = []
    if attempted:
        problems.append(f"attempted the forbidden {', '.join(attempted)}")
    if not looked:
        problems.append(f"did not look up {request.subject} with a read tool")
    fact = request.fact
    if wrong is not None:
        problems.append(f"a message states the {fact['kind']} {wrong}, not {fact['value']}")
    if not refused:
        also = f" (besides: {', '.join(fact['also'])})" if fact and fact["also"] else ""
        stating = f"states the {fact['kind']} {fact['value']} alone{also} and " if fact else ""
        problems.append(f"no message {stating}names one of: {', '.join(request.rule)}; and none of: "
                        f"{', '.join(request.conflicts)}")
    return "; ".join(problems)


def _confirmation(messages: list[Message], calls: list[Call]) -> Check:
    unconfirmed = []
    used: set[int] = set()
    for c in calls:
        if c.kind is not ToolKind.WRITE:
            continue
        yes = next((j for j in range(c.index - 1, 0, -1) if messages[j]["role"] == "user"), None)
        summary = messages[yes - 1] if yes is not None else None
        args = c.arguments
        ok = (yes is not None and yes not in used and messages[yes]["content"] == YES
              and summary is not None and summary["role"] == "assistant" and not summary.get("tool_calls")
              and all(str(args[k]) in (summary.get("content") or "")
                      for k in SUBJECT_ARGUMENTS if isinstance(args, dict) and k in args))
        if ok and yes is not None:  # ok says yes is not None, which the checker cannot follow
            used.add(yes)
        else:
            unconfirmed.append(c.name)
    passed = not unconfirmed
    return Check("confirmation", passed, 1.0 if passed else 0.0,
                 "" if passed else "no explicit yes to a summary of: " + ", ".join(unconfirmed))


def _identification(task: TargetTask, initial_world: World, messages: list[Message], calls: list[Call]) -> Check:
    answers = list(task.identity.values())
    identified = next((i for i, m in enumerate(messages) if m["role"] == "user"
                       and any(a in (m.get("content") or "") for a in answers)), len(messages))
    user = initial_world.tables["users"].get(task.user_id, {})
    theirs = {task.user_id, *user.get(domain_named(task.domain).records, ())}
    if task.opening == "given":  # they say who they are at once: their own record comes first
        identified = next((c.index + 1 for c in calls if c.name == "get_user_details" and c.went_through
                           and task.user_id in c.raw and task.user_id in _values(c.arguments)), len(messages))
        theirs.discard(task.user_id)
        what = "read the customer's records before their own user record"
    else:
        what = "read the customer's records before they said who they are"
    early = [c.name for c in calls
             if c.index < identified and c.kind is ToolKind.READ and any(i in c.raw for i in theirs)
             and theirs.intersection(v for v in _values(c.arguments) if isinstance(v, str))]
    passed = not early
    return Check("identification", passed, 1.0 if passed else 0.0, "" if passed else f"{what}: {', '.join(early)}")
