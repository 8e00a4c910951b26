"""Seeded generation of consistent airline worlds.

`AirlineBuilder` makes the records (users, a hub-and-spoke flight network with dated
availability and prices, reservations priced and paid as the booking tool would) and keeps
them consistent: every reservation's flights exist on its dates, its payments add up to its
price, its user lists it. Task generators use the same builder to add the records a task
needs next to distractors; `generate_world` makes a whole world of a given size.

Lists an agent chooses from are in an order that says nothing of a task's answer: a user's
payment methods are shuffled, and the finished world lists its flights (the order search
results come in) shuffled, not in the order a task added them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from trace_gym.rng import Rng
from trace_gym.validation import require
from trace_gym.worlds import people
from trace_gym.worlds.airline.data import (
    AIRPORTS,
    BAG_FEE,
    CABINS,
    INSURANCE_FEE,
    NEW_CERTIFICATE_IDS,
    NEW_RESERVATION_IDS,
    TODAY,
    AirlineWorld,
    date_of,
    free_bags,
)
from trace_gym.worlds.world import Record

PRICE_RANGES = {"basic_economy": (50, 100), "economy": (100, 200), "business": (200, 500)}


@dataclass(frozen=True)
class AirlineWorldSize:
    """How big a generated airline world is. Small by default: reset cost bounds throughput."""

    users: int = 2
    """Users besides those a task adds."""
    airports: int = 4
    """Airports in the network, the hub included (3-20)."""
    direct_routes: int = 1
    """Spoke pairs linked by direct flights both ways (every spoke links to the hub)."""
    flights_per_route: int = 2
    """Direct flights per direction on each direct route."""
    first_day: int = 14
    """First day of May 2024 with scheduled flights (today is the 15th)."""
    days: int = 5
    """Consecutive days with scheduled flights."""
    reservations_per_user: int = 1
    """Reservations each generated user holds."""

    def __post_init__(self) -> None:
        def need(name: str, ok: bool, rule: str) -> None:
            require(self, name, ok, rule)

        need("users", self.users >= 0, "must be >= 0")
        need("airports", 3 <= self.airports <= len(AIRPORTS), f"must be in 3..{len(AIRPORTS)}")
        spokes = self.airports - 1
        need("direct_routes", 0 <= self.direct_routes <= spokes * (spokes - 1) // 2,
             f"must be in 0..{spokes * (spokes - 1) // 2} for {self.airports} airports")
        need("flights_per_route", 1 <= self.flights_per_route <= 5, "must be in 1..5")
        flights = 2 * spokes + 2 * self.direct_routes * self.flights_per_route
        need("direct_routes", flights <= 400,
             f"gives {flights} flights; at most 400 fit the flight numbers (HAT000-HAT999)")
        need("first_day", 1 <= self.first_day <= TODAY - 1, f"must be in 1..{TODAY - 1} (tasks need flown flights)")
        need("days", TODAY + 3 <= self.first_day + self.days - 1 <= 31,
             f"must reach at least May {TODAY + 3} (tasks need three days ahead) and end within May")
        need("reservations_per_user", 0 <= self.reservations_per_user <= 10, "must be in 0..10")

    @property
    def days_range(self) -> range:
        """The days of the month that have flights."""
        return range(self.first_day, self.first_day + self.days)


@lru_cache(maxsize=None)  # formatting costs more than the rest of a flight's times
def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}:00"


AIRPORT_CODES = tuple(code for code, _ in AIRPORTS)
RESERVED_IDS = frozenset(NEW_RESERVATION_IDS + NEW_CERTIFICATE_IDS)


@lru_cache(maxsize=None)
def _schedule(first_day: int, days: int) -> tuple[tuple[int, str, str], ...]:
    """(day, date, timestamp prefix) of each scheduled day: the same for every world of a
    size, and formatting them is a good part of a small world's cost."""
    return tuple((day, date_of(day), date_of(day) + "T") for day in range(first_day, first_day + days))


