"""Pools of names and addresses, and the draws of ids and orders, shared by the domain generators."""

from __future__ import annotations

from typing import Any

from trace_gym.rng import Rng

FIRST_NAMES = (
    "Aarav", "Amelia", "Anya", "Chen", "Daiki", "Emma", "Ethan", "Fatima", "Harper", "Ivan",
    "Juan", "Lei", "Liam", "Lucas", "Mei", "Mia", "Mohamed", "Noah", "Olivia", "Omar",
    "Raj", "Sofia", "Sophia", "Yara", "Yusuf", "Isabella", "James", "Aisha", "Mateo", "Nora",
    "Priya", "Hiroshi", "Lena", "Diego", "Zoe", "Kofi", "Ingrid", "Tariq", "Elena", "Marcus",
)
LAST_NAMES = (
    "Ahmed", "Brown", "Davis", "Garcia", "Gonzalez", "Hernandez", "Ito", "Johnson", "Kim",
    "Kovacs", "Lee", "Lopez", "Martin", "Moore", "Nguyen", "Patel", "Rossi", "Santos", "Silva",
    "Smith", "Sullivan", "Taylor", "Thomas", "Wilson", "Yamamoto", "Zhang", "Novak", "Okafor",
    "Larsen", "Moreau", "Fischer", "Khan", "Singh", "Costa", "Dubois", "Ivanova", "Murphy",
)
STREETS = (
    "Maple Avenue", "Oak Street", "Elm Street", "Pine Road", "Cedar Lane", "Hillcrest Drive",
    "Lakeview Drive", "Sunset Boulevard", "River Road", "Park Avenue", "Main Street",
    "Willow Way", "Chestnut Street", "Highland Avenue", "Broadway", "Spring Street",
)
# (city, state, zip prefix)
CITIES = (
    ("Austin", "TX", "787"), ("Boston", "MA", "021"), ("Chicago", "IL", "606"),
    ("Denver", "CO", "802"), ("Houston", "TX", "770"), ("Los Angeles", "CA", "900"),
    ("Miami", "FL", "331"), ("New York", "NY", "100"), ("Phoenix", "AZ", "850"),
    ("Portland", "OR", "972"), ("San Diego", "CA", "921"), ("San Francisco", "CA", "941"),
    ("Seattle", "WA", "981"), ("Charlotte", "NC", "282"), ("Columbus", "OH", "432"),
)
CARD_BRANDS = ("visa", "mastercard", "amex", "discover")


def person_name(rng: Rng, taken: set[tuple[str, str]]) -> tuple[str, str]:
    """A (first, last) name not yet in `taken` (added to it)."""
    while True:
        name = (rng.choice(FIRST_NAMES), rng.choice(LAST_NAMES))
        if name not in taken:
            taken.add(name)
            return name


def address(rng: Rng) -> dict[str, str]:
    """A random US street address (tau2-bench's address fields)."""
    city, state, zip_prefix = rng.choice(CITIES)
    return {
        "address1": f"{rng.integer(10, 999)} {rng.choice(STREETS)}",
        "address2": f"Suite {rng.integer(100, 999)}" if rng.chance(0.5) else "",
        "city": city,
        "country": "USA",
        "state": state,
        "zip": zip_prefix + rng.digits(2),
    }


TWO_DIGITS = tuple(f"{n:02d}" for n in range(100))  # a lookup costs less than formatting


def birth_date(rng: Rng, first_year: int = 1950, last_year: int = 2005) -> str:
    """A random date of birth (YYYY-MM-DD) between two years."""
    return f"{rng.integer(first_year, last_year)}-{TWO_DIGITS[rng.integer(1, 12)]}-{TWO_DIGITS[rng.integer(1, 28)]}"


def unique_id(rng: Rng, taken: set[str], make) -> str:
    """`make(rng)` until the id is new to `taken` (added to it)."""
    for _ in range(10_000):
        value = make(rng)
        if value not in taken:
            taken.add(value)
            return value
    raise RuntimeError(f"no free id left after 10,000 draws ({len(taken)} taken)")


def shuffled(rng: Rng, records: dict[str, Any]) -> dict[str, Any]:
    """The records, keyed as they are, in a random order: a list an agent chooses from must
    not be in the order a task added its records (the one it needs first, or last)."""
    items = list(records.items())
    rng.shuffle(items)
    return dict(items)
