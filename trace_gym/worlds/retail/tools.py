"""The retail tools: tau2-bench's 16 tools, same names, parameters, types and nesting,
same semantics (what is checked, what is written, the "Error: ..." style).

One deliberate difference: when several items of a pending order are modified at once,
each item takes its own new variant's price and options (the target's code gives every
item the last variant's).
"""

from __future__ import annotations

import json

from trace_gym.errors import ToolError
from trace_gym.schema import function, string, string_list
from trace_gym.tools import ToolKind, Toolset, tool
from trace_gym.worlds.generic_tools import calculate_tool, transfer_tool
from trace_gym.worlds.retail.data import CANCEL_REASONS, RetailWorld
from trace_gym.worlds.world import Record

READ, WRITE = ToolKind.READ, ToolKind.WRITE

_ORDER_ID = string("Order id, starting with '#', e.g. '#W0000000'.")
_USER_ID = string("User id, e.g. 'sara_doe_496'.")
_PAYMENT_METHOD_ID = string(
    "Id of a payment method in the user's profile, e.g. 'gift_card_0000000' or "
    "'credit_card_0000000'."
)
_ADDRESS = {
    "address1": string("First address line, e.g. '123 Main St'."),
    "address2": string("Second address line, e.g. 'Apt 1', or ''."),
    "city": string("City, e.g. 'San Francisco'."),
    "state": string("State, e.g. 'CA'."),
    "country": string("Country, e.g. 'USA'."),
    "zip": string("Zip code, e.g. '12345'."),
}
_ADDRESS_ORDER = ("address1", "address2", "city", "country", "state", "zip")


def _order(world: RetailWorld, order_id: str) -> Record:
    if order_id not in world.orders:
        raise ToolError("Order not found")
    return world.orders[order_id]


def _user(world: RetailWorld, user_id: str) -> Record:
    if user_id not in world.users:
        raise ToolError("User not found")
    return world.users[user_id]


def _payment_method(world: RetailWorld, user_id: str, payment_method_id: str) -> Record:
    method = _user(world, user_id)["payment_methods"].get(payment_method_id)
    if method is None:
        raise ToolError("Payment method not found")
    return method


def _variant(world: RetailWorld, product_id: str, item_id: str) -> Record:
    product = world.products.get(product_id)
    if product is None:
        raise ToolError("Product not found")
    if item_id not in product["variants"]:
        raise ToolError("Variant not found")
    return product["variants"][item_id]


def _check_items_in_order(order: Record, item_ids: list[str], message: str) -> None:
    ordered = [i["item_id"] for i in order["items"]]
    for item_id in item_ids:
        if item_ids.count(item_id) > ordered.count(item_id):
            raise ToolError(message.format(item_id=item_id))


def _price_difference(world: RetailWorld, order: Record, item_ids: list[str],
                      new_item_ids: list[str], same_id_error: bool) -> tuple[float, list[Record]]:
    if len(item_ids) != len(new_item_ids):
        raise ToolError("The number of items to be exchanged should match")
    diff, variants = 0.0, []
    for item_id, new_item_id in zip(item_ids, new_item_ids):
        if same_id_error and item_id == new_item_id:
            raise ToolError("The new item id should be different from the old item id")
        item = next((i for i in order["items"] if i["item_id"] == item_id), None)
        if item is None:
            raise ToolError(f"Item {item_id} not found")
        variant = _variant(world, item["product_id"], new_item_id)
        if not variant["available"]:
            raise ToolError(f"New item {new_item_id} not found or available")
        diff += variant["price"] - item["price"]
        variants.append(variant)
    return round(diff, 2), variants


def _adjust_gift_card(world: RetailWorld, user_id: str, payment_method_id: str, delta: float) -> None:
    user = world.edit("users", user_id)
    method = user["payment_methods"][payment_method_id]
    method["balance"] = round(method["balance"] + delta, 2)


calculate = calculate_tool()


