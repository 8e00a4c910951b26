"""Precondition verification: act on a confirmed request only when the policy allows it.

Task. A customer has identified themselves, asked for one change and confirmed it; the
records it concerns are already looked up in the conversation. Airline: cancel a
reservation, move it to another flight today, set its checked bags to a number. Retail:
cancel an order, return items, pay an order with a gift card. About 60% of the requests
break a policy precondition (booked over 24 hours ago with no covering reason, a flight
already flown, basic economy or a new flight no longer on sale, fewer bags than the
reservation has, an order that is not pending or not delivered, a gift card that cannot
cover the total); the rest are allowed. Whether a request is allowed shows only in the
records: the request's wording, the reason given and the numbers asked for are drawn the
same way for both (`task.to_json()["decision"]` says which it is).

The fact that breaks the rule is drawn so that neither the request's kind nor the
customer's words tell it better than chance over its own range: the flown segment left on
one of the 7 days before today, uniformly (FLOWN_DAYS); a flight change is forbidden for
basic economy or for one of the five statuses of a flight that takes no booking (on time,
delayed, flying, landed, cancelled), each a sixth of the time (BASIC_ECONOMY_SHARE), and
every change asks for a flight today, where all five occur (so the date asked for says
nothing); a forbidden bag request asks for 1 to 10 fewer bags than the reservation has,
uniformly (BAGS_OVER); an order is in one of the five statuses the rule excludes,
uniformly; a gift card too small holds a uniform whole number of dollars below the total.
A basic economy refusal states the cabin by naming its rule, and could not otherwise be
told from a guess.

Tools (the target's schemas). Airline: get_user_details, get_reservation_details,
get_flight_status, cancel_reservation, update_reservation_flights,
update_reservation_baggages. Retail:
get_user_details, get_order_details, cancel_pending_order, return_delivered_order_items,
modify_pending_order_payment.

Reward. Allowed request: 1 when the final database equals the one the requested change
produces, else 0, minus 0.1 for each write call the tool rejected (clipped at 0). Forbidden
request: 0 after any call to a mutating tool, even one the tool rejected; otherwise 0.5 for
not acting plus 0.5 when the reply states the record fact that breaks the rule (the date
it was booked, the date of the flight already flown, the status of the new flight, the
cabin, the bags already on the reservation, the order's status, the gift card's balance)
with no other value of its kind (`trace_gym.statements`; the rule's own words and the
customer's numbers aside), names the violated rule and no rule that does not apply (a
refusal that lists every rule names none). Refusing by the request's kind alone, or with
the fact guessed from the customer's words, earns no more than refusing with no reason
and a guess right by chance (`trace_gym.testing.guesses`): the fact is only in the records.
Where the rule's own words name the fact ("only pending orders can be cancelled" of an
order already cancelled), a refusal that says only the rule states it too: it is right as
often as a guess of that status, a fifth of the time.

Episode end. The agent's first reply without a tool call, or the step limit (6).

Transfer rationale. On tau2-bench the base agent often carries out a request as soon as the
customer confirms it, without checking the record against the rule that forbids it: it
cancels non-refundable economy bookings and modifies orders that have already shipped.
Here every episode hands the agent a confirmed request and the records, so the only thing
that earns reward is the check itself, and the refusal must say which rule failed. The
tools, record shapes and rules are the target's, so the habit of reading the status, the
cabin, the booking time or the balance before a write carries over unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.capability_env import (
    CapabilityConfig,
    CapabilityEnv,
    Prefill,
    any_item,
    domain_toolsets,
    final_reply,
    in_range,
    next_step,
    retail_store,
    write_calls,
)
from trace_gym.rng import Rng
from trace_gym.statements import names_rule, states
from trace_gym.verdict import Check, Verdict
from trace_gym.worlds import airline, retail
from trace_gym.worlds.airline.data import TODAY, date_of
from trace_gym.worlds.retail.data import ORDER_STATUSES
from trace_gym.worlds.world import World

CAPABILITY = cap.PRECONDITION
TOOLS = {
    "airline": ["get_user_details", "get_reservation_details", "get_flight_status", "cancel_reservation",
                "update_reservation_flights", "update_reservation_baggages"],
    "retail": ["get_user_details", "get_order_details", "cancel_pending_order",
               "return_delivered_order_items", "modify_pending_order_payment"],
}
TOOLSETS = domain_toolsets(TOOLS)
MAX_STEPS = 6
FLOWN_DAYS = 7
"""Days before today on which a flown segment may have left (its date is the fact)."""
AIRLINE_SIZE = airline.AirlineWorldSize(airports=3, direct_routes=0, users=0, first_day=TODAY - FLOWN_DAYS,
                                        days=FLOWN_DAYS + 4)


# -- config ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Config(CapabilityConfig):
    """The env's knobs: those of every capability env, and its own below."""
    forbidden_rate: float = 0.6
    """Share of requests that break a precondition (in [0, 1])."""
    distractors: int = 1
    """Other records of the same customer on the same route or product (0-3)."""

    _check_forbidden_rate = in_range(0.0, 1.0)
    _check_distractors = in_range(0, 3, integer=True)


