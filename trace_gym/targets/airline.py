"""Airline target tasks: what a customer calls about, built over a seeded world.

Each request kind below makes the records it needs with the world builder (next to
distractors of the same customer and route), then writes what the scripted customer knows,
the gold writes, what must be said and the oracle's turns. Kinds that the policy can forbid
have a forbidden variant whose correct outcome is a refusal naming the rule.
"""

from __future__ import annotations

from collections.abc import Callable

from trace_gym import capabilities as cap
from trace_gym.rng import Rng
from trace_gym.targets.common import (
    Conflict,
    Drafting,
    agent_method,
    amount_text,
    describe_method,
    draft_requests,
    draw_kinds,
    expand_locates,
    give_everything,
    given_intro,
    locate,
    money,
    record_fact,
    settle_vague,
    told,
)
from trace_gym.targets.config import TargetConfig
from trace_gym.targets.task import CustomerRequest, TargetTask, call, say
from trace_gym.worlds import people
from trace_gym.worlds.airline import DOMAIN
from trace_gym.worlds.airline.data import (
    BAG_FEE,
    CANCELLED_FLIGHT_CERTIFICATE,
    CITY,
    FREE_BAGS,
    INSURANCE_FEE,
    NEW_RESERVATION_IDS,
    TODAY,
    AirlineWorld,
    date_of,
    day_of,
)
from trace_gym.worlds.airline.generator import AirlineBuilder, AirlineWorldSize
from trace_gym.worlds.world import Record

CABIN_NAME = {"basic_economy": "basic economy", "economy": "economy", "business": "business"}


class Draft(Drafting):
    """What an airline request is drafted from: the world builder, the customer, the knobs, and the
    records and payment methods other requests already use."""

    builder: AirlineBuilder
    RULE_WORDS = ("24 hour", "24-hour", "basic economy", "flown", "departed", "remove",
                  "number of passengers", "silver", "gold", "regular member")

    @property
    def member(self) -> tuple[str, str]:
        """How the customer's membership may be said whatever the rule ('gold', 'gold member')."""
        return self.user["membership"], f"{self.user['membership']} member"

    def __init__(self, builder: AirlineBuilder, rng: Rng, config: TargetConfig, user: Record) -> None:
        super().__init__(rng=rng, config=config, user=user)
        self.builder = builder
        self.frozen: dict[tuple[str, str], int] = {}
        """(flight, date) -> the request whose facts depend on that date's status and fares."""

    def flight_date(self, flight_number: str, date: str, available: bool = True, seats: int = 9) -> Record:
        """A flight date this request depends on (on sale, when `available`); from now on
        no other request may change it. Raises Conflict if another request already owns it."""
        key = (flight_number, date)
        if self.frozen.get(key, self.owner) != self.owner:
            raise Conflict(key)
        self.frozen[key] = self.owner
        if available:
            return self.builder.ensure_available(flight_number, date, seats)
        return self.builder.world.flights[flight_number]["dates"][date]

    def cancel_flight(self, flight_number: str, date: str) -> None:
        """The airline cancelled this flight date (it must be this request's own)."""
        self.flight_date(flight_number, date, available=False)
        self.builder.set_status(flight_number, date, "cancelled")

    @property
    def last_day(self) -> int:
        """The last day of the month with scheduled flights."""
        return self.builder.size.days_range.stop - 1

    def method(self, kind: str) -> Record:
        """One of the customer's methods of a kind (credit_card, gift_card, certificate)."""
        methods = [m for m in self.user["payment_methods"].values() if m["source"] == kind]
        return self.rng.choice(methods)

    def update_method(self, amount: int) -> Record:
        """A method to pay `amount` for a change: a credit card, or an unspent gift card
        that covers it."""
        gift = [m for m in self.user["payment_methods"].values()
                if m["source"] == "gift_card" and m["id"] not in self.spent_methods
                and m["amount"] >= amount]
        if gift and self.rng.chance(0.4):
            self.spent_methods.add(gift[0]["id"])
            return gift[0]
        return self.method("credit_card")

    def direct_route(self, min_flights: int = 1) -> tuple[str, str]:
        """An (origin, destination) pair with at least `min_flights` direct flights."""
        b = self.builder
        pairs = sorted({(f["origin"], f["destination"]) for f in b.world.flights.values()})
        origin, destination = self.rng.choice(pairs)
        while len(b.flights_between(origin, destination)) < min_flights:
            b.add_flight(origin, destination, self.rng.integer(6 * 60, 19 * 60))
        return origin, destination

    def reservation(self, *, cabin: str | None = None, flight_type: str | None = None,
                    day: int | None = None, return_day: int | None = None,
                    route: tuple[str, str] | None = None, available: bool = True,
                    **kwargs) -> Record:
        """A new reservation of the customer on a direct route; with `available`, every
        flight of it is still on sale (not departed, not cancelled)."""
        b, rng = self.builder, self.rng
        origin, destination = route or self.direct_route()
        flight_type = flight_type or rng.choice(("one_way", "round_trip"))
        if day is None:
            day = rng.integer(TODAY + 1, self.last_day - (1 if flight_type == "round_trip" else 0))
        if flight_type == "round_trip" and return_day is None:
            return_day = rng.integer(day + 1, self.last_day)
        itinerary = [rng.choice(b.flights_between(origin, destination))]
        res = b.add_reservation(self.user, itinerary=itinerary, day=day, return_day=return_day,
                                flight_type=flight_type, cabin=cabin, **kwargs)
        for seg in res["flights"]:
            self.flight_date(seg["flight_number"], seg["date"], available=available)
        self.used_records.add(res["reservation_id"])
        return res

    def distractor(self, like: Record) -> None:
        """Another reservation of the customer on the same route, another day."""
        days = [d for d in self.builder.size.days_range
                if d != day_of(like["flights"][0]["date"]) and d < self.last_day]
        self.builder.add_reservation(
            self.user, itinerary=[self.builder.world.flights[like["flights"][0]["flight_number"]]],
            day=self.rng.choice(days), flight_type="one_way",
        )


