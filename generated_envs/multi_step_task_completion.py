"""Multi-step task completion: finish every operation of a request that asks for several.

Task. An identified customer asks for 2 to 5 changes at once, each on its own record and
each allowed and fully specified, and confirms them all; the profile is already looked up.
Airline operations: cancel a reservation booked within the last day, add checked bags,
correct a passenger's name, change the cabin. Retail operations: cancel a pending order,
change a pending order's shipping address, return a delivered item, change the default
address. Operation counts follow the target's mix: airline 2/3/4/5 with weights
50/29/14/7 %, retail 48/39/10/3 %.

Tools (the target's schemas). Airline: get_user_details, cancel_reservation,
update_reservation_baggages, update_reservation_passengers, update_reservation_flights.
Retail: get_user_details, cancel_pending_order, modify_pending_order_address,
return_delivered_order_items, modify_user_address.

Reward. 0.6 x (operations done right / operations) + 0.4 when all are right, minus 0.1 per
write that did not complete an operation (a call the tool rejected, or one that went
through beyond the operations done), clipped to [0, 1]. An operation is right when its
record ends exactly as the requested change leaves it.

Episode end. The agent's first reply without a tool call, or operations + 5 steps.

Transfer rationale. On tau2-bench the base agent often handles the first thing the
customer asks for and then closes the conversation, or merges two changes into one call.
Here every episode lists several independent operations up front, and the reward grows
with each one completed, so stopping early or skipping one always costs. The operations
are the target's write tools on the target's records, so keeping track of what is still
open transfers to the target's multi-request conversations.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.capability_env import (
    CapabilityConfig,
    CapabilityEnv,
    Prefill,
    any_item,
    domain_toolsets,
    in_range,
    next_step,
    retail_store,
    write_calls,
)
from trace_gym.rng import Rng
from trace_gym.verdict import Check, Verdict
from trace_gym.worlds import airline, people
from trace_gym.worlds.airline.data import FREE_BAGS, TODAY
from trace_gym.worlds.world import World

CAPABILITY = cap.MULTI_STEP
TOOLS = {
    "airline": ["get_user_details", "cancel_reservation", "update_reservation_baggages",
                "update_reservation_passengers", "update_reservation_flights"],
    "retail": ["get_user_details", "cancel_pending_order", "modify_pending_order_address",
               "return_delivered_order_items", "modify_user_address"],
}
OPERATION_WEIGHTS = {"airline": (50, 29, 14, 7), "retail": (48, 39, 10, 3)}  # for 2, 3, 4, 5
AIRLINE_SIZE = airline.AirlineWorldSize(airports=3, direct_routes=0, users=0)
TOOLSETS = domain_toolsets(TOOLS)


# -- config ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Config(CapabilityConfig):
    """The env's knobs: those of every capability env, and its own below."""
    min_operations: int = 2
    """Fewest operations in one request (2-5); counts below it are drawn again."""
    max_operations: int = 5
    """Most operations in one request (2-5)."""

    _check_min_operations = in_range(2, 5, integer=True)
    _check_max_operations = in_range(2, 5, integer=True)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min_operations > self.max_operations:
            from trace_gym.errors import InvalidConfig
            raise InvalidConfig(f"min_operations={self.min_operations} is invalid: must be <= "
                                f"max_operations={self.max_operations}")


# -- task ------------------------------------------------------------------------------

@dataclass
class Task:
    """One episode's task: what the customer asks for and what the verifier checks it against."""
    domain: str
    operations: list[dict[str, Any]]
    """Each: {'text', 'write' ({'name', 'arguments'}), 'record' ([table, key])}."""
    prefill: list[dict[str, Any]] = field(repr=False)
    hidden: list[str] = field(default_factory=list)
    max_steps: int = 0

    capabilities_needed = [CAPABILITY]

    @property
    def kind(self) -> str:
        """The task's kind, as the trajectory records it."""
        return f"{len(self.operations)}_operations"

    @property
    def instructions(self) -> str:
        """The customer's brief: what they ask for, in their words."""
        return " ".join(op["text"] for op in self.operations)

    def to_json(self) -> dict[str, Any]:
        """The task as JSON, for the trajectory record."""
        return asdict(self)


