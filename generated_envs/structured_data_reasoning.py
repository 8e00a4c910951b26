"""Structured data reasoning: derive the one right action from the records in view.

Task. The customer's request and the records it needs are in the conversation (profile,
reservation or orders, flight search results, product variants); the right action follows
from them under a constraint. Airline: move a reservation to the cheapest, earliest or
latest direct flight of a day, paid with the card the customer describes; add checked bags,
working out how many are paid from the membership allowance. Retail: exchange an item for
the variant that matches the options the customer describes; cancel the order the customer
describes without its id.

Tools (the target's schemas). Airline: get_user_details, get_reservation_details,
search_direct_flight, update_reservation_flights, update_reservation_baggages. Retail:
get_user_details, get_order_details, get_product_details, exchange_delivered_order_items,
cancel_pending_order.

Reward. The task takes exactly one write call, compared with the gold call: 0 when the
agent made no write call or more than one, when the tool rejected it, or for another tool;
else the sum of the credits of the argument groups it got exactly right, compared with
JSON's types (every argument is in one group; for example flight 0.5, payment method 0.3,
reservation and cabin 0.2). So neither a rejected call nor a second try pays.

Episode end. The agent's first reply without a tool call, or the step limit (5).

Transfer rationale. On tau2-bench the base agent reads the right records but then picks
the wrong one of several: not the cheapest flight, a payment id that does not match the
card the customer named, a variant that differs in one option, a bag count that ignores
the allowance. Here the records are already in view and every reward point depends on one
value derived from them, so a policy can only improve by reasoning over the structure. The
records are the target's own shapes, so the comparisons learned (fares across flights,
options across variants, cards across payment methods) apply to the target's tool outputs
as they are.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.capability_env import (
    CapabilityConfig,
    CapabilityEnv,
    Prefill,
    domain_toolsets,
    in_range,
    next_step,
    retail_store,
    write_calls,
)
from trace_gym.jsondata import json_equal
from trace_gym.rng import Rng
from trace_gym.verdict import Check, Verdict
from trace_gym.worlds import airline
from trace_gym.worlds.airline.data import FREE_BAGS, TODAY, date_of
from trace_gym.worlds.retail.data import CATALOGUE, describe_options
from trace_gym.worlds.world import World

CAPABILITY = cap.STRUCTURED
TOOLS = {
    "airline": ["get_user_details", "get_reservation_details", "search_direct_flight",
                "update_reservation_flights", "update_reservation_baggages"],
    "retail": ["get_user_details", "get_order_details", "get_product_details",
               "exchange_delivered_order_items", "cancel_pending_order"],
}
TOOLSETS = domain_toolsets(TOOLS)
MAX_STEPS = 5
AIRLINE_SIZE = airline.AirlineWorldSize(airports=3, direct_routes=0, users=0)


# -- config ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Config(CapabilityConfig):
    """The env's knobs: those of every capability env, and its own below."""
    options: int = 3
    """Candidates to choose from: flights on the day, orders of the customer (2-5)."""

    _check_options = in_range(2, 5, integer=True)


# -- task ------------------------------------------------------------------------------

@dataclass
class Task:
    """One episode's task: what the customer asks for and what the verifier checks it against."""
    domain: str
    kind: str
    request: str
    gold: dict[str, Any]
    """The one right write call: {'name', 'arguments'}."""
    credits: dict[str, float]
    """Argument group -> credit; a group is a '+'-joined list of argument names."""
    prefill: list[dict[str, Any]] = field(repr=False)
    hidden: list[str] = field(default_factory=list)
    """The derived values: never in the system or user messages."""
    max_steps: int = MAX_STEPS

    capabilities_needed = [CAPABILITY]

    @property
    def instructions(self) -> str:
        """The customer's brief: what they ask for, in their words."""
        return self.request

    def to_json(self) -> dict[str, Any]:
        """The task as JSON, for the trajectory record."""
        return asdict(self)


# -- generator -------------------------------------------------------------------------

def _card_phrase(method: dict[str, Any]) -> str:
    if method["source"] == "credit_card":
        return f"my {method['brand'].capitalize()} card ending in {method['last_four']}"
    return "my gift card"