class AirlineBuilder:
    """Adds consistent records to a new airline world."""

    def __init__(self, rng: Rng, size: AirlineWorldSize = AirlineWorldSize(), network: bool = True) -> None:
        """`network=False` starts with airports but no flights: a task adds the few it needs."""
        self.rng = rng
        self.size = size
        self.world = AirlineWorld()
        self._names: set[tuple[str, str]] = set()
        self._ids: set[str] = set(RESERVED_IDS)
        airports = rng.sample(AIRPORT_CODES, size.airports)
        self.hub, self.spokes = airports[0], airports[1:]
        self._dates = _schedule(size.first_day, size.days)
        self._routes: dict[tuple[str, str], list[Record]] = {}
        if network:
            self._network()

    # -- flights ----------------------------------------------------------------------

    def _network(self) -> None:
        rng = self.rng
        for spoke in self.spokes:
            # Into the hub in the morning, out in the afternoon: one-stop trips connect.
            self.add_flight(spoke, self.hub, rng.integer(6 * 60, 10 * 60))
            self.add_flight(self.hub, spoke, rng.integer(13 * 60, 17 * 60))
        pairs = [(a, b) for i, a in enumerate(self.spokes) for b in self.spokes[i + 1:]]
        for a, b in rng.sample(pairs, self.size.direct_routes):
            for origin, dest in ((a, b), (b, a)):
                for _ in range(self.size.flights_per_route):
                    self.add_flight(origin, dest, rng.integer(6 * 60, 19 * 60))

    def add_flight(self, origin: str, destination: str, departure: int) -> Record:
        """Add a flight from `origin` to `destination` leaving at `departure` (minutes after
        midnight), on every scheduled day: flown, flying or due before now, and later on sale
        with seats and prices (or cancelled). Returns its record."""
        rng = self.rng
        number = people.unique_id(rng, self._ids, lambda r: "HAT" + r.digits(3))
        arrival = min(departure + rng.integer(60, 300), 23 * 60 + 55)
        dep, arr = _hhmm(departure), _hhmm(arrival)
        r = rng.random
        lo_b, lo_e, lo_x = (lo + int(r() * (hi - lo + 1)) - 15 for lo, hi in PRICE_RANGES.values())
        dates: dict[str, Record] = {}
        # Written for speed: flight dates are most of what a world is made of.
        for day, date, stamp in self._dates:
            if day > TODAY:
                if r() < 0.06:
                    dates[date] = {"status": "cancelled"}
                else:
                    dates[date] = {
                        "status": "available",
                        "available_seats": {"basic_economy": int(r() * 13), "economy": 2 + int(r() * 19),
                                            "business": 1 + int(r() * 10)},
                        "prices": {"basic_economy": lo_b + int(r() * 31), "economy": lo_e + int(r() * 31),
                                   "business": lo_x + int(r() * 31)},
                    }
            elif day < TODAY or arrival < 15 * 60:
                dates[date] = {"status": "landed", "actual_departure_time_est": stamp + dep,
                               "actual_arrival_time_est": stamp + arr}
            elif departure < 15 * 60:
                dates[date] = {"status": "flying", "actual_departure_time_est": stamp + dep,
                               "estimated_arrival_time_est": stamp + arr}
            else:
                dates[date] = {"status": "delayed" if r() < 0.3 else "on time",
                               "estimated_departure_time_est": stamp + dep,
                               "estimated_arrival_time_est": stamp + arr}
        flight = {
            "flight_number": number,
            "origin": origin,
            "destination": destination,
            "scheduled_departure_time_est": dep,
            "scheduled_arrival_time_est": arr,
            "dates": dates,
        }
        self.world.insert("flights", number, flight)
        self._routes.setdefault((origin, destination), []).append(flight)
        return flight

    def flights_between(self, origin: str, destination: str) -> list[Record]:
        """The flights of the direct route from `origin` to `destination` (none: an empty list)."""
        return list(self._routes.get((origin, destination), ()))

    def itineraries(self, origin: str, destination: str) -> list[list[Record]]:
        """Direct flights, else one-stop pairs through the hub."""
        direct = self._routes.get((origin, destination))
        if direct:
            return [[f] for f in direct]
        return [[a, b] for a in self._routes.get((origin, self.hub), ())
                for b in self._routes.get((self.hub, destination), ())]

    def price_of(self, flight: Record, date: str, cabin: str) -> int:
        """Today's fare, or for a date no longer on sale, a plausible fare paid back then."""
        entry = flight["dates"].get(date, {})
        if entry.get("status") == "available":
            return entry["prices"][cabin]
        return self.rng.integer(*PRICE_RANGES[cabin])

    # -- users ----------------------------------------------------------------------

    def add_user(self, membership: str | None = None, gift_card: bool | None = None,
                 certificate: bool | None = None) -> Record:
        """Add a customer with a random profile, address and payment methods (a credit card always;
        a gift card or certificate when asked, else at random); returns the user record."""
        rng = self.rng
        first, last = people.person_name(rng, self._names)
        user_id = people.unique_id(rng, self._ids, lambda r: f"{first.lower()}_{last.lower()}_{r.digits(4)}")
        methods: dict[str, Record] = {}

        def add_method(source: str, extra: dict) -> None:
            pid = people.unique_id(rng, self._ids, lambda r: f"{source}_{r.digits(7)}")
            methods[pid] = {"source": source, "id": pid, **extra}

        add_method("credit_card", {"brand": rng.choice(people.CARD_BRANDS), "last_four": rng.digits(4)})
        if rng.chance(0.3):
            add_method("credit_card", {"brand": rng.choice(people.CARD_BRANDS), "last_four": rng.digits(4)})
        if gift_card if gift_card is not None else rng.chance(0.6):
            add_method("gift_card", {"amount": float(rng.integer(50, 400))})
        if certificate if certificate is not None else rng.chance(0.3):
            add_method("certificate", {"amount": float(rng.choice((100, 150, 200, 250, 500)))})
        saved = []
        for _ in range(rng.integer(0, 2)):
            f, l = people.person_name(rng, self._names)
            saved.append({"first_name": f, "last_name": l, "dob": people.birth_date(rng)})
        user = {
            "user_id": user_id,
            "name": {"first_name": first, "last_name": last},
            "address": people.address(rng),
            "email": f"{first.lower()}.{last.lower()}{rng.digits(4)}@example.com",
            "dob": people.birth_date(rng),
            # Made cards first, then gift card and certificate: in that order, a method's
            # position would tell which kind a task asks for.
            "payment_methods": people.shuffled(rng, methods),
            "saved_passengers": saved,
            "membership": membership or rng.choice(("regular", "regular", "silver", "gold")),
            "reservations": [],
        }
        self.world.insert("users", user_id, user)
        return user

    def payment_ids(self, user: Record, source: str) -> list[str]:
        """The ids of the user's payment methods of one source (credit_card, gift_card, certificate)."""
        return [pid for pid, m in user["payment_methods"].items() if m["source"] == source]

    # -- reservations -------------------------------------------------------------------

    def add_reservation(
        self,
        user: Record,
        *,
        itinerary: list[Record] | None = None,
        origin: str | None = None,
        destination: str | None = None,
        day: int | None = None,
        return_day: int | None = None,
        flight_type: str | None = None,
        cabin: str | None = None,
        passengers: int | None = None,
        insurance: str | None = None,
        created_hours_ago: int | None = None,
        total_baggages: int | None = None,
    ) -> Record:
        """A reservation for `user`, priced and paid as the booking tool would have."""
        rng = self.rng
        days = self.size.days_range
        if itinerary is None:
            if origin is None or destination is None:
                origin, destination = rng.sample([self.hub, *self.spokes], 2)
            itinerary = rng.choice(self.itineraries(origin, destination))
        origin, destination = itinerary[0]["origin"], itinerary[-1]["destination"]
        flight_type = flight_type or rng.choice(("one_way", "one_way", "round_trip"))
        if day is None:
            day = rng.integer(days.start, days.stop - (3 if flight_type == "round_trip" else 1))
        legs = [(f, date_of(day)) for f in itinerary]
        if flight_type == "round_trip":
            back = rng.choice(self.itineraries(destination, origin))
            ret_day = return_day or min(day + rng.integer(1, 3), days.stop - 1)
            legs += [(f, date_of(ret_day)) for f in back]
        cabin = cabin or rng.weighted(CABINS, (2, 5, 2))
        n_pax = passengers or rng.weighted((1, 2, 3), (5, 3, 1))
        pax = [{"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
                "dob": user["dob"]}]
        for saved in user["saved_passengers"][: n_pax - 1]:
            pax.append(dict(saved))
        while len(pax) < n_pax:
            f, l = people.person_name(rng, self._names)
            pax.append({"first_name": f, "last_name": l, "dob": people.birth_date(rng)})
        insurance = insurance or ("yes" if rng.chance(0.35) else "no")
        allowance = free_bags(user["membership"], cabin, n_pax)
        total_bags = rng.integer(0, allowance + 1) if total_baggages is None else total_baggages
        nonfree = max(0, total_bags - allowance)
        segments = [
            {"flight_number": f["flight_number"], "date": date,
             "price": self.price_of(f, date, cabin), "origin": f["origin"],
             "destination": f["destination"]}
            for f, date in legs
        ]
        price = sum(s["price"] for s in segments) * n_pax
        price += (INSURANCE_FEE * n_pax if insurance == "yes" else 0) + BAG_FEE * nonfree
        if created_hours_ago is None:
            created_hours_ago = rng.integer(30, 24 * 20)
        created = _hours_before_now(created_hours_ago)
        # Any of the user's cards, not the first listed: paid always with the first, the other
        # card a task asks for would sit after it.
        card = rng.choice(self.payment_ids(user, "credit_card"))
        rid = people.unique_id(rng, self._ids, lambda r: r.letters(6, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"))
        reservation = {
            "reservation_id": rid,
            "user_id": user["user_id"],
            "origin": origin,
            "destination": destination,
            "flight_type": flight_type,
            "cabin": cabin,
            "flights": segments,
            "passengers": pax,
            "payment_history": [{"payment_id": card, "amount": price}],
            "created_at": created,
            "total_baggages": total_bags,
            "nonfree_baggages": nonfree,
            "insurance": insurance,
            "status": None,
        }
        self.world.insert("reservations", rid, reservation)
        user["reservations"].append(rid)
        return reservation

    def ensure_available(self, flight_number: str, date: str, seats: int = 9) -> Record:
        """Make the flight bookable on `date` with at least `seats` seats in every cabin."""
        flight = self.world.flights[flight_number]
        entry = flight["dates"][date]
        if entry["status"] != "available":
            rng = self.rng
            entry = flight["dates"][date] = {
                "status": "available",
                "available_seats": {c: seats for c in CABINS},
                "prices": {c: rng.integer(*PRICE_RANGES[c]) for c in CABINS},
            }
        for cabin in CABINS:
            entry["available_seats"][cabin] = max(entry["available_seats"][cabin], seats)
        return entry

    def set_status(self, flight_number: str, date: str, status: str) -> None:
        """Give a flight date a status without seats or prices (e.g. 'cancelled')."""
        self.world.flights[flight_number]["dates"][date] = {"status": status}

    def build(self) -> AirlineWorld:
        """The finished world, frozen: later writes go through forks. Its flights are
        shuffled: a task adds the flight it needs (or one that makes a route's earliest or
        latest) after the network's, and search results list flights in table order."""
        self.world.tables["flights"] = people.shuffled(self.rng, self.world.flights)
        self.world.freeze()
        return self.world


@lru_cache(maxsize=None)
def _hours_before_now(hours: int) -> str:
    """'YYYY-MM-DDTHH:MM:SS', `hours` before 2024-05-15T15:00:00."""
    total = (TODAY - 1) * 24 + 15 - hours  # hours since 2024-05-01T00:00
    day, hour = divmod(total, 24)
    day += 1
    if day >= 1:
        return f"2024-05-{day:02d}T{hour:02d}:00:00"
    return f"2024-04-{30 + day:02d}T{hour:02d}:00:00"


def generate_world(rng: Rng, size: AirlineWorldSize = AirlineWorldSize()) -> AirlineWorld:
    """A consistent airline world of the given size."""
    builder = AirlineBuilder(rng, size)
    for _ in range(size.users):
        user = builder.add_user()
        for _ in range(size.reservations_per_user):
            builder.add_reservation(user)
    return builder.build()