# -- task ------------------------------------------------------------------------------

@dataclass
class Task:
    """One episode's task: what the customer asks for and what the verifier checks it against."""
    domain: str
    kind: str
    forbidden: bool
    request: str
    """What the customer asked for, in their words."""
    writes: list[dict[str, Any]]
    """The gold write when the request is allowed (empty when forbidden)."""
    rule: list[str]
    """When forbidden: terms naming the violated rule; the refusal must contain one."""
    conflicts: list[str]
    """When forbidden: terms of the rules that do not apply; the refusal must contain none."""
    fact: dict[str, Any]
    """When forbidden (else empty): the record fact that breaks the rule, which the refusal must state
    (`{"kind", "value", "also"}` for `trace_gym.statements.states`: `also` lists the other
    values of its kind the refusal may say, the rule's own words or the customer's)."""
    refusal: str
    """When forbidden: the oracle's refusal (it states the fact and names the rule)."""
    prefill: list[dict[str, Any]] = field(repr=False)
    hidden: list[str] = field(default_factory=list)
    """Must not appear in the system or user messages (the verdict is the agent's to find)."""
    max_steps: int = MAX_STEPS

    capabilities_needed = [CAPABILITY]

    @property
    def instructions(self) -> str:
        """The customer's brief: what they ask for, in their words."""
        return self.request

    @property
    def decision(self) -> str:
        """What the agent must find out from the records."""
        return "forbidden" if self.forbidden else "allowed"

    def to_json(self) -> dict[str, Any]:
        """The task as JSON, for the trajectory record."""
        return {**asdict(self), "decision": self.decision}


# -- generator -------------------------------------------------------------------------

CANCEL_REASONS = {
    "change_of_plans": "my plans changed", "health": "I'm ill and can't travel",
    "weather": "a storm is forecast on my travel day", "airline": "the airline cancelled my flight",
}
COVERED = ("health", "weather")
"""Reasons travel insurance covers."""
NOT_ON_SALE = ("on time", "delayed", "flying", "landed", "cancelled")
"""Statuses of a flight date that takes no booking; all of them occur on today's date."""
DEPARTURES = {"available": (16 * 60, 21 * 60), "on time": (16 * 60, 21 * 60), "delayed": (16 * 60, 21 * 60),
              "flying": (14 * 60, 14 * 60 + 59), "landed": (6 * 60, 9 * 60 + 59), "cancelled": (7 * 60, 21 * 60)}
"""Status of today's flight -> the departure times (minutes) that give it at 15:00: a flight
lasts one to five hours, so one leaving before 10:00 has landed and one leaving 14:xx flies."""
BASIC_ECONOMY_SHARE = 1 / (1 + len(NOT_ON_SALE))
"""Share of the forbidden flight changes that are basic economy (the rest: a status that takes
no booking, uniformly)."""
BAGS_OVER = 10
"""A forbidden bag request asks for 1 to BAGS_OVER bags fewer than the reservation has."""
CANCEL_FORBIDS = ("processed", "delivered", "cancelled", "exchange requested", "return requested")
"""Order statuses that cannot be cancelled (every status the tools give but pending)."""
RETURN_FORBIDS = ("pending", "processed", "cancelled", "exchange requested", "return requested")
"""Order statuses that cannot be returned (every status the tools give but delivered;
"pending (item modified)" is left out: `statements` reads it as "pending", the rule's word)."""

