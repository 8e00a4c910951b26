"""A minimal capability env that passes the whole kit: the tests derive mutants from it by
replacing one marked line (a marker is a comment naming the hook)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trace_gym.capability_env import CapabilityConfig, CapabilityEnv, Prefill, next_step, write_calls
from trace_gym.rng import Rng
from trace_gym.verdict import Check, Verdict
from trace_gym.worlds import retail
from trace_gym.worlds.world import World

# HOOK:imports

TOOLS = {"retail": ["get_order_details", "cancel_pending_order"]}  # HOOK:tools
SIZE = retail.RetailWorldSize(products=3, variants=3, users=0)
STATE = [0]  # HOOK:state


@dataclass
class Task:
    domain: str
    order_id: str
    reason: str
    prefill: list[dict[str, Any]] = field(repr=False)
    hidden: list[str] = field(default_factory=list)
    max_steps: int = 4
    kind: str = "cancel_order"
    capabilities_needed = ["precondition_verification"]

    @property
    def instructions(self) -> str:
        return f"cancel {self.order_id}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)  # HOOK:to_json


def generate(rng: Rng, config: CapabilityConfig) -> tuple[Task, World]:
    pass  # HOOK:generate
    b = retail.RetailBuilder(rng, SIZE)
    user = b.add_user()
    order = b.add_order(user, status="pending")  # HOOK:order
    reason = rng.choice(("no longer needed", "ordered by mistake"))
    world = b.build()
    pre = Prefill(world, retail.TOOLS.subset(TOOLS["retail"]))
    pre.user(f"Please cancel order {order['order_id']}, reason: {reason}. I confirm.")  # HOOK:user
    pre.lookup("get_order_details", order_id=order["order_id"])
    return Task("retail", order["order_id"], reason, pre.messages, hidden=[]), world  # HOOK:task


def verify(task: Task, initial_world: World, final_world: World, messages: list) -> Verdict:
    expected = initial_world.fork()
    retail.TOOLS["cancel_pending_order"].fn(expected, order_id=task.order_id, reason=task.reason)  # HOOK:expected
    ok = final_world == expected  # HOOK:verify
    ok = ok and len(write_calls(task, messages, arguments=False)) == 1  # HOOK:one_write
    return Verdict(1.0 if ok else 0.0, (Check("database", ok, 1.0 if ok else 0.0),))


def oracle(task: Task, messages: list) -> Any:
    call = {"name": "cancel_pending_order", "arguments": {"order_id": task.order_id, "reason": task.reason}}  # HOOK:oracle
    return next_step(task, messages, [call, "Done."])


class TemplateEnv(CapabilityEnv):
    capability = "precondition_verification"
    tools = TOOLS
    guidance = "Check the order first."
    NOTE = None  # HOOK:env_methods

    generate_task = staticmethod(generate)
    verify_task = staticmethod(verify)
    oracle = staticmethod(oracle)

    def _new_episode(self, rng: Rng) -> Any:
        return super()._new_episode(rng)  # HOOK:env_generate
