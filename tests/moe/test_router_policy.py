"""The router policy as a batched policy of the episode driver, with stand-ins for the model:
each conversation routed once, its turns produced by its option's policy under that
option's adapter, and released where it was routed."""

from __future__ import annotations

import contextlib

import pytest

pytest.importorskip("peft")

from trace_gym.driver import EpisodeRequest, Live, Reply  # noqa: E402
from trace_gym.moe.policy import RouterPolicy  # noqa: E402


class FakePeft:
    """Records which adapter is on when an option's policy runs."""

    def __init__(self) -> None:
        self.active = "none"

    def set_adapter(self, name: str) -> None:
        self.active = name

    @contextlib.contextmanager
    def disable_adapter(self):
        before, self.active = self.active, "base"
        yield
        self.active = before


class FakeOption:
    """A batched policy that answers every submitted turn at the next collect, naming the
    adapter that was on."""

    def __init__(self, peft: FakePeft) -> None:
        self.peft, self.queue, self.released = peft, [], []

    def submit(self, live: Live) -> None:
        self.queue.append(live)

    def collect(self) -> list[tuple[Live, Reply]]:
        ready, self.queue = self.queue, []
        return [(live, Reply(f"{self.peft.active}:{live.turn}")) for live in ready]

    def release(self, live: Live) -> None:
        self.released.append(live.key)


def _router(choices: dict[str, int]) -> RouterPolicy:
    """A RouterPolicy over stand-ins: the opening user message picks the option."""
    from trace_gym.moe.router import first_user_turn

    policy = RouterPolicy.__new__(RouterPolicy)
    policy.peft = FakePeft()
    policy.first_user_turn = first_user_turn
    policy.options = ["base", "a", "b"]
    policy.router = type("Router", (), {"choose": staticmethod(lambda turn: choices[turn[-1]["content"]])})()
    policy.per_option = {option: FakeOption(policy.peft) for option in policy.options}
    policy.decisions, policy.chosen = {}, {}
    policy.waiting = {option: set() for option in policy.options}
    policy.name = "router:test"
    return policy


def _live(key: int, text: str) -> Live:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": text}]
    return Live(key, EpisodeRequest(key), "env", None, messages, [], None)


def test_each_conversation_is_routed_once_and_its_turns_run_under_its_adapter():
    router = _router({"cancel": 1, "book": 2, "hello": 0})
    lives = [_live(0, "cancel"), _live(1, "book"), _live(2, "hello"), _live(3, "cancel")]
    for live in lives:
        router.submit(live)
    replies = {live.key: reply.action for live, reply in router.collect()}
    assert replies == {0: "a:0", 1: "b:0", 2: "base:0", 3: "a:0"}
    assert len(router.decisions) == 3  # two conversations with one opening: one decision
    # the next turn stays with its option, whatever its conversation says now
    lives[0].turn = 1
    lives[0].messages = [*lives[0].messages, {"role": "assistant", "content": "ok"},
                         {"role": "user", "content": "book"}]
    router.submit(lives[0])
    assert [(live.key, reply.action) for live, reply in router.collect()] == [(0, "a:1")]
    assert router.collect() == []  # nothing submitted, nothing collected
    for live in lives:
        router.release(live)
    assert router.per_option["a"].released == [0, 3] and router.per_option["b"].released == [1]
    assert router.per_option["base"].released == [2] and router.chosen == {}
