"""Retail target tasks: what a customer contacts the store about, built over a seeded world.

Each request kind below makes the orders it needs with the world builder (next to
distractor orders of the same customer, sharing products), then writes what the scripted
customer knows, the gold writes, what must be said and the oracle's turns. Kinds that the
policy can forbid have a forbidden variant whose correct outcome is a refusal naming the
rule.
"""

from __future__ import annotations

from collections.abc import Callable

from trace_gym import capabilities as cap
from trace_gym.rng import Rng
from trace_gym.targets.common import (
    Drafting,
    agent_method,
    amount_text,
    describe_method,
    draft_requests,
    draw_kinds,
    expand_locates,
    give_everything,
    given_identity,
    given_intro,
    locate,
    money,
    record_fact,
    settle_vague,
    told,
)
from trace_gym.targets.config import TargetConfig
from trace_gym.targets.task import CustomerRequest, Step, TargetTask, call, say
from trace_gym.worlds import people
from trace_gym.worlds.retail import DOMAIN
from trace_gym.worlds.retail.data import CATALOGUE, RetailWorld, describe_options, order_total
from trace_gym.worlds.retail.generator import RetailBuilder, RetailWorldSize
from trace_gym.worlds.world import Record

REASON_PHRASES = {
    "no longer needed": "I don't need it anymore.",
    "ordered by mistake": "I ordered it by mistake.",
}


class Draft(Drafting):
    """What a retail request is drafted from: the world builder, the customer, the knobs, and the
    records and payment methods other requests already use."""

    builder: RetailBuilder
    RULE_WORDS = ("pending", "delivered", "balance")

    def __init__(self, builder: RetailBuilder, rng: Rng, config: TargetConfig, user: Record) -> None:
        super().__init__(rng=rng, config=config, user=user)
        self.builder = builder

    def method(self, source: str) -> Record:
        """The customer's first payment method of a source (credit_card, paypal, gift_card)."""
        return next(m for m in self.user["payment_methods"].values() if m["source"] == source)

    def order(self, status: str, n_items: int | None = None) -> Record:
        """A new order of the customer: `n_items` items of distinct products."""
        rng, b = self.rng, self.builder
        n = n_items or rng.integer(1, 3)
        products = rng.sample(list(b.world.products.values()), n)
        items = [(p, rng.choice(list(p["variants"].values()))) for p in products]
        card = self.method(rng.choice(("credit_card", "paypal")))
        order = b.add_order(self.user, status=status, items=items, payment_id=card["id"])
        self.used_records.add(order["order_id"])
        return order

    def distractor(self, like: Record) -> None:
        """Another order of the customer with a product of `like`, in another status."""
        line = like["items"][0]
        product = self.builder.world.products[line["product_id"]]
        status = self.rng.choice([s for s in ("pending", "processed", "delivered", "cancelled")
                                  if s != like["status"]])
        variant = self.rng.choice(list(product["variants"].values()))
        card = self.method("credit_card")
        self.builder.add_order(self.user, status=status, items=[(product, variant)], payment_id=card["id"])


def _items_text(order: Record) -> str:
    return ", ".join(f"{i['name']} ({describe_options(i['options'])})" for i in order["items"])


def _signature(order: Record) -> tuple:
    """How the customer describes an order: one item of it, by product and options (not by
    status: whether a request is allowed must come from the record, not from the customer)."""
    line = order["items"][0]
    return (line["name"], describe_options(line["options"]))


def _fits(order: Record, description: tuple) -> bool:
    product, options = description
    return any(i["name"] == product and describe_options(i["options"]) == options for i in order["items"])


def _find_order(d: Draft, order: Record, question: str) -> tuple[str, list[Step]]:
    known = d.knows_id()
    if known:
        fact = f"The order id is {order['order_id']}."
    else:
        name, options = _signature(order)
        fact = f"I don't have the order id. It's my order with the {name} ({options}) in it."
        d.vague[order["order_id"]] = _signature(order)
        d.distractor(order)
    return fact, [say(question), locate("orders", order["order_id"], known)]