def _cheapest_flight(rng: Rng, config: Config) -> tuple[Task, World]:
    b = airline.AirlineBuilder(rng, AIRLINE_SIZE, network=False)
    origin, destination = b.spokes[0], b.spokes[1]
    flights = [b.add_flight(origin, destination, rng.integer(6 * 60, 20 * 60)) for _ in range(config.options)]
    user = b.add_user(gift_card=True)
    cabin = rng.choice(("economy", "business"))
    day = rng.integer(TODAY + 1, TODAY + 3)
    res = b.add_reservation(user, itinerary=[flights[0]], day=day, flight_type="one_way", cabin=cabin,
                            passengers=1)
    new_date = date_of(rng.choice([d for d in range(TODAY + 1, TODAY + 4) if d != day]))
    entries = [b.ensure_available(f["flight_number"], new_date) for f in flights]
    goal = rng.choice(("cheapest", "earliest", "latest"))
    fares = rng.sample(range(-60, 90, 7), len(flights))  # distinct fares, none equal to the old one
    for entry, delta in zip(entries, fares):
        entry["prices"][cabin] = res["flights"][0]["price"] + (delta or 3)
    times = sorted({f["scheduled_departure_time_est"] for f in flights})
    if goal != "cheapest" and len(times) < len(flights):
        goal = "cheapest"  # two flights leave at the same minute: only the fare singles one out
    if goal == "cheapest":
        chosen = min(range(len(flights)), key=lambda i: entries[i]["prices"][cabin])
    else:
        order = sorted(range(len(flights)), key=lambda i: flights[i]["scheduled_departure_time_est"])
        chosen = order[0] if goal == "earliest" else order[-1]
    fn = flights[chosen]["flight_number"]
    diff = entries[chosen]["prices"][cabin] - res["flights"][0]["price"]
    methods = [m for m in user["payment_methods"].values()
               if m["source"] == "credit_card" or (m["source"] == "gift_card" and m["amount"] >= diff)]
    method = rng.choice(methods)
    world = b.build()
    request = (f"Please move reservation {res['reservation_id']} to the {goal} direct flight on {new_date}, "
               f"same cabin, and use {_card_phrase(method)} for any fare difference.")
    pre = Prefill(world, TOOLSETS["airline"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    pre.lookup("get_reservation_details", reservation_id=res["reservation_id"])
    pre.lookup("search_direct_flight", origin=origin, destination=destination, date=new_date)
    gold = {"name": "update_reservation_flights", "arguments": {
        "reservation_id": res["reservation_id"], "cabin": cabin,
        "flights": [{"flight_number": fn, "date": new_date}], "payment_id": method["id"]}}
    credits = {"flights": 0.5, "payment_id": 0.3, "reservation_id+cabin": 0.2}
    return Task("airline", "cheapest_flight", request, gold, credits, pre.messages, [fn, method["id"]]), world


def _bag_fee(rng: Rng, config: Config) -> tuple[Task, World]:
    b = airline.AirlineBuilder(rng, AIRLINE_SIZE, network=False)
    flight = b.add_flight(b.spokes[0], b.spokes[1], rng.integer(6 * 60, 20 * 60))
    user = b.add_user()
    cabin = rng.choice(("basic_economy", "economy", "business"))
    n_pax = rng.integer(1, 3)
    allowance = FREE_BAGS[user["membership"]][cabin] * n_pax
    res = b.add_reservation(user, itinerary=[flight], day=rng.integer(TODAY + 1, TODAY + 3), flight_type="one_way",
                            cabin=cabin, passengers=n_pax, total_baggages=rng.integer(0, allowance))
    b.ensure_available(flight["flight_number"], res["flights"][0]["date"])
    add = rng.integer(1, 4)
    total = res["total_baggages"] + add
    nonfree = max(0, total - allowance)
    # Any of the cards: the first listed, always, would be told by its place.
    method = user["payment_methods"][rng.choice(b.payment_ids(user, "credit_card"))]
    for _ in range(config.options - 1):  # other bookings of the same customer
        b.add_reservation(user, itinerary=[flight], day=rng.integer(TODAY + 1, TODAY + 3), flight_type="one_way")
    rng.shuffle(user["reservations"])  # made first, the booking asked about would be listed first
    world = b.build()
    request = (f"Please add {add} checked bag{'s' if add > 1 else ''} to reservation {res['reservation_id']}, "
               f"charged to {_card_phrase(method)}.")
    pre = Prefill(world, TOOLSETS["airline"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    pre.lookup("get_reservation_details", reservation_id=res["reservation_id"])
    gold = {"name": "update_reservation_baggages", "arguments": {
        "reservation_id": res["reservation_id"], "total_baggages": total, "nonfree_baggages": nonfree,
        "payment_id": method["id"]}}
    credits = {"reservation_id": 0.1, "total_baggages": 0.2, "nonfree_baggages": 0.4, "payment_id": 0.3}
    return Task("airline", "bag_fee", request, gold, credits, pre.messages, [method["id"]]), world


def _variant_exchange(rng: Rng, config: Config) -> tuple[Task, World]:
    b = retail_store(rng, products=1, variants=5)  # the one product looked up
    user = b.add_user(gift_card_balance=float(rng.integer(200, 600)))
    product = next(iter(b.world.products.values()))
    old = rng.choice(list(product["variants"].values()))
    option = rng.choice(list(old["options"]))
    value = rng.choice([v for v in CATALOGUE[product["name"]][1][option] if v != old["options"][option]])
    wanted = dict(old["options"], **{option: value})
    new = b.add_variant(product, wanted, available=True)
    for other in (o for o in old["options"] if o != option):  # near misses: right value, one other option off
        alt = [v for v in CATALOGUE[product["name"]][1][other] if v != wanted[other]]
        b.add_variant(product, dict(wanted, **{other: rng.choice(alt)}), available=None)
    card = b.payment_ids(user, "credit_card")[0]
    order = b.add_order(user, status="delivered", items=[(product, old)], payment_id=card)
    gift = b.payment_ids(user, "gift_card")[0]
    method_id = rng.choice([card, gift])
    balance = user["payment_methods"][gift]
    if method_id == gift and balance["balance"] < new["price"] - old["price"]:  # the gold write must go through
        balance["balance"] = round(new["price"] - old["price"] + rng.integer(10, 100), 2)
    where = "the original payment method" if method_id == card else "my gift card"
    world = b.build()
    request = (f"I'd like to exchange the {product['name']} from order {order['order_id']} for the same "
               f"one but with {option} {value}, everything else the same; use {where} for any difference.")
    pre = Prefill(world, TOOLSETS["retail"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    pre.lookup("get_order_details", order_id=order["order_id"])
    pre.lookup("get_product_details", product_id=product["product_id"])
    gold = {"name": "exchange_delivered_order_items", "arguments": {
        "order_id": order["order_id"], "item_ids": [old["item_id"]], "new_item_ids": [new["item_id"]],
        "payment_method_id": method_id}}
    credits = {"new_item_ids": 0.5, "item_ids+order_id": 0.2, "payment_method_id": 0.3}
    return Task("retail", "variant_exchange", request, gold, credits, pre.messages, [new["item_id"]]), world


def _order_by_description(rng: Rng, config: Config) -> tuple[Task, World]:
    b = retail_store(rng, products=3)  # the orders show one item each
    user = b.add_user()
    card = b.payment_ids(user, "credit_card")[0]
    products = list(b.world.products.values())
    target = rng.choice(products)
    order = b.add_order(user, status="pending", items=[(target, rng.choice(list(target["variants"].values())))],
                        payment_id=card)
    for _ in range(config.options - 1):  # same product in another status, or another product pending
        other = rng.choice([p for p in products if p is not target])
        if rng.chance(0.5):
            b.add_order(user, status=rng.choice(("processed", "delivered")),
                        items=[(target, rng.choice(list(target["variants"].values())))], payment_id=card)
        else:
            b.add_order(user, status="pending", items=[(other, rng.choice(list(other["variants"].values())))],
                        payment_id=card)
    rng.shuffle(user["orders"])
    reason = rng.choice(("no longer needed", "ordered by mistake"))
    world = b.build()
    request = (f"Please cancel my order that hasn't shipped yet, the one with the {target['name']}; "
               f"reason: {reason}.")
    pre = Prefill(world, TOOLSETS["retail"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    for oid in user["orders"]:
        pre.lookup("get_order_details", order_id=oid)
    gold = {"name": "cancel_pending_order", "arguments": {"order_id": order["order_id"], "reason": reason}}
    credits = {"order_id": 0.7, "reason": 0.3}
    return Task("retail", "order_by_description", request, gold, credits, pre.messages, [order["order_id"]]), world


def generate(rng: Rng, config: Config) -> tuple[Task, World]:
    """The generator: a seed's task and the world it plays in, drawn from `rng` alone."""
    if rng.chance(config.airline_share):
        return rng.choice((_cheapest_flight, _bag_fee))(rng, config)
    return rng.choice((_variant_exchange, _order_by_description))(rng, config)


# -- verifier --------------------------------------------------------------------------

def verify(task: Task, initial_world: World, final_world: World, messages: list[dict[str, Any]]) -> Verdict:
    """The verifier: the reward and its named checks, from the worlds before and after and the conversation."""
    writes = write_calls(task, messages)
    failed = None
    if len(writes) != 1:
        failed = f"{len(writes)} write calls; the task takes exactly one"
    elif not writes[0][2]:
        failed = f"the tool rejected the {writes[0][0]} call"
    elif writes[0][0] != task.gold["name"] or not isinstance(writes[0][1], dict):
        failed = f"called {writes[0][0]}, expected {task.gold['name']}"
    if failed is not None:
        return Verdict(0.0, (Check("write_call", False, 0.0, failed),))
    arguments = writes[0][1]
    checks = [Check("write_call", True, 0.0)]
    for group, credit in task.credits.items():
        ok = all(arg in arguments and json_equal(arguments[arg], task.gold["arguments"][arg])
                 for arg in group.split("+"))
        checks.append(Check(group, ok, credit if ok else 0.0))
    return Verdict(sum(c.credit for c in checks), tuple(checks))


# -- oracle ----------------------------------------------------------------------------

def oracle(task: Task, messages: list[dict[str, Any]]) -> Any:
    """The oracle: the next turn of a correct play of the task (reward 1.0)."""
    return next_step(task, messages, [task.gold, "Done: your request has been completed."])


# -- registration ----------------------------------------------------------------------

class StructuredDataReasoningEnv(CapabilityEnv):  # noqa: D101 - its docstring is the module's (`__doc__ = __doc__`)
    __doc__ = __doc__
    capability = CAPABILITY
    Config = Config
    tools = TOOLS
    guidance = ("Work the answer out from the records already in the conversation: compare every "
                "candidate against the customer's constraint, match descriptions to the exact "
                "record (card digits, options, status), and apply the policy's allowances before "
                "acting once.")
    generate_task = staticmethod(generate)
    verify_task = staticmethod(verify)
    oracle = staticmethod(oracle)
