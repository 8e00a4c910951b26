"""The airline world: its tables, record shapes and the fixed facts its rules use.

Record shapes are tau2-bench's airline data model, so tool outputs read the same:

- users[user_id]: user_id, name{first_name,last_name}, address{address1,address2,city,
  country,state,zip}, email, dob, payment_methods{id: {source, id, brand+last_four |
  amount}}, saved_passengers[{first_name,last_name,dob}], membership, reservations[ids]
- flights[flight_number]: flight_number, origin, destination, scheduled_departure_time_est,
  scheduled_arrival_time_est, dates{YYYY-MM-DD: {status, ...}} where an "available" date has
  available_seats{cabin: n} and prices{cabin: dollars}, others have actual/estimated times
- reservations[id]: reservation_id, user_id, origin, destination, flight_type, cabin,
  flights[{flight_number,date,price,origin,destination}], passengers[...],
  payment_history[{payment_id, amount}], created_at, total_baggages, nonfree_baggages,
  insurance, status (None or "cancelled")
"""

from __future__ import annotations

from typing import ClassVar

from trace_gym.worlds.world import Record, World, copy_dict_values, copy_dicts, shaped_copy

# The simulated present. Flights before it have flown; the policy's 24-hour rule counts
# back from it.
NOW = "2024-05-15T15:00:00"
TODAY = 15  # day of May 2024
YEAR_MONTH = "2024-05"

CABINS = ("basic_economy", "economy", "business")
FLIGHT_TYPES = ("one_way", "round_trip")
MEMBERSHIPS = ("regular", "silver", "gold")

AIRPORTS = (
    ("SFO", "San Francisco"), ("JFK", "New York"), ("LAX", "Los Angeles"), ("ORD", "Chicago"),
    ("DFW", "Dallas"), ("DEN", "Denver"), ("SEA", "Seattle"), ("ATL", "Atlanta"),
    ("MIA", "Miami"), ("BOS", "Boston"), ("PHX", "Phoenix"), ("IAH", "Houston"),
    ("LAS", "Las Vegas"), ("MCO", "Orlando"), ("EWR", "Newark"), ("CLT", "Charlotte"),
    ("MSP", "Minneapolis"), ("DTW", "Detroit"), ("PHL", "Philadelphia"), ("LGA", "LaGuardia"),
)
CITY = dict(AIRPORTS)

# Free checked bags per passenger, by membership then cabin (the policy's table).
FREE_BAGS = {
    "regular": {"basic_economy": 0, "economy": 1, "business": 2},
    "silver": {"basic_economy": 1, "economy": 2, "business": 3},
    "gold": {"basic_economy": 2, "economy": 3, "business": 4},
}
BAG_FEE = 50
INSURANCE_FEE = 30
# Compensation certificates per passenger.
CANCELLED_FLIGHT_CERTIFICATE = 100
DELAYED_FLIGHT_CERTIFICATE = 50
MAX_PASSENGERS = 5

# Ids the booking and certificate tools hand out, in order (as tau2-bench does), so the
# gold actions and the agent's actions produce identical records.
NEW_RESERVATION_IDS = ("HATHAT", "HATHAU", "HATHAV")
NEW_CERTIFICATE_IDS = ("certificate_3221322", "certificate_3221323", "certificate_3221324")

# Cancellation reasons the insurance covers.
INSURED_REASONS = ("health", "weather")


def date_of(day: int) -> str:
    """The date (YYYY-MM-DD) of a day of the world's month."""
    return f"{YEAR_MONTH}-{day:02d}"


def day_of(date: str) -> int:
    """The day of the month of a date (YYYY-MM-DD)."""
    return int(date[-2:])


def free_bags(membership: str, cabin: str, passengers: int) -> int:
    """Free checked bags of a reservation: the allowance per passenger for the membership and
    cabin, times the passengers."""
    return FREE_BAGS[membership][cabin] * passengers


def has_flown(world: "AirlineWorld", reservation: Record) -> bool:
    """True when any segment's date is not open for booking or in flight any more."""
    for seg in reservation["flights"]:
        status = world.flights[seg["flight_number"]]["dates"].get(seg["date"], {}).get("status")
        if status in ("landed", "flying"):
            return True
    return False


# Deep copies of the two record shapes tools edit most, for `World.edit`.
copy_user = shaped_copy(
    frozenset(("user_id", "name", "address", "email", "dob", "payment_methods", "saved_passengers",
               "membership", "reservations")),
    {"name": dict.copy, "address": dict.copy, "payment_methods": copy_dict_values,
     "saved_passengers": copy_dicts, "reservations": list.copy})
copy_reservation = shaped_copy(
    frozenset(("reservation_id", "user_id", "origin", "destination", "flight_type", "cabin", "flights",
               "passengers", "payment_history", "created_at", "total_baggages", "nonfree_baggages",
               "insurance", "status")),
    {"flights": copy_dicts, "passengers": copy_dicts, "payment_history": copy_dicts})


class AirlineWorld(World):
    """An airline world: users, flights and reservations (record shapes in the module docstring)."""

    TABLES: ClassVar[tuple[str, ...]] = ("users", "flights", "reservations")
    COPIES = {"users": copy_user, "reservations": copy_reservation}

    __slots__ = ()

    @property
    def users(self) -> dict[str, Record]:
        """User id -> user record."""
        return self.tables["users"]

    @property
    def flights(self) -> dict[str, Record]:
        """Flight number -> flight record, with its dated seats and prices."""
        return self.tables["flights"]

    @property
    def reservations(self) -> dict[str, Record]:
        """Reservation id -> reservation record."""
        return self.tables["reservations"]