@tool(WRITE, function(
    "cancel_pending_order",
    "Cancel a pending order and refund it (gift cards at once, other methods in 5-7 business "
    "days). Explain the details and get the user's explicit yes first.",
    {"order_id": _ORDER_ID,
     "reason": string("Why: 'no longer needed' or 'ordered by mistake'.")},
))
def cancel_pending_order(world: RetailWorld, order_id: str, reason: str) -> Record:
    """Cancel a pending order for a valid reason, refunding its payments; returns the order."""
    order = _order(world, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError("Invalid reason")
    refunds = []
    for payment in order["payment_history"]:
        pid = payment["payment_method_id"]
        refunds.append({"transaction_type": "refund", "amount": payment["amount"], "payment_method_id": pid})
        if _payment_method(world, order["user_id"], pid)["source"] == "gift_card":
            _adjust_gift_card(world, order["user_id"], pid, payment["amount"])
    order = world.edit("orders", order_id)
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    order["payment_history"].extend(refunds)
    return order


@tool(WRITE, function(
    "exchange_delivered_order_items",
    "Exchange items of a delivered order for other variants of the same products (once per "
    "order). Explain the details and get the user's explicit yes first.",
    {
        "order_id": _ORDER_ID,
        "item_ids": string_list("Item ids to exchange; repeat an id to exchange several of it."),
        "new_item_ids": string_list(
            "Item ids to receive, position by position: each of the same product as the item "
            "it replaces."
        ),
        "payment_method_id": _PAYMENT_METHOD_ID,
    },
))
def exchange_delivered_order_items(world: RetailWorld, order_id: str, item_ids: list[str],
                                   new_item_ids: list[str], payment_method_id: str) -> Record:
    """Exchange items of a delivered order for other variants of the same products, settling the
    price difference with the payment method; returns the order."""
    order = _order(world, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be exchanged")
    _check_items_in_order(order, item_ids, "Number of {item_id} not found.")
    diff, _ = _price_difference(world, order, item_ids, new_item_ids, same_id_error=False)
    method = _payment_method(world, order["user_id"], payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff:
        raise ToolError("Insufficient gift card balance to pay for the price difference")
    order = world.edit("orders", order_id)
    order["status"] = "exchange requested"
    order["exchange_items"] = sorted(item_ids)
    order["exchange_new_items"] = sorted(new_item_ids)
    order["exchange_payment_method_id"] = payment_method_id
    order["exchange_price_difference"] = diff
    return order


@tool(READ, function(
    "find_user_id_by_name_zip",
    "Find a user id from first name, last name and zip code. Use it only when the user cannot "
    "be found by email.",
    {"first_name": string("First name, e.g. 'John'."),
     "last_name": string("Last name, e.g. 'Doe'."),
     "zip": string("Zip code, e.g. '12345'.")},
))
def find_user_id_by_name_zip(world: RetailWorld, first_name: str, last_name: str, zip: str) -> str:
    """The id of the user with this name and zip code."""
    for user_id, user in world.users.items():
        if (user["name"]["first_name"].lower() == first_name.lower()
                and user["name"]["last_name"].lower() == last_name.lower()
                and user["address"]["zip"] == zip):
            return user_id
    raise ToolError("User not found")


@tool(READ, function(
    "find_user_id_by_email", "Find a user id from an email address.",
    {"email": string("Email address, e.g. 'someone@example.com'.")},
))
def find_user_id_by_email(world: RetailWorld, email: str) -> str:
    """The id of the user with this email address."""
    for user_id, user in world.users.items():
        if user["email"].lower() == email.lower():
            return user_id
    raise ToolError("User not found")


@tool(READ, function(
    "get_order_details", "Look up an order: status, items, fulfilments, payments.",
    {"order_id": _ORDER_ID},
))
def get_order_details(world: RetailWorld, order_id: str) -> Record:
    """The order with this id."""
    return _order(world, order_id)


@tool(READ, function(
    "get_product_details", "Look up a product type and all its variants (items).",
    {"product_id": string("Product id, e.g. '6086499569' (not an item id).")},
))
def get_product_details(world: RetailWorld, product_id: str) -> Record:
    """The product with this id, with its variants."""
    product = world.products.get(product_id)
    if product is None:
        raise ToolError("Product not found")
    return product


@tool(READ, function(
    "get_item_details", "Look up one item (a variant of a product).",
    {"item_id": string("Item id, e.g. '6086499569' (not a product id).")},
))
def get_item_details(world: RetailWorld, item_id: str) -> Record:
    """The variant (item) with this id."""
    variant = world.item(item_id)
    if variant is None:
        raise ToolError("Item not found")
    return variant


@tool(READ, function(
    "get_user_details", "Look up a user's profile: address, payment methods, order ids.",
    {"user_id": _USER_ID},
))
def get_user_details(world: RetailWorld, user_id: str) -> Record:
    """The user with this id."""
    return _user(world, user_id)


@tool(READ, function(
    "list_all_product_types", "List every product type's name and product id.", {},
))
def list_all_product_types(world: RetailWorld) -> str:
    """Every product type's name and id, as JSON."""
    return json.dumps({p["name"]: p["product_id"] for p in world.products.values()}, sort_keys=True)


@tool(WRITE, function(
    "modify_pending_order_address",
    "Change the shipping address of a pending order. Explain the details and get the user's "
    "explicit yes first.",
    {"order_id": _ORDER_ID, **_ADDRESS},
))
def modify_pending_order_address(world: RetailWorld, order_id: str, address1: str, address2: str,
                                 city: str, state: str, country: str, zip: str) -> Record:
    """Change the shipping address of a pending order; returns the order."""
    order = _order(world, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    order = world.edit("orders", order_id)
    values = {"address1": address1, "address2": address2, "city": city, "state": state,
              "country": country, "zip": zip}
    order["address"] = {k: values[k] for k in _ADDRESS_ORDER}
    return order


@tool(WRITE, function(
    "modify_pending_order_items",
    "Change items of a pending order to other variants of the same products (once per "
    "order). Explain the details and get the user's explicit yes first.",
    {
        "order_id": _ORDER_ID,
        "item_ids": string_list("Item ids to change; repeat an id to change several of it."),
        "new_item_ids": string_list(
            "Item ids to change to, position by position: each of the same product as the "
            "item it replaces."
        ),
        "payment_method_id": _PAYMENT_METHOD_ID,
    },
))
def modify_pending_order_items(world: RetailWorld, order_id: str, item_ids: list[str],
                               new_item_ids: list[str], payment_method_id: str) -> Record:
    """Change items of a pending order to other variants of the same products, settling the price
    difference with the payment method; returns the order."""
    order = _order(world, order_id)
    if order["status"] != "pending":
        raise ToolError("Non-pending order cannot be modified")
    _check_items_in_order(order, item_ids, "{item_id} not found")
    diff, variants = _price_difference(world, order, item_ids, new_item_ids, same_id_error=True)
    method = _payment_method(world, order["user_id"], payment_method_id)
    if method["source"] == "gift_card" and method["balance"] < diff:
        raise ToolError("Insufficient gift card balance to pay for the new item")
    if method["source"] == "gift_card":
        _adjust_gift_card(world, order["user_id"], payment_method_id, -diff)
    order = world.edit("orders", order_id)
    order["payment_history"].append({
        "transaction_type": "payment" if diff > 0 else "refund",
        "amount": abs(diff),
        "payment_method_id": payment_method_id,
    })
    taken: set[int] = set()
    for item_id, variant in zip(item_ids, variants):
        index = next(i for i, line in enumerate(order["items"])
                     if line["item_id"] == item_id and i not in taken)
        taken.add(index)
        line = order["items"][index]
        line["item_id"] = variant["item_id"]
        line["price"] = variant["price"]
        line["options"] = dict(variant["options"])
    order["status"] = "pending (item modified)"
    return order


@tool(WRITE, function(
    "modify_pending_order_payment",
    "Pay a pending order with another payment method of the user (the first is refunded). "
    "Explain the details and get the user's explicit yes first.",
    {"order_id": _ORDER_ID, "payment_method_id": _PAYMENT_METHOD_ID},
))
def modify_pending_order_payment(world: RetailWorld, order_id: str, payment_method_id: str) -> Record:
    """Pay a pending order with another of the user's payment methods; returns the order."""
    order = _order(world, order_id)
    if "pending" not in order["status"]:
        raise ToolError("Non-pending order cannot be modified")
    method = _payment_method(world, order["user_id"], payment_method_id)
    history = order["payment_history"]
    if len(history) != 1 or history[0]["transaction_type"] != "payment":
        raise ToolError("There should be exactly one payment for a pending order")
    old_id = history[0]["payment_method_id"]
    if old_id == payment_method_id:
        raise ToolError("The new payment method should be different from the current one")
    amount = history[0]["amount"]
    if method["source"] == "gift_card" and method["balance"] < amount:
        raise ToolError("Insufficient gift card balance to pay for the order")
    order = world.edit("orders", order_id)
    order["payment_history"].extend([
        {"transaction_type": "payment", "amount": amount, "payment_method_id": payment_method_id},
        {"transaction_type": "refund", "amount": amount, "payment_method_id": old_id},
    ])
    if method["source"] == "gift_card":
        _adjust_gift_card(world, order["user_id"], payment_method_id, -amount)
    if _payment_method(world, order["user_id"], old_id)["source"] == "gift_card":
        _adjust_gift_card(world, order["user_id"], old_id, amount)
    return order


@tool(WRITE, function(
    "modify_user_address",
    "Change a user's default address. Explain the details and get the user's explicit yes first.",
    {"user_id": _USER_ID, **_ADDRESS},
))
def modify_user_address(world: RetailWorld, user_id: str, address1: str, address2: str,
                        city: str, state: str, country: str, zip: str) -> Record:
    """Change the user's default address; returns the user."""
    _user(world, user_id)
    user = world.edit("users", user_id)
    values = {"address1": address1, "address2": address2, "city": city, "state": state,
              "country": country, "zip": zip}
    user["address"] = {k: values[k] for k in _ADDRESS_ORDER}
    return user


@tool(WRITE, function(
    "return_delivered_order_items",
    "Request the return of items of a delivered order; the refund goes to the original "
    "payment method or a gift card. Explain the details and get the user's explicit yes first.",
    {
        "order_id": _ORDER_ID,
        "item_ids": string_list("Item ids to return; repeat an id to return several of it."),
        "payment_method_id": _PAYMENT_METHOD_ID,
    },
))
def return_delivered_order_items(world: RetailWorld, order_id: str, item_ids: list[str],
                                 payment_method_id: str) -> Record:
    """Return items of a delivered order, refunding them to the original payment method or a gift
    card; returns the order."""
    order = _order(world, order_id)
    if order["status"] != "delivered":
        raise ToolError("Non-delivered order cannot be returned")
    method = _payment_method(world, order["user_id"], payment_method_id)
    if method["source"] != "gift_card" and payment_method_id != order["payment_history"][0]["payment_method_id"]:
        raise ToolError("Payment method should be the original payment method")
    _check_items_in_order(order, item_ids, "Some item not found")
    order = world.edit("orders", order_id)
    order["status"] = "return requested"
    order["return_items"] = sorted(item_ids)
    order["return_payment_method_id"] = payment_method_id
    return order


transfer_to_human_agents = transfer_tool()


TOOLS = Toolset([
    calculate, cancel_pending_order, exchange_delivered_order_items, find_user_id_by_name_zip,
    find_user_id_by_email, get_order_details, get_product_details, get_item_details,
    get_user_details, list_all_product_types, modify_pending_order_address,
    modify_pending_order_items, modify_pending_order_payment, modify_user_address,
    return_delivered_order_items, transfer_to_human_agents,
])
