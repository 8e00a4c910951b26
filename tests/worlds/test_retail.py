"""The retail world: consistent generation, and tool semantics that follow tau2-bench's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trace_gym.rng import Rng
from trace_gym.worlds.retail import TOOLS, RetailBuilder, RetailWorldSize, generate_world
from trace_gym.worlds.retail.data import order_total


def run(world, name, **arguments):
    return TOOLS.execute(world, name, arguments)


@given(st.integers(0, 10**6))
def test_generated_worlds_are_consistent(seed):
    world = generate_world(Rng.from_seed(seed), RetailWorldSize(users=4))
    for oid, order in world.orders.items():
        assert oid in world.users[order["user_id"]]["orders"]
        for line in order["items"]:
            variant = world.products[line["product_id"]]["variants"][line["item_id"]]
            assert variant["options"] == line["options"] and variant["price"] == line["price"]
        assert order["payment_history"][0]["amount"] == order_total(order)
        assert order["payment_history"][0]["payment_method_id"] in world.users[order["user_id"]]["payment_methods"]
        assert bool(order["fulfillments"]) == (order["status"] in ("processed", "delivered"))
    ids = [i for p in world.products.values() for i in p["variants"]] + list(world.products)
    assert len(ids) == len(set(ids))


def _world(status):
    b = RetailBuilder(Rng.from_seed(1))
    user = b.add_user(gift_card_balance=500.0, paypal=True)
    order = b.add_order(user, status=status)
    return b.build(), user, order


def test_cancel_refunds_gift_card_at_once():
    world, user, order = _world("pending")
    gift = next(p for p, m in user["payment_methods"].items() if m["source"] == "gift_card")
    fork = world.fork()
    assert run(fork, "modify_pending_order_payment", order_id=order["order_id"], payment_method_id=gift).ok
    assert fork.users[user["user_id"]]["payment_methods"][gift]["balance"] == round(500.0 - order_total(order), 2)
    assert run(fork, "cancel_pending_order", order_id=order["order_id"], reason="no longer needed").ok
    assert fork.users[user["user_id"]]["payment_methods"][gift]["balance"] == 500.0
    assert run(fork, "cancel_pending_order", order_id=order["order_id"], reason="no longer needed").content == \
        "Error: Non-pending order cannot be cancelled"


def test_cancel_reason_must_be_allowed():
    world, _, order = _world("pending")
    assert run(world.fork(), "cancel_pending_order", order_id=order["order_id"], reason="changed my mind").content == \
        "Error: Invalid reason"


def test_return_refund_goes_to_original_method_or_gift_card():
    world, user, order = _world("delivered")
    original = order["payment_history"][0]["payment_method_id"]
    other = next(p for p, m in user["payment_methods"].items() if p != original and m["source"] != "gift_card")
    items = [order["items"][0]["item_id"]]
    assert run(world.fork(), "return_delivered_order_items", order_id=order["order_id"], item_ids=items,
               payment_method_id=other).content == "Error: Payment method should be the original payment method"
    fork = world.fork()
    assert run(fork, "return_delivered_order_items", order_id=order["order_id"], item_ids=items,
               payment_method_id=original).ok
    assert fork.orders[order["order_id"]]["status"] == "return requested"
    assert fork.orders[order["order_id"]]["return_items"] == items


def test_modify_items_prices_each_item_by_its_own_variant():
    b = RetailBuilder(Rng.from_seed(2))
    user = b.add_user(gift_card_balance=5000.0)
    products = list(b.world.products.values())[:2]
    picks = [(p, next(iter(p["variants"].values()))) for p in products]
    order = b.add_order(user, status="pending", items=picks)
    new = []
    for p, v in picks:
        other = {**v["options"], "zz": "1"}
        new.append(b.add_variant(p, other))
    world = b.build()
    fork = world.fork()
    card = order["payment_history"][0]["payment_method_id"]
    out = run(fork, "modify_pending_order_items", order_id=order["order_id"],
              item_ids=[v["item_id"] for _, v in picks], new_item_ids=[v["item_id"] for v in new],
              payment_method_id=card)
    assert out.ok
    lines = fork.orders[order["order_id"]]["items"]
    assert [line["price"] for line in lines] == [v["price"] for v in new]
    assert fork.orders[order["order_id"]]["status"] == "pending (item modified)"


def test_list_all_product_types_is_sorted_json():
    world, _, _ = _world("pending")
    import json
    listing = json.loads(run(world, "list_all_product_types").content)
    assert list(listing) == sorted(listing) and set(listing.values()) == set(world.products)
