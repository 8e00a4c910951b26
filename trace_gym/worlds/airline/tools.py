"""The airline tools: tau2-bench's 14 tools, same names, parameters, types and nesting,
same semantics (what is checked, what is written, the "Error: ..." style).

Like the target's API, the booking tools do not enforce the policy (24-hour rule, basic
economy, insurance reasons...): the agent must check it before calling them.
"""

from __future__ import annotations

from typing import Any

from trace_gym.errors import ToolError
from trace_gym.schema import function, integer, record, record_list, string
from trace_gym.tools import ToolKind, Toolset, tool
from trace_gym.worlds.airline.data import (
    AIRPORTS,
    BAG_FEE,
    CABINS,
    INSURANCE_FEE,
    NEW_CERTIFICATE_IDS,
    NEW_RESERVATION_IDS,
    NOW,
    AirlineWorld,
)
from trace_gym.worlds.generic_tools import calculate_tool, transfer_tool
from trace_gym.worlds.world import Record

READ, WRITE = ToolKind.READ, ToolKind.WRITE

_RESERVATION_ID = string("Reservation id, six characters, e.g. 'ZFA04Y'.")
_CABIN = string("Cabin class of the whole reservation.", enum=["business", "economy", "basic_economy"])
_FLIGHT_INFO = record({
    "flight_number": string("Flight number, e.g. 'HAT001'."),
    "date": string("Flight date as YYYY-MM-DD, e.g. '2024-05-01'."),
})
_PASSENGER = record({
    "first_name": string("Passenger's first name."),
    "last_name": string("Passenger's last name."),
    "dob": string("Passenger's date of birth as YYYY-MM-DD."),
})
_PAYMENT = record({
    "payment_id": string("Id of a payment method in the user's profile."),
    "amount": integer("Amount charged to this method, in dollars."),
})
_PAYMENT_ID = string(
    "Id of a payment method in the user's profile, e.g. 'credit_card_7815826' or "
    "'gift_card_7815826'."
)
_SEARCH = {
    "origin": string("Origin airport, three-letter IATA code, e.g. 'JFK'."),
    "destination": string("Destination airport, three-letter IATA code, e.g. 'LAX'."),
    "date": string("Travel date as YYYY-MM-DD, e.g. '2024-05-01'."),
}


# -- lookups -------------------------------------------------------------------------


def _user(world: AirlineWorld, user_id: str) -> Record:
    if user_id not in world.users:
        raise ToolError(f"User {user_id} not found")
    return world.users[user_id]


def _reservation(world: AirlineWorld, reservation_id: str) -> Record:
    if reservation_id not in world.reservations:
        raise ToolError(f"Reservation {reservation_id} not found")
    return world.reservations[reservation_id]


def _flight_date(world: AirlineWorld, flight_number: str, date: str) -> Record:
    flight = world.flights.get(flight_number)
    if flight is None:
        raise ToolError(f"Flight {flight_number} not found")
    if date not in flight["dates"]:
        raise ToolError(f"Flight {flight_number} not found on date {date}")
    return flight["dates"][date]


_FIELDS: dict[str, dict[str, type]] = {
    "flight": {"flight_number": str, "date": str},
    "passenger": {"first_name": str, "last_name": str, "dob": str},
    "payment method": {"payment_id": str, "amount": int},
}


def _records(items: list[Any], what: str) -> list[dict]:
    """The list items as records with exactly the fields of `what`, of the right types.

    The schema lets any object through (`anyOf` with a free-form object, as the target's
    does); the target then parses each item into a model, which is what this does."""
    fields = _FIELDS[what]
    out = []
    for i, item in enumerate(items):
        missing = [k for k in fields if k not in item]
        if missing:
            raise ToolError(f"{what} {i} is missing field(s): {', '.join(missing)}")
        extra = [k for k in item if k not in fields]
        if extra:
            raise ToolError(f"{what} {i} has unknown field(s): {', '.join(extra)}")
        for k, t in fields.items():
            if type(item[k]) is not t:
                raise ToolError(f"{what} {i}: {k} must be a {t.__name__}, got {item[k]!r}")
        out.append({k: item[k] for k in fields})
    return out


def _direct_flights(world: AirlineWorld, origin: str | None, destination: str | None,
                    date: str, leave_after: str | None = None) -> list[Record]:
    found = []
    for f in world.flights.values():
        entry = f["dates"].get(date)
        if (
            entry is not None
            and entry["status"] == "available"
            and (origin is None or f["origin"] == origin)
            and (destination is None or f["destination"] == destination)
            and (leave_after is None or f["scheduled_departure_time_est"] >= leave_after)
        ):
            found.append({
                "flight_number": f["flight_number"],
                "origin": f["origin"],
                "destination": f["destination"],
                "status": "available",
                "scheduled_departure_time_est": f["scheduled_departure_time_est"],
                "scheduled_arrival_time_est": f["scheduled_arrival_time_est"],
                "date": None,
                "available_seats": dict(entry["available_seats"]),
                "prices": dict(entry["prices"]),
            })
    return found


