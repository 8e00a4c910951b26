"""Tool calling precision: one write call, exact in name and every argument.

Task. An identified customer has given every detail of one change and confirmed it, and
the records are already looked up; what is left is the call itself. Airline: book a trip
(flights, passengers, split payments, bags, insurance), replace a reservation's flights
(the unchanged segment included), correct one passenger in the full passenger list.
Retail: change a pending order's shipping address, exchange items of a delivered order,
change the default address.

Tools (the target's schemas). Airline: get_user_details, get_reservation_details,
book_reservation, update_reservation_flights, update_reservation_passengers. Retail:
get_user_details, get_order_details, modify_pending_order_address,
exchange_delivered_order_items, modify_user_address.

Reward. The task takes exactly one write call, compared with the gold call: 0 when the
agent made no write call or more than one, when the tool rejected it, or for another tool;
else each argument carries an equal share of 1 and earns it when exactly right, compared
with JSON's types (ids, nested lists of records, payment ids as the profile spells them).
The verdict lists each. So neither a rejected call nor a second try pays.

Episode end. The agent's first reply without a tool call, or the step limit (4).

Transfer rationale. On tau2-bench many failures come down to one wrong field in an
otherwise right call: a card's last four digits instead of its payment id, an itinerary
without the unchanged return flight, a passenger list with one passenger, a missing
address line. Here the decision is already made and every argument is scored on its own,
so a policy gains exactly by getting each field right. The tools are the target's with its
schemas, so the precise forms learned (payment ids, full nested lists) are the ones the
target's tools expect.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.capability_env import (
    CapabilityConfig,
    CapabilityEnv,
    Prefill,
    any_item,
    domain_toolsets,
    next_step,
    retail_store,
    write_calls,
)
from trace_gym.jsondata import json_equal
from trace_gym.rng import Rng
from trace_gym.verdict import Check, Verdict
from trace_gym.worlds import airline, people
from trace_gym.worlds.airline.data import BAG_FEE, FREE_BAGS, INSURANCE_FEE, TODAY, date_of
from trace_gym.worlds.retail.data import CATALOGUE, describe_options
from trace_gym.worlds.world import World

CAPABILITY = cap.PRECISION
TOOLS = {
    "airline": ["get_user_details", "get_reservation_details", "book_reservation",
                "update_reservation_flights", "update_reservation_passengers"],
    "retail": ["get_user_details", "get_order_details", "modify_pending_order_address",
               "exchange_delivered_order_items", "modify_user_address"],
}
TOOLSETS = domain_toolsets(TOOLS)
MAX_STEPS = 4
AIRLINE_SIZE = airline.AirlineWorldSize(airports=3, direct_routes=0, users=0)


# -- config ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Config(CapabilityConfig):
    """The env's knobs: those of every capability env (it adds none)."""


# -- task ------------------------------------------------------------------------------

@dataclass
class Task:
    """One episode's task: what the customer asks for and what the verifier checks it against."""
    domain: str
    kind: str
    request: str
    gold: dict[str, Any]
    """The one right write call: {'name', 'arguments'}."""
    prefill: list[dict[str, Any]] = field(repr=False)
    hidden: list[str] = field(default_factory=list)
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

def _card(method: dict[str, Any]) -> str:
    return f"my {method['brand'].capitalize()} card ending in {method['last_four']}"