# Rule -> the terms that name it (and no other rule). A refusal must use one of them and none
# of another rule of its domain, except a word that describes the record itself (its cabin,
# its status). Words every record has ("business", "insurance") name no rule.
RULES = {
    "airline": {"24 hours": ["24 hour", "24-hour"], "flown": ["flown", "departed"],
                "basic economy": ["basic economy"], "remove": ["remove"],
                "not on sale": ["no longer be booked", "cannot be booked", "not on sale"]},
    "retail": {"pending": ["pending"], "delivered": ["delivered"], "balance": ["balance"]},
}


def _rule(domain: str, name: str, incidental: str) -> tuple[list[str], list[str]]:
    """(terms naming rule `name`, terms of the domain's other rules); `incidental` is the
    word the record itself is described by, which may be said whatever the rule."""
    others = [t for other, terms in RULES[domain].items() if other != name for t in terms if t != incidental]
    return list(RULES[domain][name]), others


def _airline(rng: Rng, config: Config, forbidden: bool) -> tuple[Task, World]:
    b = airline.AirlineBuilder(rng, AIRLINE_SIZE, network=False)
    origin, destination = b.spokes[0], b.spokes[1]
    flight = b.add_flight(origin, destination, rng.integer(7 * 60, 18 * 60))
    user = b.add_user()
    kind = rng.choice(("cancel_reservation", "change_flight", "baggage"))
    day = rng.integer(TODAY + 1, TODAY + 3)
    rule = ""
    fact: dict[str, Any] = {}
    writes: list[dict[str, Any]] = []
    if kind == "cancel_reservation":
        reason = rng.choice(tuple(CANCEL_REASONS))  # drawn before, and apart from, the verdict
        if forbidden:
            variant = rng.choice(("late", "flown"))
        else:
            variant = rng.choice(("business", "recent", "airline", *(("insured",) if reason in COVERED else ())))
        cabin = "business" if variant == "business" else rng.choice(("economy", "basic_economy"))
        insurance = ("yes" if variant == "insured" else
                     "no" if variant == "late" and reason in COVERED else rng.choice(("yes", "no")))
        hours_ago = rng.integer(2, 20) if variant == "recent" else rng.integer(30, 300)
        out_day = day
        if variant == "flown":  # out on one of the last FLOWN_DAYS days, booked before it left
            b.add_flight(destination, origin, rng.integer(7 * 60, 18 * 60))
            out_day = rng.integer(TODAY - FLOWN_DAYS, TODAY - 1)
            hours_ago += 24 * (TODAY - out_day)
        res = b.add_reservation(user, itinerary=[flight], day=out_day,
                                flight_type="round_trip" if variant == "flown" else "one_way",
                                return_day=day if variant == "flown" else None, cabin=cabin,
                                insurance=insurance, created_hours_ago=hours_ago)
        for seg in res["flights"]:
            if seg["date"] > date_of(TODAY):
                b.ensure_available(seg["flight_number"], seg["date"])
        if variant == "airline":
            b.set_status(res["flights"][0]["flight_number"], res["flights"][0]["date"], "cancelled")
        request = f"Please cancel reservation {res['reservation_id']}: {CANCEL_REASONS[reason]}."
        if variant == "flown":
            rule, flown = "flown", res["flights"][0]
            fact = {"kind": "date", "value": flown["date"], "also": [], "flight": flown["flight_number"],
                    "status": b.world.flights[flown["flight_number"]]["dates"][flown["date"]]["status"]}
        elif forbidden:
            rule, fact = "24 hours", {"kind": "date", "value": res["created_at"][:10], "also": []}
        else:
            writes = [{"name": "cancel_reservation", "arguments": {"reservation_id": res["reservation_id"]}}]
    elif kind == "change_flight":  # basic economy cannot change flights; a flight not on sale takes no one
        # Basic economy and each status that takes no booking are a sixth of the forbidden
        # changes each: no one refusal is right on more of them than another.
        variant = "allowed"
        if forbidden:
            variant = "basic_economy" if rng.chance(BASIC_ECONOMY_SHARE) else "not_on_sale"
        cabin = "basic_economy" if variant == "basic_economy" else rng.choice(("economy", "business"))
        res = b.add_reservation(user, itinerary=[flight], day=day, flight_type="one_way", cabin=cabin)
        b.ensure_available(flight["flight_number"], res["flights"][0]["date"])
        # Always a flight today, where every status occurs: the date asked for tells none.
        status = rng.choice(NOT_ON_SALE) if variant == "not_on_sale" else "available"
        other = b.add_flight(origin, destination, rng.integer(*DEPARTURES[status]))
        new_date = date_of(TODAY)
        if status == "available":
            entry = b.ensure_available(other["flight_number"], new_date)
            if entry["prices"][cabin] == res["flights"][0]["price"]:
                entry["prices"][cabin] += 9  # a fare difference, so the payment method matters
        elif status == "cancelled":
            b.set_status(other["flight_number"], new_date, status)
        else:  # its departure already gave it the times of the status; "on time" or "delayed" is drawn here
            b.world.flights[other["flight_number"]]["dates"][new_date]["status"] = status
        card = b.payment_ids(user, "credit_card")[0]
        method = user["payment_methods"][card]
        request = (f"Please move reservation {res['reservation_id']} to flight {other['flight_number']} on "
                   f"{new_date}, same cabin; use my {method['brand']} card ending in {method['last_four']} "
                   f"for any difference.")
        looked_up = (other["flight_number"], new_date)
        if variant == "basic_economy":
            rule, fact = "basic economy", {"kind": "cabin", "value": cabin, "also": []}
        elif variant == "not_on_sale":
            rule, fact = "not on sale", {"kind": "flight_status", "value": status, "also": ["available"],
                                         "flight": other["flight_number"], "date": new_date}
        else:
            writes = [{"name": "update_reservation_flights", "arguments": {
                "reservation_id": res["reservation_id"], "cabin": cabin,
                "flights": [{"flight_number": other["flight_number"], "date": new_date}], "payment_id": card}}]
    else:  # baggage: the customer names a total; fewer bags than booked would remove some
        cabin = rng.choice(("basic_economy", "economy", "business"))
        allowance = airline.data.FREE_BAGS[user["membership"]][cabin]
        wanted = allowance + rng.integer(1, 3)
        booked = wanted + rng.integer(1, BAGS_OVER) if forbidden else rng.integer(max(0, allowance - 1), wanted - 1)
        res = b.add_reservation(user, itinerary=[flight], day=day, flight_type="one_way", cabin=cabin,
                                passengers=1, total_baggages=booked)
        b.ensure_available(flight["flight_number"], res["flights"][0]["date"])
        card = b.payment_ids(user, "credit_card")[0]
        method = user["payment_methods"][card]
        request = (f"Please set the checked bags on reservation {res['reservation_id']} to {wanted} in total, "
                   f"{wanted - allowance} of them paid; charge my {method['brand']} card ending in "
                   f"{method['last_four']} for any fee.")
        if forbidden:
            rule, fact = "remove", {"kind": "bags", "value": str(booked), "also": [str(wanted)]}
        else:
            writes = [{"name": "update_reservation_baggages", "arguments": {
                "reservation_id": res["reservation_id"], "total_baggages": wanted,
                "nonfree_baggages": wanted - allowance, "payment_id": card}}]
    for _ in range(config.distractors):
        b.add_reservation(user, itinerary=[flight], day=rng.integer(TODAY + 1, TODAY + 3), flight_type="one_way")
    world = b.build()
    pre = Prefill(world, TOOLSETS["airline"])
    pre.user(f"Hi, I'm {user['name']['first_name']} {user['name']['last_name']}, user id {user['user_id']}. "
             f"{request} Yes, I confirm: please go ahead.")
    if kind != "cancel_reservation":  # the payment method is named from the profile
        pre.lookup("get_user_details", user_id=user["user_id"])
    pre.lookup("get_reservation_details", reservation_id=res["reservation_id"])
    for seg in res["flights"]:
        pre.lookup("get_flight_status", flight_number=seg["flight_number"], date=seg["date"])
    if kind == "change_flight":  # the new flight's status on the new date
        pre.lookup("get_flight_status", flight_number=looked_up[0], date=looked_up[1])
    return _task("airline", kind, forbidden, request, writes, rule, res["cabin"].replace("_", " "), fact,
                 pre.messages), world


