"""The target verifier, tau2-bench's rule: the final database must equal the one the gold
writes produce from the initial world, every piece of required information must have been
told to the customer, and every forbidden request must have been refused with its rule
named. The score is 1 when all checks pass, else 0."""

from __future__ import annotations

from trace_gym.messages import Message, assistant_texts, tool_calls_of
from trace_gym.targets.task import TargetTask
from trace_gym.targets.user import mentions
from trace_gym.tools import Toolset
from trace_gym.verdict import Check, Verdict, all_or_nothing
from trace_gym.worlds.world import World


def expected_world(task: TargetTask, initial_world: World, toolset: Toolset) -> World:
    """The world the gold writes leave (a gold write that fails is a generator bug)."""
    world = initial_world.fork()
    for request in task.requests:
        for write in request.writes:
            toolset[write["name"]].fn(world, **write["arguments"])
    return world


def verify(task: TargetTask, initial_world: World, final_world: World,
           messages: list[Message], toolset: Toolset) -> Verdict:
    expected = expected_world(task, initial_world, toolset)
    same = final_world == expected
    checks = [Check("database", same, 1.0 if same else 0.0,
                    "" if same else "differs at " + ", ".join(final_world.diff(expected)))]
    said = assistant_texts(messages)
    for i, request in enumerate(task.requests):
        for info in request.communicate:
            ok = any(mentions(text, info) for text in said)
            checks.append(Check(f"communicate[{i}]:{info}", ok, 1.0 if ok else 0.0))
        if request.forbidden:
            looked = request.subject is None or _looked_up(messages, request.subject)
            named = any(mentions(text, term) for text in said for term in request.rule)
            ok = looked and named
            checks.append(Check(f"refusal[{i}]:{request.kind}", ok, 1.0 if ok else 0.0,
                                f"must look up {request.subject} and name one of: " + ", ".join(request.rule)))
    return all_or_nothing(checks)


def _looked_up(messages: list[Message], record_id: str) -> bool:
    """Whether a tool call that succeeded took this record id as an argument."""
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    for m in messages:
        if m["role"] != "assistant":
            continue
        for tc, (_, args) in zip(m.get("tool_calls") or (), tool_calls_of(m)):
            if isinstance(args, dict) and record_id in args.values() \
                    and not results.get(tc["id"], "Error").startswith("Error"):
                return True
    return False
