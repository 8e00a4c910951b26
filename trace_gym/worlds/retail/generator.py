"""Seeded generation of consistent retail worlds.

`RetailBuilder` makes products with variants (options, availability, price), users with
payment methods, and orders whose items are real variants, whose payments add up and whose
fulfilments match their status. Task generators add the records a task needs through the
same builder; `generate_world` makes a whole world of a given size.

Lists an agent chooses from are in an order that says nothing of a task's answer: a variant
a task adds takes a random place among the product's variants, and a user's payment methods
are shuffled.
"""

from __future__ import annotations

from dataclasses import dataclass

from trace_gym.rng import Rng
from trace_gym.validation import require
from trace_gym.worlds import people
from trace_gym.worlds.retail.data import CANCEL_REASONS, CATALOGUE, RetailWorld
from trace_gym.worlds.world import Record


@dataclass(frozen=True)
class RetailWorldSize:
    """How big a generated retail world is. Small by default: reset cost bounds throughput."""

    users: int = 2
    """Users besides those a task adds."""
    products: int = 6
    """Product types in the store (at most the catalogue's 16)."""
    variants: int = 6
    """Variants (items) per product, at most."""
    orders_per_user: int = 1
    """Orders each generated user holds."""

    def __post_init__(self) -> None:
        def need(name: str, ok: bool, rule: str) -> None:
            require(self, name, ok, rule)

        need("users", self.users >= 0, "must be >= 0")
        need("products", 3 <= self.products <= len(CATALOGUE), f"must be in 3..{len(CATALOGUE)}")
        need("variants", 3 <= self.variants <= 12, "must be in 3..12")
        need("orders_per_user", 0 <= self.orders_per_user <= 10, "must be in 0..10")