def _book(rng: Rng) -> tuple[Task, World]:
    b = airline.AirlineBuilder(rng, AIRLINE_SIZE, network=False)
    origin, destination = b.spokes[0], b.spokes[1]
    out = b.add_flight(origin, destination, rng.integer(6 * 60, 12 * 60))
    back = b.add_flight(destination, origin, rng.integer(13 * 60, 20 * 60))
    user = b.add_user(certificate=rng.chance(0.5))
    day = rng.integer(TODAY + 1, TODAY + 2)
    round_trip = rng.chance(0.5)
    legs = [(out, date_of(day))] + ([(back, date_of(rng.integer(day + 1, TODAY + 3)))] if round_trip else [])
    cabin = rng.choice(("basic_economy", "economy", "business"))
    travellers = [{"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"], "dob": user["dob"]}]
    travellers += [dict(p) for p in user["saved_passengers"][: rng.integer(0, 1)]]
    fare = sum(b.ensure_available(f["flight_number"], d, seats=9)["prices"][cabin] for f, d in legs)
    bags = rng.integer(0, 3)
    nonfree = max(0, bags - FREE_BAGS[user["membership"]][cabin] * len(travellers))
    insurance = rng.choice(("yes", "no"))
    total = fare * len(travellers) + (INSURANCE_FEE * len(travellers) if insurance == "yes" else 0) + BAG_FEE * nonfree
    # Any of the cards: the first listed, always, would be told by its place.
    card = user["payment_methods"][rng.choice(b.payment_ids(user, "credit_card"))]
    certs = [m for m in user["payment_methods"].values() if m["source"] == "certificate" and m["amount"] < total]
    if certs:
        payments = [{"payment_id": certs[0]["id"], "amount": int(certs[0]["amount"])},
                    {"payment_id": card["id"], "amount": total - int(certs[0]["amount"])}]
        pay = (f"${int(certs[0]['amount'])} from my travel certificate and the remaining "
               f"${total - int(certs[0]['amount'])} on {_card(card)}")
    else:
        payments = [{"payment_id": card["id"], "amount": total}]
        pay = f"all ${total} on {_card(card)}"
    world = b.build()
    flights = [{"flight_number": f["flight_number"], "date": d} for f, d in legs]
    who = " and ".join(f"{p['first_name']} {p['last_name']} (born {p['dob']})" for p in travellers)
    request = (f"Please book a {'round trip' if round_trip else 'one-way trip'} from {origin} to {destination}: "
               + ", ".join(f"flight {f['flight_number']} on {f['date']}" for f in flights)
               + f", {cabin.replace('_', ' ')}, for {who}; {bags} checked bags of which {nonfree} paid; "
               f"insurance: {insurance}. Pay {pay}.")
    pre = Prefill(world, TOOLSETS["airline"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    gold = {"name": "book_reservation", "arguments": {
        "user_id": user["user_id"], "origin": origin, "destination": destination,
        "flight_type": "round_trip" if round_trip else "one_way", "cabin": cabin, "flights": flights,
        "passengers": travellers, "payment_methods": payments, "total_baggages": bags,
        "nonfree_baggages": nonfree, "insurance": insurance}}
    return Task("airline", "book_reservation", request, gold, pre.messages, [p["payment_id"] for p in payments]), world


def _flights(rng: Rng) -> tuple[Task, World]:
    b = airline.AirlineBuilder(rng, AIRLINE_SIZE, network=False)
    origin, destination = b.spokes[0], b.spokes[1]
    first = b.add_flight(origin, destination, rng.integer(6 * 60, 12 * 60))
    other = b.add_flight(origin, destination, rng.integer(6 * 60, 12 * 60))
    b.add_flight(destination, origin, rng.integer(13 * 60, 20 * 60))
    user = b.add_user()
    res = b.add_reservation(user, itinerary=[first], day=TODAY + 1, return_day=TODAY + 3,
                            flight_type="round_trip", cabin=rng.choice(("economy", "business")))
    new_date = date_of(TODAY + 2)
    for seg in res["flights"]:
        b.ensure_available(seg["flight_number"], seg["date"])
    entry = b.ensure_available(other["flight_number"], new_date)
    if entry["prices"][res["cabin"]] == res["flights"][0]["price"]:
        entry["prices"][res["cabin"]] += 11
    # Any of the cards: the first listed, always, would be told by its place.
    card = user["payment_methods"][rng.choice(b.payment_ids(user, "credit_card"))]
    world = b.build()
    back = res["flights"][1]
    request = (f"Please change reservation {res['reservation_id']}: replace the outbound flight with "
               f"{other['flight_number']} on {new_date}, keep the return flight {back['flight_number']} on "
               f"{back['date']}, same cabin, and use {_card(card)} for the difference.")
    pre = Prefill(world, TOOLSETS["airline"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    pre.lookup("get_reservation_details", reservation_id=res["reservation_id"])
    gold = {"name": "update_reservation_flights", "arguments": {
        "reservation_id": res["reservation_id"], "cabin": res["cabin"],
        "flights": [{"flight_number": other["flight_number"], "date": new_date},
                    {"flight_number": back["flight_number"], "date": back["date"]}],
        "payment_id": card["id"]}}
    return Task("airline", "update_reservation_flights", request, gold, pre.messages, [card["id"]]), world


def _passengers(rng: Rng) -> tuple[Task, World]:
    b = airline.AirlineBuilder(rng, AIRLINE_SIZE, network=False)
    flight = b.add_flight(b.spokes[0], b.spokes[1], rng.integer(6 * 60, 20 * 60))
    user = b.add_user()
    res = b.add_reservation(user, itinerary=[flight], day=TODAY + 1, flight_type="one_way", passengers=rng.integer(2, 3))
    index = rng.below(len(res["passengers"]))
    old = res["passengers"][index]
    new = {"first_name": old["first_name"], "last_name": rng.choice([n for n in people.LAST_NAMES if n != old["last_name"]]),
           "dob": people.birth_date(rng)}
    passengers = [dict(p) for p in res["passengers"]]
    passengers[index] = new
    world = b.build()
    request = (f"On reservation {res['reservation_id']}, passenger {old['first_name']} {old['last_name']} should be "
               f"{new['first_name']} {new['last_name']}, born {new['dob']}; the other passengers stay as they are.")
    pre = Prefill(world, TOOLSETS["airline"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_reservation_details", reservation_id=res["reservation_id"])
    gold = {"name": "update_reservation_passengers", "arguments": {
        "reservation_id": res["reservation_id"], "passengers": passengers}}
    return Task("airline", "update_reservation_passengers", request, gold, pre.messages), world


def _address_text(a: dict[str, str]) -> str:
    second = f", {a['address2']}" if a["address2"] else " (no second line)"
    return f"{a['address1']}{second}, {a['city']}, {a['state']} {a['zip']}, {a['country']}"


def _fields(a: dict[str, str]) -> dict[str, str]:
    return {k: a[k] for k in ("address1", "address2", "city", "state", "country", "zip")}


def _order_address(rng: Rng) -> tuple[Task, World]:
    b = retail_store(rng, products=1)
    user = b.add_user()
    order = b.add_order(user, status="pending", items=any_item(rng, b))
    new = people.address(rng)
    world = b.build()
    request = f"Please ship order {order['order_id']} to {_address_text(new)}."
    pre = Prefill(world, TOOLSETS["retail"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_order_details", order_id=order["order_id"])
    gold = {"name": "modify_pending_order_address", "arguments": {"order_id": order["order_id"], **_fields(new)}}
    return Task("retail", "modify_pending_order_address", request, gold, pre.messages), world


def _user_address(rng: Rng) -> tuple[Task, World]:
    b = retail_store(rng, products=0)  # the profile is all this change touches
    user = b.add_user()
    new = people.address(rng)
    world = b.build()
    request = f"Please change my default address to {_address_text(new)}."
    pre = Prefill(world, TOOLSETS["retail"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    gold = {"name": "modify_user_address", "arguments": {"user_id": user["user_id"], **_fields(new)}}
    return Task("retail", "modify_user_address", request, gold, pre.messages), world


def _exchange(rng: Rng) -> tuple[Task, World]:
    b = retail_store(rng, products=2)  # the variants asked for are added below
    user = b.add_user(gift_card_balance=float(rng.integer(300, 900)))
    products = list(b.world.products.values())
    items, olds, news = [], [], []
    for product in products:
        old = rng.choice(list(product["variants"].values()))
        option = rng.choice(list(old["options"]))
        value = rng.choice([v for v in CATALOGUE[product["name"]][1][option] if v != old["options"][option]])
        new = b.add_variant(product, dict(old["options"], **{option: value}), available=True)
        items.append((product, old))
        olds.append(old)
        news.append(new)
    order = b.add_order(user, status="delivered", items=items)
    gift = b.payment_ids(user, "gift_card")[0]
    # the gift card pays the price difference: a balance below it would refuse the gold write
    exchanged = {o["item_id"] for o in olds}
    difference = sum(n["price"] for n in news) - sum(i["price"] for i in order["items"] if i["item_id"] in exchanged)
    card = user["payment_methods"][gift]
    card["balance"] = max(card["balance"], float(math.ceil(difference)))
    world = b.build()
    request = ("Please exchange, in order " + order["order_id"] + ", "
               + "; and ".join(f"the {p['name']} (item {o['item_id']}) for item {n['item_id']} "
                               f"({describe_options(n['options'])})" for (p, _), o, n in zip(items, olds, news))
               + "; any price difference goes to my gift card.")
    pre = Prefill(world, TOOLSETS["retail"])
    pre.user(f"Hi, I'm user {user['user_id']}. {request} I confirm.")
    pre.lookup("get_user_details", user_id=user["user_id"])
    pre.lookup("get_order_details", order_id=order["order_id"])
    gold = {"name": "exchange_delivered_order_items", "arguments": {
        "order_id": order["order_id"], "item_ids": [o["item_id"] for o in olds],
        "new_item_ids": [n["item_id"] for n in news], "payment_method_id": gift}}
    return Task("retail", "exchange_delivered_order_items", request, gold, pre.messages, [gift]), world


def generate(rng: Rng, config: Config) -> tuple[Task, World]:
    """The generator: a seed's task and the world it plays in, drawn from `rng` alone."""
    if rng.chance(config.airline_share):
        return rng.choice((_book, _flights, _passengers))(rng)
    return rng.choice((_order_address, _user_address, _exchange))(rng)


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
        return Verdict(0.0, (Check("name", False, 0.0, failed),))
    arguments = writes[0][1]
    share = 1.0 / len(task.gold["arguments"])
    checks = [Check("name", True, 0.0)]
    for arg, value in task.gold["arguments"].items():
        ok = arg in arguments and json_equal(arguments[arg], value)
        checks.append(Check(arg, ok, share if ok else 0.0))
    return Verdict(sum(c.credit for c in checks), tuple(checks))


# -- oracle ----------------------------------------------------------------------------

def oracle(task: Task, messages: list[dict[str, Any]]) -> Any:
    """The oracle: the next turn of a correct play of the task (reward 1.0)."""
    return next_step(task, messages, [task.gold, "Done: your request has been completed."])


# -- registration ----------------------------------------------------------------------

class ToolCallingPrecisionEnv(CapabilityEnv):  # noqa: D101 - its docstring is the module's (`__doc__ = __doc__`)
    __doc__ = __doc__
    capability = CAPABILITY
    Config = Config
    tools = TOOLS
    guidance = ("Every detail is already known. Before acting, map each detail to the exact "
                "value the records use (ids as the profile spells them), include every field and "
                "every element of each list, unchanged ones too, and act once.")
    generate_task = staticmethod(generate)
    verify_task = staticmethod(verify)
    oracle = staticmethod(oracle)
