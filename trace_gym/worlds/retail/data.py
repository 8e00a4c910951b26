"""The retail world: its tables, record shapes and product catalogue.

Record shapes are tau2-bench's retail data model, so tool outputs read the same:

- users[user_id]: user_id, name{first_name,last_name}, address{address1,address2,city,
  country,state,zip}, email, payment_methods{id: {source, id, brand+last_four | balance}},
  orders[ids]
- products[product_id]: name, product_id, variants{item_id: {item_id, options{name: value},
  available, price}}
- orders[order_id]: order_id, user_id, address, items[{name,product_id,item_id,price,options}],
  fulfillments[{tracking_id[], item_ids[]}], status, payment_history[{transaction_type,
  amount, payment_method_id}], and once set: cancel_reason, exchange_items,
  exchange_new_items, exchange_payment_method_id, exchange_price_difference, return_items,
  return_payment_method_id
"""

from __future__ import annotations

from typing import ClassVar

from trace_gym.worlds.world import Record, World, copy_dict_values, copy_dicts, shaped_copy

ORDER_STATUSES = ("pending", "processed", "delivered", "cancelled")
CANCEL_REASONS = ("no longer needed", "ordered by mistake")

# name -> (base price, {option: values})
CATALOGUE: dict[str, tuple[float, dict[str, tuple[str, ...]]]] = {
    "T-Shirt": (25.0, {"color": ("red", "blue", "black", "white", "green"),
                       "size": ("S", "M", "L", "XL"), "material": ("cotton", "polyester")}),
    "Running Shoes": (95.0, {"size": ("7", "8", "9", "10", "11"), "color": ("black", "white", "red"),
                             "material": ("mesh", "synthetic")}),
    "Water Bottle": (22.0, {"capacity": ("500ml", "750ml", "1000ml"),
                            "material": ("glass", "plastic", "stainless steel"),
                            "color": ("blue", "black", "green")}),
    "Desk Lamp": (48.0, {"color": ("black", "white", "silver"), "brightness": ("low", "medium", "high"),
                         "power source": ("USB", "AC adapter", "battery")}),
    "Backpack": (70.0, {"color": ("black", "grey", "navy", "green"), "size": ("small", "medium", "large"),
                        "material": ("nylon", "polyester", "leather")}),
    "Bluetooth Speaker": (85.0, {"color": ("black", "blue", "red"),
                                 "battery life": ("10 hours", "20 hours"),
                                 "water resistance": ("yes", "no")}),
    "Wireless Earbuds": (120.0, {"color": ("black", "white", "blue"),
                                 "battery life": ("4 hours", "6 hours", "8 hours"),
                                 "water resistance": ("IPX4", "IPX7", "not resistant")}),
    "Coffee Maker": (110.0, {"color": ("black", "stainless steel", "white"),
                             "capacity": ("1 cup", "4 cups", "8 cups", "12 cups"),
                             "type": ("drip", "espresso", "french press")}),
    "Laptop": (1100.0, {"screen size": ("13-inch", "15-inch", "17-inch"), "processor": ("i5", "i7", "i9"),
                        "ram": ("8GB", "16GB", "32GB"), "storage": ("256GB SSD", "512GB SSD", "1TB SSD")}),
    "Yoga Mat": (35.0, {"thickness": ("4mm", "6mm", "8mm"), "material": ("PVC", "TPE", "natural rubber"),
                        "color": ("blue", "purple", "pink", "green")}),
    "Office Chair": (240.0, {"material": ("mesh", "leather", "fabric"), "color": ("black", "gray", "blue"),
                             "armrest": ("fixed", "adjustable", "none")}),
    "Sunglasses": (60.0, {"frame color": ("black", "brown", "silver"), "lens color": ("black", "green", "brown"),
                          "lens type": ("polarized", "non-polarized")}),
    "Hiking Boots": (150.0, {"size": ("7", "8", "9", "10", "11", "12"), "material": ("leather", "synthetic"),
                             "waterproof": ("yes", "no")}),
    "Electric Kettle": (45.0, {"capacity": ("1L", "1.5L", "2L"),
                               "material": ("plastic", "stainless steel", "glass"),
                               "color": ("white", "black", "silver")}),
    "Mechanical Keyboard": (130.0, {"switch type": ("linear", "tactile", "clicky"),
                                    "backlight": ("none", "white", "RGB"),
                                    "size": ("full size", "80%", "60%")}),
    "Smart Watch": (280.0, {"color": ("black", "silver", "gold"), "band material": ("silicone", "leather", "metal"),
                            "display": ("AMOLED", "LCD")}),
}


# Deep copies of the two record shapes tools edit, for `World.edit`.
_ID_LISTS = ("exchange_items", "exchange_new_items", "return_items")
copy_user = shaped_copy(
    frozenset(("user_id", "name", "address", "email", "payment_methods", "orders")),
    {"name": dict.copy, "address": dict.copy, "payment_methods": copy_dict_values, "orders": list.copy})
copy_order = shaped_copy(
    frozenset(("order_id", "user_id", "address", "items", "fulfillments", "status", "payment_history")),
    {"address": dict.copy,
     "items": lambda items: [dict(line, options=line["options"].copy()) for line in items],
     "fulfillments": lambda fs: [{"tracking_id": f["tracking_id"].copy(), "item_ids": f["item_ids"].copy()}
                                 for f in fs],
     "payment_history": copy_dicts,
     **{name: list.copy for name in _ID_LISTS}},
    optional=frozenset(("cancel_reason", "exchange_payment_method_id", "exchange_price_difference",
                        "return_payment_method_id", *_ID_LISTS)))


class RetailWorld(World):
    """A retail world: users, products with variants, and orders (record shapes in the module docstring)."""

    TABLES: ClassVar[tuple[str, ...]] = ("users", "products", "orders")
    COPIES = {"users": copy_user, "orders": copy_order}

    __slots__ = ()

    @property
    def users(self) -> dict[str, Record]:
        """User id -> user record."""
        return self.tables["users"]

    @property
    def products(self) -> dict[str, Record]:
        """Product id -> product record, with its variants."""
        return self.tables["products"]

    @property
    def orders(self) -> dict[str, Record]:
        """Order id -> order record."""
        return self.tables["orders"]

    def item(self, item_id: str) -> Record | None:
        """The variant with this item id, in whichever product holds it."""
        for product in self.products.values():
            variant = product["variants"].get(item_id)
            if variant is not None:
                return variant
        return None


def order_total(order: Record) -> float:
    """An order's total: the sum of its items' prices, rounded to cents."""
    return round(sum(i["price"] for i in order["items"]), 2)


def describe_options(options: dict[str, str]) -> str:
    """A variant's options as text, e.g. 'color red, size M'."""
    return ", ".join(f"{k} {v}" for k, v in options.items())