def _refund_timing(method: Record) -> str:
    return "right away" if method["source"] == "gift_card" else "within 5 to 7 business days"


# -- request kinds -------------------------------------------------------------------


def cancel_order(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants an order cancelled; forbidden unless it is pending."""
    rng = d.rng
    status = rng.choice(("processed", "delivered")) if forbidden else "pending"
    order = d.order(status)
    oid, total = order["order_id"], order_total(order)
    reason = rng.choice(tuple(REASON_PHRASES))
    fact, find = _find_order(d, order, "Which order would you like to cancel? Please give me the order id.")
    request = CustomerRequest(
        kind="cancel_order",
        subject=oid,
        opening="Hi, I'd like to cancel an order.",
        instruction=f"Cancel order {oid} ({_items_text(order)}). Reason: {REASON_PHRASES[reason]}",
        facts={"order": fact, "reason": REASON_PHRASES[reason]},
        confirm=[oid],
        capabilities=[cap.PRECONDITION, cap.PRECISION],
    )
    plan = [*find, say("What is the reason for the cancellation?")]
    if forbidden:
        plan.append(say(f"I'm sorry, but order {oid} cannot be cancelled: it is {status}, and only "
                        f"pending orders can be cancelled."))
        d.forbid(request, ["pending"], [{"name": "cancel_pending_order", "arguments": {"order_id": oid}}], status,
                 fact=record_fact("order_status", status, "pending", "cancelled"))  # the rule's own words
        request.capabilities = [cap.PRECONDITION]
    else:
        method = d.user["payment_methods"][order["payment_history"][0]["payment_method_id"]]
        plan += [
            say(f"To confirm: I will cancel order {oid} ({_items_text(order)}) for the reason "
                f"'{reason}'. The {money(total)} paid will be refunded to {agent_method(method)} "
                f"{_refund_timing(method)}. Do you confirm (yes/no)?"),
            call("cancel_pending_order", order_id=oid, reason=reason),
            say(f"Order {oid} is cancelled; {money(total)} will be refunded {_refund_timing(method)}."),
        ]
        request.writes = [{"name": "cancel_pending_order", "arguments": {"order_id": oid, "reason": reason}}]
    request.plan = plan
    return request


def _variant_changes(d: Draft, order: Record, n_changes: int) -> list[tuple[Record, Record, Record, str, str]]:
    """For `n_changes` lines of the order: (line, product, new variant, option, new value),
    where the new variant differs from the line's in exactly that option and is available."""
    rng, b = d.rng, d.builder
    out = []
    for line in rng.sample(order["items"], n_changes):
        product = b.world.products[line["product_id"]]
        option = rng.choice(list(line["options"]))
        value = rng.choice([v for v in CATALOGUE[product["name"]][1][option] if v != line["options"][option]])
        wanted = dict(line["options"], **{option: value})
        variant = b.add_variant(product, wanted, available=True)
        others = [o for o in line["options"] if o != option]
        if others:  # a near miss: right new value, another option different
            other = rng.choice(others)
            alt = [v for v in CATALOGUE[product["name"]][1][other] if v != wanted[other]]
            b.add_variant(product, dict(wanted, **{other: rng.choice(alt)}), available=None)
        out.append((line, product, variant, option, value))
    return out


def _change_items(d: Draft, forbidden: bool, delivered: bool) -> CustomerRequest:
    rng = d.rng
    kind = "exchange_items" if delivered else "modify_items"
    verb = "exchange" if delivered else "change"
    good = "delivered" if delivered else "pending"
    status = rng.choice(("pending", "processed") if delivered else ("processed", "delivered")) if forbidden else good
    order = d.order(status, n_items=rng.integer(1, 3))
    oid = order["order_id"]
    changes = _variant_changes(d, order, 1 if len(order["items"]) == 1 or rng.chance(0.6) else 2)
    wants = "; and ".join(
        f"the {product['name']}: I'd like it with {option} {value} instead, everything else the same"
        for _, product, _, option, value in changes)
    fact, find = _find_order(d, order, f"Which order would you like to {verb}? Please give me the order id.")
    request = CustomerRequest(
        kind=kind,
        subject=oid,
        opening=f"Hi, I'd like to {verb} some items in one of my orders.",
        instruction=f"In order {oid}, {verb} {wants}.",
        facts={"order": fact, "items": wants[0].upper() + wants[1:] + "."},
        confirm=[oid, *(value for *_, value in changes)],
        capabilities=[cap.STRUCTURED, cap.PRECISION],
    )
    diff = round(sum(v["price"] - line["price"] for line, _, v, _, _ in changes), 2)
    gift = d.method("gift_card")
    if gift["id"] not in d.spent_methods and gift["balance"] >= diff and rng.chance(0.5):
        method = gift
        d.spent_methods.add(gift["id"])
    else:
        method = d.user["payment_methods"][order["payment_history"][0]["payment_method_id"]]
    request.facts["payment"] = f"Please use {describe_method(method)} for any difference."
    plan = [*find, say(f"What would you like to {verb}?")]
    if forbidden:
        plan.append(say(f"I'm sorry, but order {oid} is {status}, so its items cannot be "
                        f"{'exchanged: only delivered orders can be' if delivered else 'modified: only pending orders can be'}."))
        tool = "exchange_delivered_order_items" if delivered else "modify_pending_order_items"
        d.forbid(request, [good], [{"name": tool, "arguments": {"order_id": oid}}], status,
                 fact=record_fact("order_status", status, good))
        request.capabilities = [cap.PRECONDITION]
        request.plan = plan
        return request
    item_ids = [line["item_id"] for line, *_ in changes]
    new_ids = [v["item_id"] for _, _, v, _, _ in changes]
    summary = "; ".join(f"{p['name']} ({describe_options(line['options'])}) becomes item {v['item_id']} "
                        f"({describe_options(v['options'])})" for line, p, v, _, _ in changes)
    tool = "exchange_delivered_order_items" if delivered else "modify_pending_order_items"
    plan += [call("get_product_details", product_id=p["product_id"]) for _, p, *_ in changes]
    plan += [
        say("Which payment method should I use for the price difference?"),
        say(f"To confirm, in order {oid}: {summary}. The price difference of {money(abs(diff))} will "
            f"be {'charged to' if diff > 0 else 'refunded to'} {agent_method(method)}. This can only "
            f"be done once for the order, so please make sure these are all the items. Do you "
            f"confirm (yes/no)?"),
        call(tool, order_id=oid, item_ids=item_ids, new_item_ids=new_ids, payment_method_id=method["id"]),
        say(f"Done: the {'exchange' if delivered else 'change'} for order {oid} is in place."
            + (" You will receive an email about returning the old items." if delivered else "")),
    ]
    request.writes = [{"name": tool, "arguments": {"order_id": oid, "item_ids": item_ids,
                                                   "new_item_ids": new_ids, "payment_method_id": method["id"]}}]
    request.plan = plan
    return request


def modify_items(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants items of a pending order changed to other variants; forbidden unless the
    order is pending."""
    return _change_items(d, forbidden, delivered=False)


def exchange_items(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants items of a delivered order exchanged for other variants; forbidden unless
    the order is delivered."""
    return _change_items(d, forbidden, delivered=True)


def _address_text(a: dict[str, str]) -> str:
    line2 = f", {a['address2']}" if a["address2"] else ""
    return f"{a['address1']}{line2}, {a['city']}, {a['state']} {a['zip']}, {a['country']}"


def _address_args(a: dict[str, str]) -> dict[str, str]:
    return {k: a[k] for k in ("address1", "address2", "city", "state", "country", "zip")}


def modify_order_address(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants an order shipped to a new address; forbidden unless the order is pending."""
    rng = d.rng
    status = "delivered" if forbidden else "pending"
    order = d.order(status)
    oid = order["order_id"]
    new = people.address(rng)
    fact, find = _find_order(d, order, "Which order should go to a new address? Please give me the order id.")
    request = CustomerRequest(
        kind="modify_order_address",
        subject=oid,
        opening="Hi, I need to change the shipping address of one of my orders.",
        instruction=f"Ship order {oid} to {_address_text(new)}.",
        facts={"order": fact, "address": f"Please ship it to {_address_text(new)}."},
        confirm=[oid, new["address1"]],
        capabilities=[cap.PRECISION],
    )
    plan = [*find, say("What is the new shipping address?")]
    if forbidden:
        plan.append(say(f"I'm sorry, but order {oid} is already delivered, so its address cannot be "
                        f"changed: only pending orders can be."))
        d.forbid(request, ["pending"], [{"name": "modify_pending_order_address", "arguments": {"order_id": oid}}],
                 status, fact=record_fact("order_status", status, "pending"))
        request.capabilities = [cap.PRECONDITION]
    else:
        plan += [
            say(f"To confirm: order {oid} will ship to {_address_text(new)}. Do you confirm (yes/no)?"),
            call("modify_pending_order_address", order_id=oid, **_address_args(new)),
            say(f"Done: order {oid} will ship to the new address."),
        ]
        request.writes = [{"name": "modify_pending_order_address",
                           "arguments": {"order_id": oid, **_address_args(new)}}]
    request.plan = plan
    return request


def modify_order_payment(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants to pay with their gift card; it is forbidden when the balance does
    not cover the order. The gift card is this request's alone (`generate_task` keeps other
    requests from paying with it or refunding to it, which would change its balance)."""
    rng = d.rng
    order = d.order("pending")
    oid, total = order["order_id"], order_total(order)
    old = d.user["payment_methods"][order["payment_history"][0]["payment_method_id"]]
    gift = d.method("gift_card")
    if forbidden and gift["balance"] >= total:
        gift["balance"] = round(total * rng.integer(20, 90) / 100, 2)
    elif not forbidden and gift["balance"] < total:
        gift["balance"] = round(total + rng.integer(5, 100), 2)
    fact, find = _find_order(d, order, "Which order is this about? Please give me the order id.")
    request = CustomerRequest(
        kind="modify_order_payment",
        subject=oid,
        opening="Hi, I'd like to change how one of my orders is paid.",
        instruction=f"Pay order {oid} with {agent_method(gift)} instead of {agent_method(old)}.",
        facts={"order": fact, "payment": f"I'd like to pay with {describe_method(gift)} instead."},
        confirm=[oid],
        capabilities=[cap.PRECONDITION, cap.PRECISION],
    )
    plan = [*find, say("Which payment method would you like to use instead?")]
    if forbidden:
        plan.append(say(f"I'm sorry, but your gift card balance of {money(gift['balance'])} does not "
                        f"cover the order total of {money(total)}, so the payment cannot be switched to it."))
        d.forbid(request, ["balance"], [{"name": "modify_pending_order_payment", "arguments": {"order_id": oid}}],
                 order["status"], fact=record_fact("amount", amount_text(gift["balance"]), amount_text(total)))
        request.capabilities = [cap.PRECONDITION]
    else:
        plan += [
            say(f"To confirm: order {oid} ({money(total)}) will be paid with {agent_method(gift)}, and "
                f"{agent_method(old)} will be refunded {_refund_timing(old)}. Do you confirm (yes/no)?"),
            call("modify_pending_order_payment", order_id=oid, payment_method_id=gift["id"]),
            say(f"Done: order {oid} is now paid with {agent_method(gift)}."),
        ]
        request.writes = [{"name": "modify_pending_order_payment",
                           "arguments": {"order_id": oid, "payment_method_id": gift["id"]}}]
    request.plan = plan
    return request


def return_items(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants items of an order returned; forbidden unless the order is delivered."""
    rng = d.rng
    status = rng.choice(("pending", "processed")) if forbidden else "delivered"
    order = d.order(status, n_items=rng.integer(1, 3))
    oid = order["order_id"]
    lines = rng.sample(order["items"], rng.integer(1, len(order["items"])))
    names = " and the ".join(line["name"] for line in lines)
    original = d.user["payment_methods"][order["payment_history"][0]["payment_method_id"]]
    gift = d.method("gift_card")
    method = gift if gift["id"] not in d.spent_methods and rng.chance(0.4) else original
    refund = round(sum(line["price"] for line in lines), 2)
    fact, find = _find_order(d, order, "Which order is this about? Please give me the order id.")
    where = "my gift card" if method["source"] == "gift_card" else "the original payment method"
    request = CustomerRequest(
        kind="return_items",
        subject=oid,
        opening="Hi, I'd like to return some items I received.",
        instruction=f"Return the {names} from order {oid}; refund to {where}.",
        facts={"order": fact, "items": f"I'd like to return the {names}.",
               "payment": f"Please put the refund on {where}."},
        confirm=[oid, *(line["name"] for line in lines)],
        capabilities=[cap.PRECISION, cap.STRUCTURED],
    )
    plan = [*find, say("Which items would you like to return?")]
    if forbidden:
        plan.append(say(f"I'm sorry, but order {oid} is {status}, so it cannot be returned: only "
                        f"delivered orders can be."))
        d.forbid(request, ["delivered"], [{"name": "return_delivered_order_items", "arguments": {"order_id": oid}}],
                 status, fact=record_fact("order_status", status, "delivered"))
        request.capabilities = [cap.PRECONDITION]
    else:
        item_ids = [line["item_id"] for line in lines]
        plan += [
            say("Should the refund go to the original payment method or to a gift card?"),
            say(f"To confirm: return the {names} from order {oid}; {money(refund)} will be refunded "
                f"to {agent_method(method)}. Do you confirm (yes/no)?"),
            call("return_delivered_order_items", order_id=oid, item_ids=item_ids, payment_method_id=method["id"]),
            say(f"Done: the return is requested and {money(refund)} will be refunded to "
                f"{agent_method(method)}. You will receive an email with the return instructions."),
        ]
        request.writes = [{"name": "return_delivered_order_items",
                           "arguments": {"order_id": oid, "item_ids": item_ids, "payment_method_id": method["id"]}}]
        request.communicate = [told("amount", amount_text(refund))]
    request.plan = plan
    return request


def modify_user_address(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer wants their default address changed (never forbidden)."""
    new = people.address(d.rng)
    uid = d.user["user_id"]
    request = CustomerRequest(
        kind="modify_user_address",
        opening="Hi, I moved and would like to update my default address.",
        instruction=f"Change your default address to {_address_text(new)}.",
        facts={"address": f"My new address is {_address_text(new)}."},
        confirm=[new["address1"]],
        capabilities=[cap.PRECISION],
    )
    request.plan = [
        say("What is your new address?"),
        say(f"To confirm: your default address becomes {_address_text(new)}. Do you confirm (yes/no)?"),
        call("modify_user_address", user_id=uid, **_address_args(new)),
        say("Done: your default address is updated."),
    ]
    request.writes = [{"name": "modify_user_address", "arguments": {"user_id": uid, **_address_args(new)}}]
    return request


def order_info(d: Draft, forbidden: bool) -> CustomerRequest:
    """The customer asks about an order: its tracking number, or its total (never forbidden)."""
    rng = d.rng
    tracking = rng.chance(0.5)
    order = d.order(rng.choice(("processed", "delivered")) if tracking else rng.choice(("pending", "processed", "delivered")))
    oid, total = order["order_id"], order_total(order)
    fact, find = _find_order(d, order, "Which order is this about? Please give me the order id.")
    if tracking:
        number = order["fulfillments"][0]["tracking_id"][0]
        question, answer, info = ("what is the tracking number of one of my orders?",
                                  f"The tracking number of order {oid} is {number}.", told("token", number))
    else:
        question, answer, info = ("how much did I pay for one of my orders?",
                                  f"You paid {money(total)} for order {oid}.", told("amount", amount_text(total)))
    request = CustomerRequest(
        kind="order_info",
        subject=oid,
        opening=f"Hi, {question}",
        instruction=f"Ask {question.replace('my', 'your').rstrip('?')} (order {oid}).",
        facts={"order": fact},
        communicate=[info],
        capabilities=[cap.STRUCTURED],
    )
    request.plan = [*find, say(answer)]
    return request


KINDS: dict[str, Callable[[Draft, bool], CustomerRequest]] = {  # the drafter of each of DOMAIN.kinds
    "cancel_order": cancel_order,
    "modify_items": modify_items,
    "exchange_items": exchange_items,
    "modify_order_address": modify_order_address,
    "modify_order_payment": modify_order_payment,
    "return_items": return_items,
    "modify_user_address": modify_user_address,
    "order_info": order_info,
}
FORBIDDABLE = frozenset({"cancel_order", "modify_items", "exchange_items", "modify_order_address",
                         "modify_order_payment", "return_items"})


def generate_task(rng: Rng, config: TargetConfig,
                  size: RetailWorldSize = RetailWorldSize()) -> tuple[TargetTask, RetailWorld]:
    """A task and the world it is set in, from one random stream."""
    builder = RetailBuilder(rng, size)
    for _ in range(size.users):  # other customers
        other = builder.add_user()
        for _ in range(size.orders_per_user):
            builder.add_order(other)
    user = builder.add_user(gift_card_balance=float(rng.integer(20, 400)), paypal=True)
    draft = Draft(builder, rng, config, user)
    kinds = draw_kinds(rng, config, DOMAIN.kinds, limits={"modify_user_address": 1, "modify_order_payment": 1})
    if "modify_order_payment" in kinds:  # its gift card: no other request may change the balance
        draft.spent_methods.add(draft.method("gift_card")["id"])
    requests = draft_requests(draft, KINDS, FORBIDDABLE, kinds)
    for _ in range(config.distractors):
        subject = [o for o in user["orders"] if o in draft.used_records]
        if subject:
            draft.distractor(builder.world.orders[rng.choice(subject)])
        else:
            builder.add_order(user)
    rng.shuffle(user["orders"])
    world = builder.build()
    if config.opening == "given":
        give_everything(requests, "order", "The order id is {id}.")
    settle_vague(requests, draft, user["orders"], lambda oid, description: _fits(world.orders[oid], description),
                 "order", "The order id is {id}.")
    for request in requests:
        request.plan = expand_locates(request.plan, user["orders"], "get_order_details", "order_id")
    first, last = user["name"]["first_name"], user["name"]["last_name"]
    zip_code = user["address"]["zip"]
    name_zip = f"My name is {first} {last} and my zip code is {zip_code}."
    if rng.chance(0.75):
        identity = {"email": f"My email is {user['email']}.", "name_zip": name_zip}
        find_user = call("find_user_id_by_email", email=user["email"])
    else:
        identity = {"email": f"I don't remember which email I used. {name_zip}", "name_zip": name_zip}
        find_user = call("find_user_id_by_name_zip", first_name=first, last_name=last, zip=zip_code)
    task = TargetTask(
        domain=DOMAIN.name,
        user_id=user["user_id"],
        identity=identity,
        requests=requests,
        intro=[say("I can help with that. First I need to verify your identity: what is your email address?"),
               find_user, call("get_user_details", user_id=user["user_id"])],
        persona=f"You are {first} {last}, a customer of the store (email {user['email']}, zip {zip_code}).",
        opening=config.opening,
    )
    if config.opening == "given":
        task.identity = given_identity(task.identity, user["user_id"])
        task.intro = given_intro(user["user_id"])
    return task, world