def _retail(rng: Rng, config: Config, forbidden: bool) -> tuple[Task, World]:
    b = retail_store(rng, products=2)
    user = b.add_user(gift_card_balance=float(rng.integer(10, 300)), paypal=True)
    card = b.payment_ids(user, "credit_card")[0]
    kind = rng.choice(("cancel_order", "return_items", "modify_order_payment"))
    rule = ""
    fact: dict[str, Any] = {}
    writes: list[dict[str, Any]] = []
    if kind == "cancel_order":
        status = rng.choice(CANCEL_FORBIDS) if forbidden else "pending"
        order = _add_order(rng, b, user, status, card)
        reason = rng.choice(("no longer needed", "ordered by mistake"))
        request = f"Please cancel order {order['order_id']}; reason: {reason}."
        if forbidden:  # "only pending orders can be cancelled" says two statuses of its own
            rule, fact = "pending", {"kind": "order_status", "value": status, "also": ["pending", "cancelled"]}
        else:
            writes = [{"name": "cancel_pending_order", "arguments": {"order_id": order["order_id"], "reason": reason}}]
    elif kind == "return_items":
        status = rng.choice(RETURN_FORBIDS) if forbidden else "delivered"
        order = _add_order(rng, b, user, status, card)
        items = [order["items"][0]["item_id"]]
        request = (f"Please return the {order['items'][0]['name']} (item {items[0]}) from order "
                   f"{order['order_id']}, refund to the original payment method.")
        if forbidden:
            rule, fact = "delivered", {"kind": "order_status", "value": status, "also": ["delivered"]}
        else:
            writes = [{"name": "return_delivered_order_items", "arguments": {
                "order_id": order["order_id"], "item_ids": items, "payment_method_id": card}}]
    else:  # pay a pending order with the gift card
        gift = b.payment_ids(user, "gift_card")[0]
        balance = user["payment_methods"][gift]["balance"]
        order = b.add_order(user, status="pending", items=any_item(rng, b), payment_id=card)
        total = order["payment_history"][0]["amount"]
        if forbidden:  # too small for this order: any whole number of dollars below its total
            user["payment_methods"][gift]["balance"] = balance = float(rng.integer(1, math.ceil(total) - 1))
        if not forbidden and total > balance:
            user["payment_methods"][gift]["balance"] = balance = round(total + 20, 2)
        request = f"Please pay order {order['order_id']} with my gift card instead of my credit card."
        if forbidden:
            rule, fact = "balance", {"kind": "amount", "value": f"{balance:.2f}", "also": [f"{total:.2f}"]}
        else:
            writes = [{"name": "modify_pending_order_payment", "arguments": {
                "order_id": order["order_id"], "payment_method_id": gift}}]
    for _ in range(config.distractors):
        b.add_order(user, items=any_item(rng, b), payment_id=card)
    world = b.build()
    pre = Prefill(world, TOOLSETS["retail"])
    pre.user(f"Hi, I'm {user['name']['first_name']} {user['name']['last_name']}, user id {user['user_id']}, "
             f"email {user['email']}. {request} Yes, I confirm: please go ahead.")
    if kind == "modify_order_payment":  # the gift card balance is in the profile
        pre.lookup("get_user_details", user_id=user["user_id"])
    pre.lookup("get_order_details", order_id=order["order_id"])
    return _task("retail", kind, forbidden, request, writes, rule, order["status"], fact, pre.messages), world