# -- generator -------------------------------------------------------------------------

def _airline_operations(rng: Rng, n: int) -> tuple[list[dict[str, Any]], Any, World]:
    b = airline.AirlineBuilder(rng, AIRLINE_SIZE, network=False)
    flight = b.add_flight(b.spokes[0], b.spokes[1], rng.integer(6 * 60, 20 * 60))
    user = b.add_user()
    card = b.payment_ids(user, "credit_card")[0]
    ops = []
    for kind in [rng.choice(("cancel", "bags", "passenger", "cabin")) for _ in range(n)]:
        day = rng.integer(TODAY + 1, TODAY + 3)
        cabin = rng.choice(("economy", "business")) if kind == "cabin" else None
        res = b.add_reservation(user, itinerary=[flight], day=day, flight_type="one_way", cabin=cabin,
                                created_hours_ago=rng.integer(1, 20) if kind == "cancel" else None)
        b.ensure_available(flight["flight_number"], res["flights"][0]["date"])
        rid = res["reservation_id"]
        if kind == "cancel":
            text, write = (f"Cancel reservation {rid}, which I booked a few hours ago.",
                           {"name": "cancel_reservation", "arguments": {"reservation_id": rid}})
        elif kind == "bags":
            allowance = FREE_BAGS[user["membership"]][res["cabin"]] * len(res["passengers"])
            total = max(res["total_baggages"], allowance) + rng.integer(1, 2)
            nonfree = total - allowance
            text = (f"Add bags to reservation {rid} so it has {total} checked bags, {nonfree} of them paid, "
                    f"charged to {card}.")
            write = {"name": "update_reservation_baggages", "arguments": {
                "reservation_id": rid, "total_baggages": total, "nonfree_baggages": nonfree, "payment_id": card}}
        elif kind == "passenger":
            passengers = [dict(p) for p in res["passengers"]]
            new_first = rng.choice([f for f in people.FIRST_NAMES if f != passengers[0]["first_name"]])
            text = (f"On reservation {rid}, correct the first passenger's first name from "
                    f"{passengers[0]['first_name']} to {new_first}.")
            passengers[0]["first_name"] = new_first
            write = {"name": "update_reservation_passengers", "arguments": {"reservation_id": rid, "passengers": passengers}}
        else:
            new_cabin = "business" if res["cabin"] == "economy" else "economy"
            flights = [{"flight_number": s["flight_number"], "date": s["date"]} for s in res["flights"]]
            text = f"Change reservation {rid} to {new_cabin.replace('_', ' ')} on all flights, paid with {card}."
            write = {"name": "update_reservation_flights", "arguments": {
                "reservation_id": rid, "cabin": new_cabin, "flights": flights, "payment_id": card}}
        ops.append({"text": text, "write": write, "record": ["reservations", rid]})
    return ops, user, b.build()


def _retail_operations(rng: Rng, n: int) -> tuple[list[dict[str, Any]], Any, World]:
    b = retail_store(rng, products=2)
    user = b.add_user()
    card = b.payment_ids(user, "credit_card")[0]
    kinds = [rng.choice(("cancel", "address", "return", "user_address")) for _ in range(n)]
    while kinds.count("user_address") > 1:  # one default address
        kinds[kinds.index("user_address")] = "cancel"
    ops = []
    for kind in kinds:
        if kind == "user_address":
            new = people.address(rng)
            text = (f"Change my default address to {new['address1']}, {new['address2'] or 'no second line'}, "
                    f"{new['city']}, {new['state']} {new['zip']}, {new['country']}.")
            write = {"name": "modify_user_address", "arguments": {"user_id": user["user_id"], **_fields(new)}}
            ops.append({"text": text, "write": write, "record": ["users", user["user_id"]]})
            continue
        order = b.add_order(user, status="delivered" if kind == "return" else "pending", items=any_item(rng, b),
                            payment_id=card)
        oid = order["order_id"]
        if kind == "cancel":
            reason = rng.choice(("no longer needed", "ordered by mistake"))
            text = f"Cancel order {oid} (reason: {reason})."
            write = {"name": "cancel_pending_order", "arguments": {"order_id": oid, "reason": reason}}
        elif kind == "address":
            new = people.address(rng)
            text = (f"Ship order {oid} to {new['address1']}, {new['address2'] or 'no second line'}, "
                    f"{new['city']}, {new['state']} {new['zip']}, {new['country']}.")
            write = {"name": "modify_pending_order_address", "arguments": {"order_id": oid, **_fields(new)}}
        else:
            item = order["items"][0]
            text = f"Return the {item['name']} (item {item['item_id']}) from order {oid}, refund to {card}."
            write = {"name": "return_delivered_order_items", "arguments": {
                "order_id": oid, "item_ids": [item["item_id"]], "payment_method_id": card}}
        ops.append({"text": text, "write": write, "record": ["orders", oid]})
    return ops, user, b.build()