def _trip(res: Record) -> str:
    first = res["flights"][0]
    kind = "round trip" if res["flight_type"] == "round_trip" else "one-way trip"
    return f"{kind} from {CITY[res['origin']]} to {CITY[res['destination']]} on {first['date']}"


def _find_reservation(d: Draft, res: Record, question: str) -> tuple[str, list]:
    """The customer's answer about which reservation, and the oracle's turns to find it."""
    known = d.knows_id()
    if known:
        fact = f"The reservation id is {res['reservation_id']}."
    else:
        fact = f"I don't have the reservation id. It's my {_trip(res)}."
        d.vague[res["reservation_id"]] = _signature(res)
        d.distractor(res)
    return fact, [say(question), locate("reservations", res["reservation_id"], known)]


def _signature(res: Record) -> tuple:
    """What the customer's description of a reservation pins down."""
    return (res["flight_type"], res["origin"], res["destination"], res["flights"][0]["date"])


def _pax(n: int) -> str:
    return f"{n} passenger" + ("s" if n != 1 else "")


# -- request kinds -------------------------------------------------------------------

REASONS = {
    "change_of_plans": "My plans changed, so I won't travel.",
    "health": "I'm ill and my doctor told me not to travel.",
    "weather": "A big storm is forecast and I don't want to fly in it.",
    "airline_cancelled": "The airline cancelled one of my flights.",
}


COVERED = ("health", "weather")
"""Reasons travel insurance covers."""