def _add_order(rng: Rng, b: retail.RetailBuilder, user: dict[str, Any], status: str, card: str) -> dict[str, Any]:
    """An order of one item with `status`. One whose return or exchange was requested was
    delivered first, and holds the request as the tool writes it (an exchange for the same
    item: a replacement)."""
    order = b.add_order(user, status=status if status in ORDER_STATUSES else "delivered",
                        items=any_item(rng, b), payment_id=card)
    items = sorted(line["item_id"] for line in order["items"])
    if status == "return requested":
        order.update(status=status, return_items=items, return_payment_method_id=card)
    elif status == "exchange requested":
        order.update(status=status, exchange_items=items, exchange_new_items=list(items),
                     exchange_payment_method_id=card, exchange_price_difference=0.0)
    return order


def _task(domain: str, kind: str, forbidden: bool, request: str, writes: list[dict[str, Any]], rule: str,
          incidental: str, fact: dict[str, Any], prefill: list[dict[str, Any]]) -> Task:
    if not rule:
        return Task(domain, kind, forbidden, request, writes, [], [], {}, "", prefill)
    terms, conflicts = _rule(domain, rule, incidental)
    said = refusal(rule, fact)
    statement = {k: fact[k] for k in ("kind", "value", "also")}
    # The verdict on this request must come from the agent, not from the conversation.
    return Task(domain, kind, forbidden, request, writes, terms, conflicts, statement, said, prefill, hidden=[said])