def _charge_for_update(world: AirlineWorld, user_id: str, payment_id: str, amount: int) -> Record | None:
    """Charge (or refund, when negative) a change; the payment record, none when free."""
    user = world.users[user_id]
    method = user["payment_methods"].get(payment_id)
    if method is None:
        raise ToolError("Payment method not found")
    if method["source"] == "certificate":
        raise ToolError("Certificate cannot be used to update reservation")
    if method["source"] == "gift_card" and method["amount"] < amount:
        raise ToolError("Gift card balance is not enough")
    if method["source"] == "gift_card":
        world.edit("users", user_id)["payment_methods"][payment_id]["amount"] -= amount
    return {"payment_id": payment_id, "amount": amount} if amount != 0 else None


# -- tools ---------------------------------------------------------------------------


@tool(WRITE, function(
    "book_reservation",
    "Book a new reservation for a user and charge the listed payment methods.",
    {
        "user_id": string("Id of the user who books, e.g. 'sara_doe_496'."),
        "origin": string("Trip origin, IATA code, e.g. 'SFO'."),
        "destination": string("Trip destination, IATA code, e.g. 'JFK'."),
        "flight_type": string("Trip type.", enum=["round_trip", "one_way"]),
        "cabin": string("Cabin class for every flight.", enum=["business", "economy", "basic_economy"]),
        "flights": record_list("Every flight of the trip, in travel order.", "FlightInfo"),
        "passengers": record_list("Every passenger travelling.", "Passenger"),
        "payment_methods": record_list("Payment methods and the amount charged to each.", "Payment"),
        "total_baggages": integer("Number of checked bags in total."),
        "nonfree_baggages": integer("Number of checked bags that are paid for."),
        "insurance": string("Whether travel insurance is bought.", enum=["yes", "no"]),
    },
    defs={"FlightInfo": _FLIGHT_INFO, "Passenger": _PASSENGER, "Payment": _PAYMENT},
))
def book_reservation(world: AirlineWorld, user_id: str, origin: str, destination: str,
                     flight_type: str, cabin: str, flights: list, passengers: list,
                     payment_methods: list, total_baggages: int, nonfree_baggages: int,
                     insurance: str) -> Record:
    """Book a reservation: checks seats, prices and payments, charges the methods, returns the new
    reservation."""
    flights = _records(flights, "flight")
    passengers = _records(passengers, "passenger")
    payments = _records(payment_methods, "payment method")
    user = _user(world, user_id)
    reservation_id = next((r for r in NEW_RESERVATION_IDS if r not in world.reservations), None)
    if reservation_id is None:
        raise ToolError("Too many reservations")
    segments, dates, total = [], [], 0
    for info in flights:
        entry = _flight_date(world, info["flight_number"], info["date"])
        flight = world.flights[info["flight_number"]]
        if entry["status"] != "available":
            raise ToolError(f"Flight {info['flight_number']} not available on date {info['date']}")
        if entry["available_seats"][cabin] < len(passengers):
            raise ToolError(f"Not enough seats on flight {info['flight_number']}")
        price = entry["prices"][cabin]
        segments.append({"flight_number": info["flight_number"], "date": info["date"],
                         "price": price, "origin": flight["origin"],
                         "destination": flight["destination"]})
        dates.append(info)
        total += price * len(passengers)
    if insurance == "yes":
        total += INSURANCE_FEE * len(passengers)
    total += BAG_FEE * nonfree_baggages
    listed: set[Any] = set()
    for p in payments:
        method = user["payment_methods"].get(p["payment_id"])
        if method is None:
            raise ToolError(f"Payment method {p['payment_id']} not found")
        if p["payment_id"] in listed:  # twice, each part within a balance the sum exceeds
            raise ToolError(f"Payment method {p['payment_id']} is listed more than once")
        listed.add(p["payment_id"])
        if method["source"] in ("gift_card", "certificate") and method["amount"] < p["amount"]:
            raise ToolError(f"Not enough balance in payment method {p['payment_id']}")
    paid = sum(p["amount"] for p in payments)
    if paid != total:
        raise ToolError(f"Payment amount does not add up, total price is {total}, but paid {paid}")
    editable = world.edit("users", user_id)
    for p in payments:
        method = editable["payment_methods"][p["payment_id"]]
        if method["source"] == "gift_card":
            method["amount"] -= p["amount"]
        elif method["source"] == "certificate":
            del editable["payment_methods"][p["payment_id"]]
    for info in dates:
        world.edit("flights", info["flight_number"])["dates"][info["date"]]["available_seats"][cabin] -= len(passengers)
    reservation = {
        "reservation_id": reservation_id,
        "user_id": user_id,
        "origin": origin,
        "destination": destination,
        "flight_type": flight_type,
        "cabin": cabin,
        "flights": segments,
        "passengers": passengers,
        "payment_history": payments,
        "created_at": NOW,
        "total_baggages": total_baggages,
        "nonfree_baggages": nonfree_baggages,
        "insurance": insurance,
        "status": None,
    }
    world.insert("reservations", reservation_id, reservation)
    editable["reservations"].append(reservation_id)
    return reservation