class RetailBuilder:
    """Adds consistent records to a new retail world."""

    def __init__(self, rng: Rng, size: RetailWorldSize = RetailWorldSize(), products: bool = True) -> None:
        """`products=False` starts with an empty store: a task adds the few products it needs."""
        self.rng = rng
        self.size = size
        self.world = RetailWorld()
        self._names: set[tuple[str, str]] = set()
        self._ids: set[str] = set()
        if products:
            for name in rng.sample(sorted(CATALOGUE), size.products):
                self.add_product(name)

    # -- products ------------------------------------------------------------------

    def add_product(self, name: str, variants: int | None = None) -> Record:
        """A product with up to `variants` variants (default: the size's; a task whose agent
        never sees the store may need only the ones it orders)."""
        rng = self.rng
        r, ids = rng.random, self._ids
        base, options = CATALOGUE[name]
        names, values = tuple(options), tuple(options.values())
        product_id = people.unique_id(rng, ids, lambda g: g.digits(10))
        made: dict[str, Record] = {}
        combos: set[tuple[str, ...]] = set()
        # Written for speed: variants are most of what a retail world is made of.
        for _ in range(self.size.variants if variants is None else variants):
            combo = tuple([vals[int(r() * len(vals))] for vals in values])
            if combo in combos:
                continue
            combos.add(combo)
            item_id = str(int(r() * 10**10)).zfill(10)
            while item_id in ids:
                item_id = str(int(r() * 10**10)).zfill(10)
            ids.add(item_id)
            made[item_id] = {
                "item_id": item_id,
                "options": dict(zip(names, combo)),
                "available": r() < 0.75,
                "price": round(base * (0.8 + 0.4 * r()), 2),
            }
        product = {"name": name, "product_id": product_id, "variants": made}
        self.world.insert("products", product_id, product)
        return product

    def add_variant(self, product: Record, options: dict[str, str], available: bool | None = True) -> Record:
        """A variant with exactly these options (for a task that needs one to exist), at a
        random place among the product's variants. An existing one is made `available` as
        asked (None leaves it as it is) and stays where it is."""
        for v in product["variants"].values():
            if v["options"] == options:
                if available is not None:
                    v["available"] = available
                return v
        if available is None:
            available = self.rng.chance(0.5)
        base = CATALOGUE[product["name"]][0]
        item_id = people.unique_id(self.rng, self._ids, lambda r: r.digits(10))
        variant = {"item_id": item_id, "options": dict(options), "available": available,
                   "price": round(base * (0.8 + 0.4 * self.rng.random()), 2)}
        # At a random place, not appended: a task adds the variant it needs and then its near
        # misses, so the end of the list would tell an agent which one is right.
        variants = list(product["variants"].items())
        variants.insert(self.rng.below(len(variants) + 1), (item_id, variant))
        product["variants"] = dict(variants)
        return variant

    # -- users ---------------------------------------------------------------------

    def add_user(self, gift_card_balance: float | None = None, paypal: bool | None = None) -> Record:
        """Add a customer with a random profile, address and payment methods (a credit card always;
        PayPal and a gift card with this balance when asked, else at random); returns the user
        record."""
        rng = self.rng
        first, last = people.person_name(rng, self._names)
        user_id = people.unique_id(rng, self._ids, lambda r: f"{first.lower()}_{last.lower()}_{r.digits(4)}")
        methods: dict[str, Record] = {}

        def add_method(source: str, extra: dict) -> None:
            pid = people.unique_id(rng, self._ids, lambda r: f"{source}_{r.digits(7)}")
            methods[pid] = {"source": source, "id": pid, **extra}

        add_method("credit_card", {"brand": rng.choice(people.CARD_BRANDS), "last_four": rng.digits(4)})
        if paypal if paypal is not None else rng.chance(0.4):
            add_method("paypal", {})
        if gift_card_balance is not None or rng.chance(0.5):
            balance = gift_card_balance if gift_card_balance is not None else float(rng.integer(0, 300))
            add_method("gift_card", {"balance": balance})
        user = {
            "user_id": user_id,
            "name": {"first_name": first, "last_name": last},
            "address": people.address(rng),
            "email": f"{first.lower()}.{last.lower()}{rng.digits(4)}@example.com",
            # Made card first, then PayPal and gift card: in that order, a method's position
            # would tell which kind a task asks for.
            "payment_methods": people.shuffled(rng, methods),
            "orders": [],
        }
        self.world.insert("users", user_id, user)
        return user

    def payment_ids(self, user: Record, source: str) -> list[str]:
        """The ids of the user's payment methods of one source (credit_card, paypal, gift_card)."""
        return [pid for pid, m in user["payment_methods"].items() if m["source"] == source]

    # -- orders --------------------------------------------------------------------

    def add_order(self, user: Record, *, status: str | None = None,
                  items: list[tuple[Record, Record]] | None = None,
                  payment_id: str | None = None) -> Record:
        """An order of `items` ((product, variant) pairs; random when None)."""
        rng = self.rng
        if items is None:
            products = list(self.world.products.values())
            items = []
            for product in rng.sample(products, rng.weighted((1, 2, 3), (4, 4, 2))):
                items.append((product, rng.choice(list(product["variants"].values()))))
        status = status or rng.weighted(("pending", "processed", "delivered", "cancelled"), (3, 2, 4, 1))
        order_id = people.unique_id(rng, self._ids, lambda r: "#W" + r.digits(7))
        lines = [
            {"name": p["name"], "product_id": p["product_id"], "item_id": v["item_id"],
             "price": v["price"], "options": dict(v["options"])}
            for p, v in items
        ]
        total = round(sum(line["price"] for line in lines), 2)
        if payment_id is None:
            payment_id = rng.choice([pid for pid, m in user["payment_methods"].items()
                                     if m["source"] != "gift_card"])
        order = {
            "order_id": order_id,
            "user_id": user["user_id"],
            "address": dict(user["address"]),
            "items": lines,
            "fulfillments": [],
            "status": status,
            "payment_history": [{"transaction_type": "payment", "amount": total,
                                 "payment_method_id": payment_id}],
        }
        if status in ("processed", "delivered"):
            order["fulfillments"] = [{"tracking_id": [rng.digits(12)],
                                      "item_ids": [line["item_id"] for line in lines]}]
        if status == "cancelled":
            order["cancel_reason"] = rng.choice(CANCEL_REASONS)
            order["payment_history"].append({"transaction_type": "refund", "amount": total,
                                             "payment_method_id": payment_id})
        self.world.insert("orders", order_id, order)
        user["orders"].append(order_id)
        return order

    def build(self) -> RetailWorld:
        """The finished world, frozen: later writes go through forks."""
        self.world.freeze()
        return self.world


def generate_world(rng: Rng, size: RetailWorldSize = RetailWorldSize()) -> RetailWorld:
    """A consistent retail world of the given size."""
    builder = RetailBuilder(rng, size)
    for _ in range(size.users):
        user = builder.add_user()
        for _ in range(size.orders_per_user):
            builder.add_order(user)
    return builder.build()