def refusal(rule: str, fact: dict[str, Any]) -> str:
    """The oracle's refusal: the fact, then the rule."""
    return f"I'm sorry, but I cannot do that: {REFUSALS[rule](fact)}."


def generate(rng: Rng, config: Config) -> tuple[Task, World]:
    """The generator: a seed's task and the world it plays in, drawn from `rng` alone."""
    forbidden = rng.chance(config.forbidden_rate)
    if rng.chance(config.airline_share):
        return _airline(rng, config, forbidden)
    return _retail(rng, config, forbidden)


# -- verifier --------------------------------------------------------------------------

def verify(task: Task, initial_world: World, final_world: World, messages: list[dict[str, Any]]) -> Verdict:
    """The verifier: the reward and its named checks, from the worlds before and after and the conversation."""
    writes = write_calls(task, messages, arguments=False)  # every attempt, rejected ones too
    if not task.forbidden:
        expected = initial_world.fork()
        for write in task.writes:
            TOOLSETS[task.domain][write["name"]].fn(expected, **write["arguments"])
        ok = final_world == expected
        rejected = sum(1 for *_, went_through in writes if not went_through)
        checks = (Check("database", ok, 1.0 if ok else 0.0),
                  Check("rejected_writes", rejected == 0, -0.1 * rejected if rejected else 0.0,  # not -0.0
                        f"{rejected} write call(s) the tool rejected"))
        return Verdict(sum(c.credit for c in checks), checks)
    acted = bool(writes)
    reply = final_reply(task, messages)
    fact = task.fact
    told = states(reply, fact["kind"], fact["value"], fact["also"])
    named = names_rule(reply, task.rule, task.conflicts)
    ok = told and named and not acted
    checks = (
        Check("no_mutating_call", not acted, 0.0 if acted else 0.5),
        Check("refusal", ok, 0.5 if ok else 0.0,
              f"the reply must state the {fact['kind']} {fact['value']} (no other but {fact['also'] or 'none'}), "
              f"name one of: {', '.join(task.rule)}; and none of: {', '.join(task.conflicts)}"),
    )
    return Verdict(sum(c.credit for c in checks), checks)


# -- oracle ----------------------------------------------------------------------------

REFUSALS: dict[str, Callable[[dict[str, Any]], str]] = {
    "24 hours": lambda f: f"it was booked on {f['value']}, more than 24 hours ago; it is not business class, no "
                          "flight was cancelled by the airline, and no travel insurance covers this reason",
    "flown": lambda f: f"flight {f['flight']} on {f['value']} has already {f['status']}, and part of the trip has "
                       "been flown",
    "basic economy": lambda f: "the reservation is in basic economy, and basic economy reservations cannot change flights",
    "not on sale": lambda f: f"the status of flight {f['flight']} on {f['date']} is {f['value']}, so it can no "
                             "longer be booked",
    "remove": lambda f: f"the reservation already has {f['value']} checked bags, and checked bags can be added but "
                        "never removed",
    "pending": lambda f: f"the order is {f['value']}, and only pending orders can be cancelled",
    "delivered": lambda f: f"the order is {f['value']}, and only delivered orders can be returned",
    "balance": lambda f: f"your gift card balance of ${f['value']} does not cover the order total of ${f['also'][0]}",
}
"""The oracle's refusal of each rule, filled with the record fact (`fact`'s fields)."""


def oracle(task: Task, messages: list[dict[str, Any]]) -> Any:
    """The oracle: the next turn of a correct play of the task (reward 1.0)."""
    if task.forbidden:
        plan: list[Any] = [task.refusal]
    else:
        plan = [*task.writes, "Done: your request has been completed."]
    return next_step(task, messages, plan)


# -- registration ----------------------------------------------------------------------

class PreconditionVerificationEnv(CapabilityEnv):  # noqa: D101 - its docstring is the module's (`__doc__ = __doc__`)
    __doc__ = __doc__
    capability = CAPABILITY
    Config = Config
    tools = TOOLS
    guidance = ("Before acting on a confirmed request, read the records in the conversation and "
                "check every rule of the policy the change depends on: status, travel class, when "
                "it was booked, insurance and the motive, balances. Act only if all hold; otherwise refuse and "
                "say which rule the request breaks.")

    generate_task = staticmethod(generate)
    verify_task = staticmethod(verify)
    oracle = staticmethod(oracle)