def _fields(address: dict[str, str]) -> dict[str, str]:
    return {k: address[k] for k in ("address1", "address2", "city", "state", "country", "zip")}


def generate(rng: Rng, config: Config) -> tuple[Task, World]:
    """The generator: a seed's task and the world it plays in, drawn from `rng` alone."""
    domain = "airline" if rng.chance(config.airline_share) else "retail"
    counts = [c for c in (2, 3, 4, 5) if config.min_operations <= c <= config.max_operations]
    weights = [OPERATION_WEIGHTS[domain][c - 2] for c in counts]
    n = rng.weighted(counts, weights)
    make = _airline_operations if domain == "airline" else _retail_operations
    ops, user, world = make(rng, n)
    pre = Prefill(world, TOOLSETS[domain])
    pre.user(f"Hi, I'm user {user['user_id']}. I need several things done: "
             + " ".join(f"({i}) {op['text']}" for i, op in enumerate(ops, 1))
             + " I confirm all of them: please go ahead.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    return Task(domain, ops, pre.messages, max_steps=n + 5), world


# -- verifier --------------------------------------------------------------------------

def verify(task: Task, initial_world: World, final_world: World, messages: list[dict[str, Any]]) -> Verdict:
    """The verifier: the reward and its named checks, from the worlds before and after and the conversation."""
    expected = initial_world.fork()
    for op in task.operations:
        TOOLSETS[task.domain][op["write"]["name"]].fn(expected, **op["write"]["arguments"])
    checks = []
    for i, op in enumerate(task.operations):
        table, key = op["record"]
        ok = final_world.tables[table].get(key) == expected.tables[table].get(key)
        checks.append(Check(f"operation[{i}]:{op['write']['name']}", ok, 0.6 / len(task.operations) if ok else 0.0))
    done = sum(c.passed for c in checks)
    complete = done == len(task.operations)
    checks.append(Check("all_operations", complete, 0.4 if complete else 0.0))
    writes = write_calls(task, messages, arguments=False)
    rejected = sum(1 for _, _, ok in writes if not ok)
    stray = max(0, len(writes) - rejected - done)
    wrong = rejected + stray
    checks.append(Check("wrong_writes", wrong == 0, -0.1 * wrong if wrong else 0.0,  # not -0.0
                        f"{rejected} write(s) rejected by the tool, {stray} more went through than "
                        f"operations were done"))
    return Verdict(sum(c.credit for c in checks), tuple(checks))


# -- oracle ----------------------------------------------------------------------------

def oracle(task: Task, messages: list[dict[str, Any]]) -> Any:
    """The oracle: the next turn of a correct play of the task (reward 1.0)."""
    plan = [op["write"] for op in task.operations]
    return next_step(task, messages, [*plan, "All done: every change you asked for is in place."])


# -- registration ----------------------------------------------------------------------

class MultiStepTaskCompletionEnv(CapabilityEnv):  # noqa: D101 - its docstring is the module's (`__doc__ = __doc__`)
    __doc__ = __doc__
    capability = CAPABILITY
    Config = Config
    tools = TOOLS
    guidance = ("The customer asked for several separate changes. Keep a list of them, make "
                "each change on its own, check it succeeded, and only reply once every item on "
                "the list is done.")
    generate_task = staticmethod(generate)
    verify_task = staticmethod(verify)
    oracle = staticmethod(oracle)
