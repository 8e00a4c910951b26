"""The airline world: consistent generation, and tool semantics that follow tau2-bench's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trace_gym.errors import InvalidConfig
from trace_gym.rng import Rng
from trace_gym.worlds.airline import TOOLS, AirlineBuilder, AirlineWorldSize, generate_world
from trace_gym.worlds.airline.data import BAG_FEE, FREE_BAGS, INSURANCE_FEE, NOW


def run(world, name, **arguments):
    return TOOLS.execute(world, name, arguments)


@given(st.integers(0, 10**6))
def test_generated_worlds_are_consistent(seed):
    world = generate_world(Rng.from_seed(seed), AirlineWorldSize(users=4))
    for rid, res in world.reservations.items():
        assert rid in world.users[res["user_id"]]["reservations"]
        user = world.users[res["user_id"]]
        for seg in res["flights"]:
            flight = world.flights[seg["flight_number"]]
            assert seg["date"] in flight["dates"]
            assert (seg["origin"], seg["destination"]) == (flight["origin"], flight["destination"])
        n = len(res["passengers"])
        price = sum(s["price"] for s in res["flights"]) * n
        price += INSURANCE_FEE * n * (res["insurance"] == "yes")
        price += BAG_FEE * res["nonfree_baggages"]
        assert sum(p["amount"] for p in res["payment_history"]) == price
        allowance = FREE_BAGS[user["membership"]][res["cabin"]] * n
        assert res["nonfree_baggages"] == max(0, res["total_baggages"] - allowance)
        assert res["created_at"] < NOW
    for user in world.users.values():
        for rid in user["reservations"]:
            assert world.reservations[rid]["user_id"] == user["user_id"]
    for flight in world.flights.values():
        for entry in flight["dates"].values():
            if entry["status"] == "available":
                assert all(v >= 0 for v in entry["available_seats"].values())


def test_world_size_is_validated():
    with pytest.raises(InvalidConfig, match="airports"):
        AirlineWorldSize(airports=1)
    with pytest.raises(InvalidConfig, match="days"):
        AirlineWorldSize(days=2)


def _world_with(seed=0, **reservation):
    b = AirlineBuilder(Rng.from_seed(seed))
    user = b.add_user(membership="gold", gift_card=True, certificate=True)
    res = b.add_reservation(user, day=17, flight_type="one_way", **reservation)
    for seg in res["flights"]:
        b.ensure_available(seg["flight_number"], seg["date"])
    return b.build(), user, res


def test_cancel_refunds_every_payment():
    world, _, res = _world_with()
    fork = world.fork()
    out = run(fork, "cancel_reservation", reservation_id=res["reservation_id"])
    assert out.ok
    after = fork.reservations[res["reservation_id"]]
    assert after["status"] == "cancelled"
    assert [p["amount"] for p in after["payment_history"]] == [res["payment_history"][0]["amount"],
                                                              -res["payment_history"][0]["amount"]]
    assert world.reservations[res["reservation_id"]]["status"] is None


def test_errors_follow_the_target_style():
    world, user, res = _world_with()
    fork = world.fork()
    assert run(fork, "get_reservation_details", reservation_id="NOPE00").content == "Error: Reservation NOPE00 not found"
    assert run(fork, "get_user_details", user_id="ghost").content == "Error: User ghost not found"
    cert = next(p for p, m in user["payment_methods"].items() if m["source"] == "certificate")
    out = run(fork, "update_reservation_baggages", reservation_id=res["reservation_id"],
              total_baggages=res["total_baggages"] + 9, nonfree_baggages=res["nonfree_baggages"] + 9,
              payment_id=cert)
    assert out.content == "Error: Certificate cannot be used to update reservation"
    assert fork == world


def test_baggage_fee_and_gift_card_balance():
    world, user, res = _world_with(total_baggages=0)
    fork = world.fork()
    gift = next(p for p, m in user["payment_methods"].items() if m["source"] == "gift_card")
    balance = user["payment_methods"][gift]["amount"]
    out = run(fork, "update_reservation_baggages", reservation_id=res["reservation_id"],
              total_baggages=9, nonfree_baggages=1, payment_id=gift)
    assert out.ok
    assert fork.users[user["user_id"]]["payment_methods"][gift]["amount"] == balance - BAG_FEE
    assert fork.reservations[res["reservation_id"]]["payment_history"][-1] == {"payment_id": gift, "amount": BAG_FEE}


def test_booking_checks_the_payment_total_and_uses_fixed_ids():
    world, user, res = _world_with()
    fork = world.fork()
    seg = res["flights"][0]
    entry = world.flights[seg["flight_number"]]["dates"][seg["date"]]
    card = next(p for p, m in user["payment_methods"].items() if m["source"] == "credit_card")
    args = dict(user_id=user["user_id"], origin=seg["origin"], destination=seg["destination"],
                flight_type="one_way", cabin="economy",
                flights=[{"flight_number": seg["flight_number"], "date": seg["date"]}],
                passengers=[{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}],
                payment_methods=[{"payment_id": card, "amount": 1}], total_baggages=0,
                nonfree_baggages=0, insurance="no")
    out = run(fork, "book_reservation", **args)
    assert out.content.startswith("Error: Payment amount does not add up")
    args["payment_methods"] = [{"payment_id": card, "amount": entry["prices"]["economy"]}]
    assert run(fork, "book_reservation", **args).ok
    assert "HATHAT" in fork.reservations and "HATHAT" in fork.users[user["user_id"]]["reservations"]
    assert fork.flights[seg["flight_number"]]["dates"][seg["date"]]["available_seats"]["economy"] == \
        entry["available_seats"]["economy"] - 1


def test_a_payment_method_listed_twice_is_an_error_not_a_crash():
    """A certificate listed twice was deleted, then looked up again (KeyError); a gift card
    listed twice paid more than its balance in parts that each fit."""
    world, user, res = _world_with()
    seg = res["flights"][0]
    price = world.flights[seg["flight_number"]]["dates"][seg["date"]]["prices"]["economy"]
    for source in ("certificate", "gift_card"):
        method = next((p for p, m in user["payment_methods"].items() if m["source"] == source), None)
        if method is None:
            continue
        fork = world.fork()
        half = price // 2
        out = run(fork, "book_reservation", user_id=user["user_id"], origin=seg["origin"],
                  destination=seg["destination"], flight_type="one_way", cabin="economy",
                  flights=[{"flight_number": seg["flight_number"], "date": seg["date"]}],
                  passengers=[{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}],
                  payment_methods=[{"payment_id": method, "amount": half}, {"payment_id": method, "amount": price - half}],
                  total_baggages=0, nonfree_baggages=0, insurance="no")
        assert out.content == f"Error: Payment method {method} is listed more than once", out.content
        assert fork == world


def test_malformed_nested_records_are_errors_not_crashes():
    world, user, res = _world_with()
    fork = world.fork()
    for flights in ([{"flight_number": ["x"], "date": "2024-05-17"}], [{"date": "2024-05-17"}], [{"flight_number": "HAT001", "date": "x", "seat": 1}]):
        out = run(fork, "update_reservation_flights", reservation_id=res["reservation_id"], cabin="economy",
                  flights=flights, payment_id="credit_card_0")
        assert out.content.startswith("Error:"), out.content


def test_calculate():
    assert run(None, "calculate", expression="(120 + 35) * 2").content == "310.0"
    assert run(None, "calculate", expression="1 / 3").content == "0.33"
    assert run(None, "calculate", expression="1/0").content.startswith("Error")
    assert run(None, "calculate", expression="__import__('os')").content.startswith("Error")
    assert run(None, "calculate", expression="(" * 500).content.startswith("Error")