calculate = calculate_tool()


@tool(WRITE, function(
    "cancel_reservation",
    "Cancel a whole reservation and refund every payment to its original method.",
    {"reservation_id": _RESERVATION_ID},
))
def cancel_reservation(world: AirlineWorld, reservation_id: str) -> Record:
    """Cancel a reservation, refunding every payment; returns the reservation."""
    _reservation(world, reservation_id)
    reservation = world.edit("reservations", reservation_id)
    refunds = [{"payment_id": p["payment_id"], "amount": -p["amount"]}
               for p in reservation["payment_history"]]
    reservation["payment_history"].extend(refunds)
    reservation["status"] = "cancelled"
    return reservation


@tool(READ, function(
    "get_reservation_details", "Look up a reservation by id.", {"reservation_id": _RESERVATION_ID},
))
def get_reservation_details(world: AirlineWorld, reservation_id: str) -> Record:
    """The reservation with this id."""
    return _reservation(world, reservation_id)


@tool(READ, function(
    "get_user_details",
    "Look up a user's profile: payment methods, membership, saved passengers, reservation ids.",
    {"user_id": string("User id, e.g. 'sara_doe_496'.")},
))
def get_user_details(world: AirlineWorld, user_id: str) -> Record:
    """The user with this id."""
    return _user(world, user_id)


@tool(READ, function("list_all_airports", "List every airport served, with its city.", {}))
def list_all_airports(world: AirlineWorld) -> list[Record]:
    """Every airport of the world, with its city."""
    return [{"iata": code, "city": city} for code, city in AIRPORTS]


@tool(READ, function(
    "search_direct_flight", "Find direct flights on sale between two airports on a date.", _SEARCH,
))
def search_direct_flight(world: AirlineWorld, origin: str, destination: str, date: str) -> list[Record]:
    """The direct flights on sale from `origin` to `destination` on `date`."""
    return _direct_flights(world, origin, destination, date)


@tool(READ, function(
    "search_onestop_flight",
    "Find pairs of connecting flights on sale between two airports on a date.",
    _SEARCH,
))
def search_onestop_flight(world: AirlineWorld, origin: str, destination: str, date: str) -> list[list[Record]]:
    """Pairs of flights on sale from `origin` to `destination` on `date` that connect."""
    pairs = []
    for first in _direct_flights(world, origin, None, date):
        first["date"] = date
        for second in _direct_flights(world, first["destination"], destination, date,
                                      leave_after=first["scheduled_arrival_time_est"]):
            second["date"] = date
            pairs.append([first, second])
    return pairs


@tool(WRITE, function(
    "send_certificate",
    "Issue a travel certificate of the given amount to a user. Only when the policy allows it.",
    {"user_id": string("Id of the user who receives it, e.g. 'sara_doe_496'."),
     "amount": integer("Certificate value in dollars.")},
))
def send_certificate(world: AirlineWorld, user_id: str, amount: int) -> str:
    """Add a travel certificate of `amount` dollars to the user's payment methods."""
    user = _user(world, user_id)
    for payment_id in NEW_CERTIFICATE_IDS:
        if payment_id not in user["payment_methods"]:
            world.edit("users", user_id)["payment_methods"][payment_id] = {
                "source": "certificate", "id": payment_id, "amount": amount,
            }
            return f"Certificate {payment_id} added to user {user_id} with amount {amount}."
    raise ToolError("Too many certificates")


transfer_to_human_agents = transfer_tool()