def cancel_reservation(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants a reservation cancelled; forbidden when no cancellation rule covers it
    (booked over 24 hours ago, not business, no flight cancelled by the airline, no insurance
    covering the reason)."""
    rng = d.rng
    reason = rng.choice(tuple(REASONS))  # drawn before, and apart from, the verdict
    if forbidden:
        variant = "none"
        cabin = rng.choice(("economy", "basic_economy"))
        insurance = "no" if reason in COVERED else rng.choice(("yes", "no"))
    else:
        variant = rng.choice(("business", "recent", "airline_cancelled", *(("insured",) if reason in COVERED else ())))
        cabin = "business" if variant == "business" else rng.choice(("economy", "basic_economy"))
        insurance = "yes" if variant == "insured" else rng.choice(("yes", "no"))
    hours = rng.integer(2, 20) if variant == "recent" else rng.integer(30, 400)
    res = d.reservation(cabin=cabin, insurance=insurance, created_hours_ago=hours)
    rid = res["reservation_id"]
    if variant == "airline_cancelled":
        seg = rng.choice(res["flights"])
        d.cancel_flight(seg["flight_number"], seg["date"])
    fact, find = _find_reservation(d, res, "Which reservation would you like to cancel? Please give me the reservation id.")
    paid = sum(p["amount"] for p in res["payment_history"])
    plan = [*find, say("What is the reason for the cancellation?")]
    request = CustomerRequest(
        kind="cancel_reservation",
        subject=rid,
        opening="Hi, I need to cancel a reservation.",
        instruction=f"Cancel reservation {rid} ({_trip(res)}). Reason: {REASONS[reason]}",
        facts={"reservation": fact, "reason": REASONS[reason]},
        confirm=[rid],
        capabilities=[cap.PRECONDITION],
    )
    if forbidden:
        cover = ("it has no travel insurance" if insurance == "no" else
                 "your travel insurance covers only health and weather reasons")
        booked = res["created_at"][:10]
        plan.append(say(
            f"I'm sorry, but I cannot cancel reservation {rid}. It was booked on {booked}, more than "
            f"24 hours ago, it is not a business reservation, none of its flights was cancelled by "
            f"the airline, and {cover}."))
        d.forbid(request, ["24 hour", "24-hour"],
                 [{"name": "cancel_reservation", "arguments": {"reservation_id": rid}}],
                 CABIN_NAME[cabin], *d.member, fact=record_fact("date", booked))
    else:
        plan += [
            say(f"Here is what I will do: cancel reservation {rid}, your {_trip(res)}. The "
                f"{money(paid)} you paid goes back to the original payment methods within 5 to 7 "
                f"business days. Do you confirm (yes/no)?"),
            call("cancel_reservation", reservation_id=rid),
            say(f"Reservation {rid} is cancelled. The refund of {money(paid)} will arrive within "
                f"5 to 7 business days."),
        ]
        request.writes = [{"name": "cancel_reservation", "arguments": {"reservation_id": rid}}]
    request.plan = plan
    return request


def change_flight(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants a reservation moved to other flights on the same route; forbidden for
    basic economy."""
    rng, b = d.rng, d.builder
    cabin = "basic_economy" if forbidden else rng.choice(("economy", "business"))
    round_trip = rng.chance(0.4)
    route = d.direct_route(min_flights=2)
    if round_trip:
        day = rng.integer(TODAY + 1, d.last_day - 2)
        res = d.reservation(cabin=cabin, flight_type="round_trip", day=day, return_day=d.last_day,
                            route=route, passengers=rng.integer(1, 2))
        new_days = [x for x in range(TODAY + 1, d.last_day) if x != day]
    else:
        day = rng.integer(TODAY + 1, d.last_day)
        res = d.reservation(cabin=cabin, flight_type="one_way", day=day, route=route,
                            passengers=rng.integer(1, 2))
        new_days = [x for x in range(TODAY + 1, d.last_day + 1) if x != day]
    rid, out = res["reservation_id"], res["flights"][0]
    new_date = date_of(rng.choice(new_days))
    preference = rng.choice(("cheapest", "earliest", "latest"))
    flights = b.flights_between(*route)
    entries = {f["flight_number"]: d.flight_date(f["flight_number"], new_date) for f in flights}
    times = sorted(f["scheduled_departure_time_est"] for f in flights)
    if preference != "cheapest" and (times[0] == times[1] if preference == "earliest" else times[-1] == times[-2]):
        preference = "cheapest"  # tied departure times: only the fare can single one out
    if preference == "cheapest":
        chosen = min(flights, key=lambda f: entries[f["flight_number"]]["prices"][cabin])
        low = entries[chosen["flight_number"]]["prices"][cabin]
        for f in flights:  # exactly one cheapest flight
            if f is not chosen and entries[f["flight_number"]]["prices"][cabin] <= low:
                entries[f["flight_number"]]["prices"][cabin] = low + rng.integer(5, 40)
        if low == out["price"]:  # a fare difference, so the payment method matters
            entries[chosen["flight_number"]]["prices"][cabin] = low - 3
    else:
        chosen = sorted(flights, key=lambda f: f["scheduled_departure_time_est"])[0 if preference == "earliest" else -1]
        if entries[chosen["flight_number"]]["prices"][cabin] == out["price"]:
            entries[chosen["flight_number"]]["prices"][cabin] += 7
    new_fn = chosen["flight_number"]
    n_pax = len(res["passengers"])
    diff = (entries[new_fn]["prices"][cabin] - out["price"]) * n_pax
    method = d.update_method(max(diff, 0))
    keep = "" if not round_trip else " Keep my return flight as it is."
    fact_flight = f"I'd like to fly on {new_date} instead, on the {preference} direct flight that day.{keep}"
    fact, find = _find_reservation(d, res, "Which reservation would you like to change? Please give me the reservation id.")
    new_flights = [{"flight_number": new_fn, "date": new_date}]
    if round_trip:
        back = res["flights"][1]
        new_flights.append({"flight_number": back["flight_number"], "date": back["date"]})
    request = CustomerRequest(
        kind="change_flight",
        subject=rid,
        opening="Hi, I'd like to change the flight on one of my reservations.",
        instruction=(f"Move reservation {rid} ({_trip(res)}) to the {preference} direct flight on "
                     f"{new_date}{' (outbound only)' if round_trip else ''}; pay with "
                     f"{agent_method(method)}."),
        facts={"reservation": fact, "flight": fact_flight,
               "payment": f"Please use {describe_method(method)}."},
        confirm=[rid, new_fn],
        capabilities=[cap.STRUCTURED, cap.PRECISION],
    )
    plan = list(find)
    if forbidden:
        plan.append(say(f"I'm sorry, but reservation {rid} is in basic economy, and basic economy "
                        f"flights cannot be changed."))
        d.forbid(request, ["basic economy"],
                 [{"name": "update_reservation_flights", "arguments": {"reservation_id": rid}}],
                 *d.member, fact=record_fact("cabin", "basic_economy"))
        request.capabilities = [cap.PRECONDITION]
    else:
        verb = "charged to" if diff > 0 else "refunded to"
        plan += [
            say("Which new date and flight would you like?"),
            call("search_direct_flight", origin=route[0], destination=route[1], date=new_date),
            say("Which payment method should I use for the fare difference?"),
            say(f"Here is the change: on reservation {rid}, flight {out['flight_number']} on "
                f"{out['date']} becomes flight {new_fn} on {new_date}, in {CABIN_NAME[cabin]}"
                f"{'; the return flight stays the same' if round_trip else ''}. The fare difference "
                f"of {money(abs(diff))} will be {verb} {agent_method(method)}. Do you confirm (yes/no)?"),
            call("update_reservation_flights", reservation_id=rid, cabin=cabin, flights=new_flights,
                 payment_id=method["id"]),
            say(f"Done: reservation {rid} now flies {new_fn} on {new_date}."),
        ]
        request.writes = [{"name": "update_reservation_flights", "arguments": {
            "reservation_id": rid, "cabin": cabin, "flights": new_flights, "payment_id": method["id"]}}]
    request.plan = plan
    return request


def change_cabin(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants a reservation's cabin changed; forbidden once a flight of it has flown."""
    rng, b = d.rng, d.builder
    cabin = rng.choice(("basic_economy", "economy", "business"))
    if forbidden:  # the (outbound) flight has flown
        if rng.chance(0.5):
            res = d.reservation(cabin=cabin, flight_type="round_trip", day=rng.integer(b.size.first_day, TODAY - 1),
                                return_day=rng.integer(TODAY + 1, d.last_day), available=False)
            d.flight_date(res["flights"][-1]["flight_number"], res["flights"][-1]["date"])
        else:
            res = d.reservation(cabin=cabin, flight_type="one_way", day=rng.integer(b.size.first_day, TODAY - 1),
                                available=False)
    else:
        res = d.reservation(cabin=cabin)
    rid, old = res["reservation_id"], res["cabin"]
    new = {"basic_economy": rng.choice(("economy", "business")), "economy": "business",
           "business": "economy"}[old]
    n_pax = len(res["passengers"])
    fact, find = _find_reservation(d, res, "Which reservation would you like to change? Please give me the reservation id.")
    request = CustomerRequest(
        kind="change_cabin",
        subject=rid,
        opening="Hi, I'd like to change the cabin class of one of my reservations.",
        instruction=f"Change reservation {rid} ({_trip(res)}) from {CABIN_NAME[old]} to {CABIN_NAME[new]}.",
        facts={"reservation": fact, "cabin": f"I'd like {CABIN_NAME[new]}, for all flights."},
        confirm=[rid],
        capabilities=[cap.STRUCTURED, cap.PRECISION],
    )
    plan = [*find, say("Which cabin would you like to move to?")]
    if forbidden:
        request.facts["payment"] = f"Please use {describe_method(d.update_method(0))}."
        plan.append(say(f"I'm sorry, but the cabin of reservation {rid} cannot be changed: its "
                        f"flight on {res['flights'][0]['date']} has already been flown."))
        d.forbid(request, ["flown", "departed"],
                 [{"name": "update_reservation_flights", "arguments": {"reservation_id": rid}}],
                 CABIN_NAME[old], *d.member, fact=record_fact("date", res["flights"][0]["date"]))
        request.capabilities = [cap.PRECONDITION]
        request.plan = plan
        return request
    segs = res["flights"]
    new_prices = [b.world.flights[s["flight_number"]]["dates"][s["date"]]["prices"] for s in segs]
    diff = (sum(p[new] for p in new_prices) - sum(s["price"] for s in segs)) * n_pax
    if diff == 0:
        new_prices[0][new] += 5
        diff = 5 * n_pax
    method = d.update_method(max(diff, 0))
    request.facts["payment"] = f"Please use {describe_method(method)}."
    verb = "costs" if diff > 0 else "gives you back"
    flights = [{"flight_number": s["flight_number"], "date": s["date"]} for s in segs]
    plan += [call("search_direct_flight", origin=s["origin"], destination=s["destination"], date=s["date"])
             for s in segs]
    plan += [
        say(f"Moving reservation {rid} to {CABIN_NAME[new]} {verb} {money(abs(diff))} in total for "
            f"{_pax(n_pax)}. Which payment method should I use?"),
        say(f"To confirm: reservation {rid} moves to {CABIN_NAME[new]} on all its flights, and "
            f"{money(abs(diff))} is {'charged to' if diff > 0 else 'refunded to'} "
            f"{agent_method(method)}. Do you confirm (yes/no)?"),
        call("update_reservation_flights", reservation_id=rid, cabin=new, flights=flights,
             payment_id=method["id"]),
        say(f"Done: reservation {rid} is now in {CABIN_NAME[new]}."),
    ]
    request.communicate = [told("amount", amount_text(abs(diff)))]
    request.writes = [{"name": "update_reservation_flights", "arguments": {
        "reservation_id": rid, "cabin": new, "flights": flights, "payment_id": method["id"]}}]
    request.plan = plan
    return request


def baggage(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer names the total they want; fewer bags than the reservation has would
    remove some, which the policy forbids (only the record tells which it is)."""
    rng = d.rng
    membership = d.user["membership"]
    cabin = rng.choice(("basic_economy", "economy", "business"))
    n_pax = rng.integer(1, 2)
    allowance = FREE_BAGS[membership][cabin] * n_pax
    wanted = allowance + rng.integer(1, 3)
    booked = wanted + rng.integer(1, 2) if forbidden else rng.integer(max(0, allowance - 1), allowance)
    res = d.reservation(cabin=cabin, passengers=n_pax, total_baggages=booked)
    rid = res["reservation_id"]
    fact, find = _find_reservation(d, res, "Which reservation is this about? Please give me the reservation id.")
    nonfree = wanted - allowance
    fee = BAG_FEE * (nonfree - res["nonfree_baggages"])
    method = d.update_method(max(fee, 0))
    request = CustomerRequest(
        kind="baggage",
        subject=rid,
        opening="Hi, I'd like to change the checked bags on one of my reservations.",
        instruction=f"Have {wanted} checked bags in total on reservation {rid}; pay with {agent_method(method)}.",
        facts={"reservation": fact, "bags": f"I'd like {wanted} checked bags in total.",
               "payment": f"Please use {describe_method(method)}."},
        confirm=[rid, str(wanted)],
        capabilities=[cap.STRUCTURED, cap.PRECISION],
    )
    plan = [*find, say("How many checked bags would you like on the reservation in total?")]
    if forbidden:
        plan.append(say(f"I'm sorry, but reservation {rid} already has {booked} checked bags, and "
                        f"checked bags cannot be removed from a reservation; bags can only be added."))
        d.forbid(request, ["remove"],
                 [{"name": "update_reservation_baggages", "arguments": {"reservation_id": rid}}],
                 CABIN_NAME[cabin], *d.member, fact=record_fact("bags", str(booked), str(wanted)))
        request.capabilities = [cap.PRECONDITION]
        request.plan = plan
        return request
    request.plan = [
        *plan,
        say("Which payment method should I use?"),
        say(f"Reservation {rid} is {CABIN_NAME[cabin]} for {_pax(n_pax)}, and as a {membership} "
            f"member that includes {allowance} checked bags without charge. Going from {booked} to "
            f"{wanted} bags makes {nonfree} of them paid, so the fee is {money(fee)}, charged to "
            f"{agent_method(method)}. Do you confirm (yes/no)?"),
        call("update_reservation_baggages", reservation_id=rid, total_baggages=wanted,
             nonfree_baggages=nonfree, payment_id=method["id"]),
        say(f"Done: reservation {rid} now has {wanted} checked bags, and {money(fee)} was charged."),
    ]
    request.communicate = [told("amount", amount_text(fee))]
    request.writes = [{"name": "update_reservation_baggages", "arguments": {
        "reservation_id": rid, "total_baggages": wanted, "nonfree_baggages": nonfree,
        "payment_id": method["id"]}}]
    return request


def update_passengers(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer lists the passengers as they should be, one corrected; a list longer or
    shorter than the reservation's would change their number, which the policy forbids
    (only the record tells which it is)."""
    rng = d.rng
    stated_n = rng.integer(1, 3)
    n_pax = rng.choice([n for n in (stated_n - 1, stated_n + 1) if 1 <= n <= 3]) if forbidden else stated_n
    res = d.reservation(passengers=n_pax)
    rid = res["reservation_id"]
    fact, find = _find_reservation(d, res, "Which reservation is this about? Please give me the reservation id.")
    index = rng.below(min(n_pax, stated_n))
    old = res["passengers"][index]
    new_first = rng.choice([n for n in people.FIRST_NAMES if n != old["first_name"]])
    new_dob = people.birth_date(rng) if rng.chance(0.5) else old["dob"]
    passengers = [dict(p) for p in res["passengers"][:stated_n]]
    passengers[index] = dict(old, first_name=new_first, dob=new_dob)
    while len(passengers) < stated_n:  # someone the reservation does not have
        passengers.append({"first_name": rng.choice(people.FIRST_NAMES), "last_name": rng.choice(people.LAST_NAMES),
                           "dob": people.birth_date(rng)})
    names = "; ".join(f"{p['first_name']} {p['last_name']}, born {p['dob']}" for p in passengers)
    request = CustomerRequest(
        kind="update_passengers",
        subject=rid,
        opening="Hi, I'd like to update the passengers on one of my reservations.",
        instruction=(f"On reservation {rid}, correct passenger {old['first_name']} {old['last_name']} "
                     f"to {new_first} {old['last_name']}, born {new_dob}; the passengers should be: {names}."),
        facts={"reservation": fact, "passengers": f"The passengers should be: {names}."},
        confirm=[rid, new_first],
        capabilities=[cap.PRECISION],
    )
    plan = [*find, say("Which passenger details need to change, and what are the correct details?")]
    if forbidden:
        plan.append(say(f"I'm sorry, but reservation {rid} has {_pax(n_pax)}, and the number of "
                        f"passengers on a reservation cannot be changed, not even by a human agent."))
        d.forbid(request, ["number of passengers"],
                 [{"name": "update_reservation_passengers", "arguments": {"reservation_id": rid}}],
                 CABIN_NAME[res["cabin"]], *d.member, fact=record_fact("passengers", str(n_pax), str(stated_n)))
        request.capabilities = [cap.PRECONDITION]
        request.plan = plan
        return request
    request.plan = [
        *plan,
        say(f"To confirm: on reservation {rid}, passenger {old['first_name']} {old['last_name']} "
            f"becomes {new_first} {old['last_name']}, born {new_dob}; the other passengers stay as "
            f"they are. Do you confirm (yes/no)?"),
        call("update_reservation_passengers", reservation_id=rid, passengers=passengers),
        say(f"Done: the passengers of reservation {rid} are updated."),
    ]
    request.writes = [{"name": "update_reservation_passengers",
                       "arguments": {"reservation_id": rid, "passengers": passengers}}]
    return request


def book_flight(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants a new reservation booked on a route and date they describe, paid as they
    say (never forbidden)."""
    rng, b, user = d.rng, d.builder, d.user
    origin, destination = d.direct_route(min_flights=2)
    round_trip = rng.chance(0.3) and len(b.flights_between(destination, origin)) >= 1
    day = rng.integer(TODAY + 1, d.last_day - (1 if round_trip else 0))
    legs = [(origin, destination, date_of(day))]
    if round_trip:
        legs.append((destination, origin, date_of(rng.integer(day + 1, d.last_day))))
    cabin = rng.choice(("basic_economy", "economy", "business"))
    travellers = [{"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
                   "dob": user["dob"]}]
    if rng.chance(0.4) and user["saved_passengers"]:
        travellers.append(dict(user["saved_passengers"][0]))
    n_pax = len(travellers)
    flights, prices = [], 0
    for o, dst, date in legs:
        options = b.flights_between(o, dst)
        entries = {f["flight_number"]: d.flight_date(f["flight_number"], date, seats=n_pax + 9)
                   for f in options}
        best = min(options, key=lambda f: entries[f["flight_number"]]["prices"][cabin])
        low = entries[best["flight_number"]]["prices"][cabin]
        for f in options:
            if f is not best and entries[f["flight_number"]]["prices"][cabin] <= low:
                entries[f["flight_number"]]["prices"][cabin] = low + rng.integer(5, 40)
        flights.append({"flight_number": best["flight_number"], "date": date})
        prices += low
    allowance = FREE_BAGS[user["membership"]][cabin] * n_pax
    bags = rng.integer(0, allowance + 2)
    nonfree = max(0, bags - allowance)
    insurance = "yes" if rng.chance(0.4) else "no"
    total = prices * n_pax + (INSURANCE_FEE * n_pax if insurance == "yes" else 0) + BAG_FEE * nonfree
    card = d.method("credit_card")
    gifts = [m for m in user["payment_methods"].values() if m["source"] == "gift_card"
             and m["id"] not in d.spent_methods and m["amount"] >= total]
    certs = [m for m in user["payment_methods"].values() if m["source"] == "certificate"
             and m["id"] not in d.spent_methods and m["amount"] < total]
    if certs and rng.chance(0.5):
        cert = certs[0]
        d.spent_methods.add(cert["id"])
        payments = [{"payment_id": cert["id"], "amount": int(cert["amount"])},
                    {"payment_id": card["id"], "amount": total - int(cert["amount"])}]
        pay_fact = f"Please use my travel certificate first and put the rest on {describe_method(card)}."
        pay_said = f"{money(cert['amount'])} from your travel certificate and {money(total - cert['amount'])} on {agent_method(card)}"
    elif gifts and rng.chance(0.5):
        d.spent_methods.add(gifts[0]["id"])
        payments = [{"payment_id": gifts[0]["id"], "amount": total}]
        pay_fact, pay_said = "Please use my gift card.", "your gift card"
    else:
        payments = [{"payment_id": card["id"], "amount": total}]
        pay_fact, pay_said = f"Please charge {describe_method(card)}.", agent_method(card)
    new_id = NEW_RESERVATION_IDS[d.new_ids]
    d.new_ids += 1
    kind = "round trip" if round_trip else "one way"
    dates = legs[0][2] + (f", returning on {legs[1][2]}" if round_trip else "")
    names = " and ".join(f"{p['first_name']} {p['last_name']}, born {p['dob']}" for p in travellers)
    arguments = {
        "user_id": user["user_id"], "origin": origin, "destination": destination,
        "flight_type": "round_trip" if round_trip else "one_way", "cabin": cabin,
        "flights": flights, "passengers": travellers, "payment_methods": payments,
        "total_baggages": bags, "nonfree_baggages": nonfree, "insurance": insurance,
    }
    fns = " and ".join(f"{f['flight_number']} on {f['date']}" for f in flights)
    request = CustomerRequest(
        kind="book_flight",
        opening="Hi, I'd like to book a new flight.",
        instruction=(f"Book a {kind} trip from {origin} to {destination} leaving {dates}, the cheapest "
                     f"direct {CABIN_NAME[cabin]} flight(s), for {names}; {bags} checked bag(s); "
                     f"insurance: {insurance}; payment: {pay_fact}"),
        facts={
            "trip": (f"I want to fly {kind} from {CITY[origin]} ({origin}) to {CITY[destination]} "
                     f"({destination}), leaving on {dates}. I'd like the cheapest direct flight"
                     f"{'s' if round_trip else ''}."),
            "cabin": f"{CABIN_NAME[cabin].capitalize()}, please.",
            "passengers": ("Just me: " if n_pax == 1 else "The two of us: ") + names + ".",
            "bags": f"{bags} checked bag{'s' if bags != 1 else ''} in total." if bags else "No checked bags.",
            "insurance": "Yes, I'd like travel insurance." if insurance == "yes" else "No insurance, thanks.",
            "payment": pay_fact,
        },
        confirm=[flights[0]["flight_number"], amount_text(total)],
        communicate=[told("amount", amount_text(total), amount_text(INSURANCE_FEE),
                          *(amount_text(p["amount"]) for p in payments if len(payments) > 1))],
        capabilities=[cap.PRECISION, cap.STRUCTURED],
    )
    request.plan = [
        say("Where are you flying from and to, on which dates, and is it one way or round trip?"),
        *[call("search_direct_flight", origin=o, destination=dst, date=date) for o, dst, date in legs],
        say("Which cabin class would you like: basic economy, economy or business?"),
        say("Who will be travelling? Please give me each passenger's full name and date of birth."),
        say("How many checked bags will you bring in total?"),
        say(f"Would you like travel insurance, at {money(INSURANCE_FEE)} per passenger?"),
        say("Which payment method would you like to use?"),
        say(f"Here is the booking: {kind} from {origin} to {destination}, flight {fns}, in "
            f"{CABIN_NAME[cabin]}, for {names}; {bags} checked bags ({nonfree} paid); insurance: "
            f"{insurance}. The total is {money(total)}, paid with {pay_said}. Do you confirm (yes/no)?"),
        call("book_reservation", **arguments),
        say(f"You are booked: reservation {new_id}, {money(total)} in total."),
    ]
    request.writes = [{"name": "book_reservation", "arguments": arguments}]
    return request


def compensation(d: Draft, forbidden: bool) -> CustomerRequest:
    """The airline cancelled one of the customer's flights and they ask for compensation (a
    certificate per passenger); forbidden for a regular member whose reservation is neither
    insured nor business."""
    rng, user = d.rng, d.user
    forbidden = forbidden and user["membership"] == "regular"
    if forbidden:
        res = d.reservation(cabin=rng.choice(("basic_economy", "economy")), insurance="no")
    elif user["membership"] == "regular":
        if rng.chance(0.5):
            res = d.reservation(cabin="business")
        else:
            res = d.reservation(cabin=rng.choice(("basic_economy", "economy")), insurance="yes")
    else:
        res = d.reservation()
    rid, n_pax = res["reservation_id"], len(res["passengers"])
    seg = rng.choice(res["flights"])
    d.cancel_flight(seg["flight_number"], seg["date"])
    amount = CANCELLED_FLIGHT_CERTIFICATE * n_pax
    fact, find = _find_reservation(d, res, "I'm sorry to hear that. Which reservation was affected? Please give me the reservation id.")
    request = CustomerRequest(
        kind="compensation",
        subject=rid,
        opening="Hi, the airline cancelled one of my flights and I'd like compensation for the trouble.",
        instruction=f"Ask for compensation because flight {seg['flight_number']} on {seg['date']} of reservation {rid} was cancelled.",
        facts={"reservation": fact, "flight": f"It's flight {seg['flight_number']} on {seg['date']}."},
        confirm=[amount_text(amount)],
        capabilities=[cap.PRECONDITION, cap.STRUCTURED],
    )
    plan = [*find, call("get_flight_status", flight_number=seg["flight_number"], date=seg["date"])]
    if forbidden:
        plan.append(say(
            f"I checked: flight {seg['flight_number']} on {seg['date']} was cancelled by the "
            f"airline. I'm sorry, but compensation is only for silver or gold members, insured "
            f"reservations and business reservations, and you are a regular member, and "
            f"reservation {rid} is not insured and not business, so it does not qualify."))
        # No forbidden write: the certificate it would take goes to the customer, as an allowed
        # compensation's does, so the database check is the one that catches it.
        d.forbid(request, ["silver", "gold", "regular member"], [], CABIN_NAME[res["cabin"]],
                 fact=record_fact("membership", "regular", "silver", "gold"))  # the rule's own words
    else:
        why = {"silver": "a silver member", "gold": "a gold member"}.get(
            user["membership"], "a business reservation" if res["cabin"] == "business" else "an insured reservation")
        plan += [
            say(f"I checked: flight {seg['flight_number']} on {seg['date']} of reservation {rid} was "
                f"cancelled by the airline. As {why}, you qualify for a travel certificate of "
                f"{money(amount)} ({money(CANCELLED_FLIGHT_CERTIFICATE)} per passenger). Shall I "
                f"issue it (yes/no)?"),
            call("send_certificate", user_id=user["user_id"], amount=amount),
            say(f"Done: a travel certificate of {money(amount)} is now in your profile."),
        ]
        request.writes = [{"name": "send_certificate", "arguments": {"user_id": user["user_id"], "amount": amount}}]
        request.communicate = [told("amount", amount_text(amount), amount_text(CANCELLED_FLIGHT_CERTIFICATE))]
    request.plan = plan
    return request


STATUSES_TODAY = ("on time", "delayed", "flying", "landed", "cancelled")
"""The statuses a flight has on the day it flies."""


def flight_status(d: Draft, forbidden: bool) -> CustomerRequest:
    """The status of a flight today, drawn uniformly: on later days nearly every flight is
    available, and a policy that answers "available" without looking would pass."""
    rng, b = d.rng, d.builder
    flight = rng.choice(list(b.world.flights.values()))
    date = date_of(TODAY)
    fn = flight["flight_number"]
    d.flight_date(fn, date, available=False)  # this request's own: no other may change it
    status = rng.choice(STATUSES_TODAY)
    b.set_status(fn, date, status)
    request = CustomerRequest(
        kind="flight_status",
        opening="Hi, can you tell me the status of a flight?",
        instruction=f"Ask for the status of flight {fn} on {date}.",
        facts={"flight": f"It's flight {fn} on {date}."},
        communicate=[told("flight_status", status)],
        capabilities=[],
    )
    request.plan = [
        say("Which flight do you mean? Please tell me the flight number and date."),
        call("get_flight_status", flight_number=fn, date=date),
        say(f"Flight {fn} on {date} is {status}."),
    ]
    return request


def bag_allowance(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer asks how many checked bags a reservation includes at no charge (never forbidden)."""
    res = d.reservation()
    rid, cabin, n_pax = res["reservation_id"], res["cabin"], len(res["passengers"])
    membership = d.user["membership"]
    per = FREE_BAGS[membership][cabin]
    total = per * n_pax
    fact, find = _find_reservation(d, res, "Which reservation is this about? Please give me the reservation id.")
    request = CustomerRequest(
        kind="bag_allowance",
        subject=rid,
        opening="Hi, how many checked bags can I bring for free on my trip?",
        instruction=f"Ask how many free checked bags reservation {rid} includes.",
        facts={"reservation": fact},
        communicate=[told("free_bags", str(total))],
        capabilities=[cap.STRUCTURED],
    )
    request.plan = [  # one count of free bags in the message: the per-passenger one is said otherwise
        *find,
        say(f"Reservation {rid} is {CABIN_NAME[cabin]} for {_pax(n_pax)}, and as a {membership} member "
            f"you get {per} checked bag{'s' if per != 1 else ''} at no charge per passenger: {total} free "
            f"checked bag{'s' if total != 1 else ''} in total."),
    ]
    return request


KINDS: dict[str, Callable[[Draft, bool], CustomerRequest]] = {  # the drafter of each of DOMAIN.kinds
    "cancel_reservation": cancel_reservation,
    "change_flight": change_flight,
    "change_cabin": change_cabin,
    "baggage": baggage,
    "update_passengers": update_passengers,
    "book_flight": book_flight,
    "compensation": compensation,
    "flight_status": flight_status,
    "bag_allowance": bag_allowance,
}
FORBIDDABLE = frozenset({"cancel_reservation", "change_flight", "change_cabin", "baggage",
                         "update_passengers", "compensation"})


def generate_task(rng: Rng, config: TargetConfig,
                  size: AirlineWorldSize = AirlineWorldSize()) -> tuple[TargetTask, AirlineWorld]:
    """A task and the world it is set in, from one random stream."""
    builder = AirlineBuilder(rng, size)
    for _ in range(size.users):  # other customers
        other = builder.add_user()
        for _ in range(size.reservations_per_user):
            builder.add_reservation(other)
    user = builder.add_user()
    draft = Draft(builder, rng, config, user)
    kinds = draw_kinds(rng, config, DOMAIN.kinds, limits={"book_flight": len(NEW_RESERVATION_IDS)})
    requests = draft_requests(draft, KINDS, FORBIDDABLE, kinds)
    for _ in range(config.distractors):
        subject = [r for r in user["reservations"] if r in draft.used_records]
        like = builder.world.reservations[rng.choice(subject)] if subject else None
        if like is not None:
            draft.distractor(like)
        else:
            builder.add_reservation(user)
    rng.shuffle(user["reservations"])
    world = builder.build()
    if config.opening == "given":
        give_everything(requests, "reservation", "The reservation id is {id}.")
    settle_vague(requests, draft, user["reservations"],
                 lambda rid, description: _signature(world.reservations[rid]) == description,
                 "reservation", "The reservation id is {id}.")
    for request in requests:
        request.plan = expand_locates(request.plan, user["reservations"], "get_reservation_details",
                                      "reservation_id")
    name = f"{user['name']['first_name']} {user['name']['last_name']}"
    task = TargetTask(
        domain=DOMAIN.name,
        user_id=user["user_id"],
        identity={"user_id": f"My user id is {user['user_id']}."},
        requests=requests,
        intro=[say("I can help with that. Could you please tell me your user id?"),
               call("get_user_details", user_id=user["user_id"])],
        persona=f"You are {name}, an airline customer (user id {user['user_id']}).",
        opening=config.opening,
    )
    if config.opening == "given":
        task.intro = given_intro(user["user_id"])
    return task, world
