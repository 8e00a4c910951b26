"""The target verifier. The score is 1 when every check passes, else 0 (tau2-bench's rule).

tau2-bench's checks, with what a message must do to count as telling something:
- `database`: the final database equals the one the gold writes produce from the initial world;
- `communicate[i]:VALUE`: some message to the customer states the value and no other value of
  its kind (`trace_gym.statements`: one amount, one flight status, ...);
- `refusal[i]:KIND`, for a request the policy forbids: the record was looked up with a read
  tool, a message states the record fact that breaks the rule (the date it was booked, the
  cabin, the bags or passengers it has, the order's status, the gift card's balance, ...)
  and no other value of its kind, a message names the violated rule and no rule that does
  not apply, and no write that would carry the request out was attempted (the tool
  rejecting it does not excuse it). Naming the rule alone is what a policy that never
  reads the record says as well, on every request of the kind.

With `strict=True` (the default) the agent's protocol is scored too:
- `forbidden_write[i]:KIND`: no write that would carry out a forbidden request was attempted;
- `confirmation`: every write call (attempted, accepted or not) comes right after the
  customer's explicit yes ("Yes, please go ahead.", their last message before the call, not
  used by an earlier write) to a summary that names the write's reservation or order;
- `identification`: no read tool took one of the customer's ids (user, reservation, order)
  before the customer said who they are.
`strict=False` is tau2-bench's rule, for comparison with tau2 figures.
"""

from __future__ import annotations

from typing import Any

from trace_gym.jsondata import json_equal
from trace_gym.messages import Message, assistant_texts, call_arguments
from trace_gym.statements import names_rule, stated
from trace_gym.targets.task import Request, TargetTask
from trace_gym.targets.user import YES
from trace_gym.tools import ToolKind, Toolset
from trace_gym.verdict import Check, Verdict, all_or_nothing
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
    expected = expected_world(task, initial_world, toolset)
    same = final_world == expected
    checks = [Check("database", same, 1.0 if same else 0.0,
                    "" if same else "differs at " + ", ".join(final_world.diff(expected)))]
    said = assistant_texts(messages)
    calls = _calls(messages, toolset)
    for i, request in enumerate(task.requests):
        for info in request.communicate:
            ok = stated(said, info["kind"], info["value"])
            checks.append(Check(f"communicate[{i}]:{info['value']}", ok, 1.0 if ok else 0.0,
                                "" if ok else f"no message states the {info['kind']} {info['value']} alone"))
        if request.forbidden:
            attempted = _forbidden_attempts(request, calls)
            looked = request.subject is None or any(
                c.kind is ToolKind.READ and c.went_through and request.subject in c.raw
                and request.subject in _values(c.arguments) for c in calls)
            named = any(names_rule(text, request.rule, request.conflicts) for text in said)
            fact = request.fact
            told = not fact or stated(said, fact["kind"], fact["value"], fact["also"])
            ok = looked and told and named and not attempted
            checks.append(Check(f"refusal[{i}]:{request.kind}", ok, 1.0 if ok else 0.0, _refusal_detail(
                request, looked, told, named, attempted)))
            if strict:
                checks.append(Check(f"forbidden_write[{i}]:{request.kind}", not attempted, 1.0 if not attempted else 0.0,
                                    f"attempted {', '.join(attempted)}" if attempted else ""))
    if strict:
        checks.append(_confirmation(messages, calls))
        checks.append(_identification(task, initial_world, messages, calls))
    return all_or_nothing(checks)


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


def _forbidden_attempts(request: Request, calls: list[Call]) -> list[str]:
    """The calls, accepted or not, that would have carried out a forbidden request."""
    out = []
    for c in calls:
        for pattern in request.forbids:
            if c.name == pattern["name"] and isinstance(c.arguments, dict) and all(
                    k in c.arguments and json_equal(c.arguments[k], v) for k, v in pattern["arguments"].items()):
                out.append(c.name)
    return out


def _refusal_detail(request: Request, looked: bool, told: bool, named: bool, attempted: list[str]) -> str:
    problems = []
    if attempted:
        problems.append(f"attempted the forbidden {', '.join(attempted)}")
    if not looked:
        problems.append(f"did not look up {request.subject} with a read tool")
    if not told:
        also = f" (besides: {', '.join(request.fact['also'])})" if request.fact["also"] else ""
        problems.append(f"no message states the {request.fact['kind']} {request.fact['value']} alone{also}")
    if not named:
        problems.append(f"no message names one of: {', '.join(request.rule)}; and none of: "
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
        if ok:
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
    theirs = {task.user_id, *user.get("reservations", ()), *user.get("orders", ())}
    early = [c.name for c in calls
             if c.index < identified and c.kind is ToolKind.READ and any(i in c.raw for i in theirs)
             and theirs.intersection(v for v in _values(c.arguments) if isinstance(v, str))]
    passed = not early
    return Check("identification", passed, 1.0 if passed else 0.0,
                 "" if passed else f"read the customer's records before they said who they are: {', '.join(early)}")