@tool(WRITE, function(
    "update_reservation_baggages",
    "Set a reservation's checked bags; bags beyond the allowance are charged to the payment method.",
    {
        "reservation_id": _RESERVATION_ID,
        "total_baggages": integer("New total number of checked bags."),
        "nonfree_baggages": integer("New number of paid checked bags."),
        "payment_id": _PAYMENT_ID,
    },
))
def update_reservation_baggages(world: AirlineWorld, reservation_id: str, total_baggages: int,
                                nonfree_baggages: int, payment_id: str) -> Record:
    """Set a reservation's checked bags, charging added paid bags to the payment method."""
    reservation = _reservation(world, reservation_id)
    _user(world, reservation["user_id"])
    price = BAG_FEE * max(0, nonfree_baggages - reservation["nonfree_baggages"])
    payment = _charge_for_update(world, reservation["user_id"], payment_id, price)
    reservation = world.edit("reservations", reservation_id)
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["total_baggages"] = total_baggages
    reservation["nonfree_baggages"] = nonfree_baggages
    return reservation


@tool(WRITE, function(
    "update_reservation_flights",
    "Replace a reservation's flights and/or cabin; the fare difference is charged or refunded.",
    {
        "reservation_id": _RESERVATION_ID,
        "cabin": _CABIN,
        "flights": record_list(
            "Every flight of the new itinerary, unchanged ones included, in travel order.",
            "FlightInfo",
        ),
        "payment_id": _PAYMENT_ID,
    },
    defs={"FlightInfo": _FLIGHT_INFO},
))
def update_reservation_flights(world: AirlineWorld, reservation_id: str, cabin: str,
                               flights: list, payment_id: str) -> Record:
    """Replace a reservation's flights and cabin, charging or refunding the fare difference."""
    flights = _records(flights, "flight")
    reservation = _reservation(world, reservation_id)
    _user(world, reservation["user_id"])
    n_pax = len(reservation["passengers"])
    total, segments = 0, []
    for info in flights:
        kept = next((s for s in reservation["flights"]
                     if s["flight_number"] == info["flight_number"] and s["date"] == info["date"]
                     and cabin == reservation["cabin"]), None)
        if kept is not None:  # an unchanged segment keeps the fare paid for it
            total += kept["price"] * n_pax
            segments.append(kept)
            continue
        entry = _flight_date(world, info["flight_number"], info["date"])
        flight = world.flights[info["flight_number"]]
        if entry["status"] != "available":
            raise ToolError(f"Flight {info['flight_number']} not available on date {info['date']}")
        if entry["available_seats"][cabin] < n_pax:
            raise ToolError(f"Not enough seats on flight {info['flight_number']}")
        segments.append({"flight_number": info["flight_number"], "date": info["date"],
                         "price": entry["prices"][cabin], "origin": flight["origin"],
                         "destination": flight["destination"]})
        total += entry["prices"][cabin] * n_pax
    total -= sum(s["price"] for s in reservation["flights"]) * n_pax
    payment = _charge_for_update(world, reservation["user_id"], payment_id, total)
    reservation = world.edit("reservations", reservation_id)
    if payment is not None:
        reservation["payment_history"].append(payment)
    reservation["flights"] = [dict(s) for s in segments]
    reservation["cabin"] = cabin
    return reservation


@tool(WRITE, function(
    "update_reservation_passengers",
    "Replace the passengers of a reservation (their number cannot change).",
    {"reservation_id": _RESERVATION_ID,
     "passengers": record_list("Every passenger of the reservation.", "Passenger")},
    defs={"Passenger": _PASSENGER},
))
def update_reservation_passengers(world: AirlineWorld, reservation_id: str, passengers: list) -> Record:
    """Replace a reservation's passengers (the same number of them)."""
    passengers = _records(passengers, "passenger")
    reservation = _reservation(world, reservation_id)
    if len(passengers) != len(reservation["passengers"]):
        raise ToolError("Number of passengers does not match")
    reservation = world.edit("reservations", reservation_id)
    reservation["passengers"] = passengers
    return reservation


@tool(READ, function(
    "get_flight_status",
    "The status of a flight on a date (available, on time, delayed, flying, landed, cancelled).",
    {"flight_number": string("Flight number, e.g. 'HAT001'."),
     "date": string("Flight date as YYYY-MM-DD.")},
))
def get_flight_status(world: AirlineWorld, flight_number: str, date: str) -> str:
    """The status of a flight on a date."""
    return _flight_date(world, flight_number, date)["status"]


TOOLS = Toolset([
    book_reservation, calculate, cancel_reservation, get_reservation_details, get_user_details,
    list_all_airports, search_direct_flight, search_onestop_flight, send_certificate,
    transfer_to_human_agents, update_reservation_baggages, update_reservation_flights,
    update_reservation_passengers, get_flight_status,
])

assert len(TOOLS) == 14 and set(CABINS) == {"business", "economy", "basic_economy"}
