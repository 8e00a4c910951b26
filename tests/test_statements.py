"""A message states a value when it names it and no other value of the same kind."""

from __future__ import annotations

import pytest

from trace_gym.statements import names_rule, stated, states

STUFFED_NUMBERS = " ".join(str(i) for i in range(2000))


@pytest.mark.parametrize(("text", "kind", "value", "expected"), [
    ("The refund of $45.50 will arrive in 5 to 7 business days.", "amount", "45.50", True),
    ("You paid $1,200 for order #W1234567.", "amount", "1200", True),
    ("That is 45.5 dollars in total.", "amount", "45.50", True),
    ("The fee is USD 100.", "amount", "100", True),
    ("The fee is $100, or $50 per bag.", "amount", "100", False),  # two amounts: which one?
    ("The fee is 100.", "amount", "100", False),  # a bare number is not a sum of money
    ("$" + STUFFED_NUMBERS, "amount", "120", False),
    ("0123456789" * 20, "amount", "120", False),
    ("Flight HAT001 on 2024-05-20 is delayed.", "flight_status", "delayed", True),
    ("It was canceled by the airline.", "flight_status", "cancelled", True),
    ("It is available, on time, delayed, flying, landed or cancelled.", "flight_status", "delayed", False),
    ("You have 4 free checked bags in total (2 checked bags free per passenger).", "free_bags", "4", True),
    (", ".join(f"{i} free" for i in range(16)), "free_bags", "4", False),
    ("The tracking number is 724109372910.", "token", "724109372910", True),
    ("It is 724109372910 or 724109372911.", "token", "724109372910", False),
    ("It is 7241093729101.", "token", "724109372910", False),  # a longer number is another value
    ("It was booked on 2024-05-09T15:00:00, more than 24 hours ago.", "date", "2024-05-09", True),
    ("Booked on 2024-05-09; your flight is on 2024-05-18.", "date", "2024-05-09", False),
    ("Reservation ZFA04Y is in basic economy.", "cabin", "basic_economy", True),
    ("Its cabin is basic_economy.", "cabin", "basic_economy", True),
    ("It is basic economy, economy or business.", "cabin", "basic_economy", False),
    ("It is in economy.", "cabin", "basic_economy", False),  # economy is not basic economy
    ("It already has 5 checked bags.", "bags", "5", True),
    ("It has 1 bag.", "bags", "1", True),
    ("It has 4 free bags and 5 checked bags.", "bags", "5", True),  # "4 free" counts free bags
    (" ".join(f"{k} bags" for k in range(10)), "bags", "5", False),
    ("Reservation ZFA04Y has 2 passengers.", "passengers", "2", True),
    ("You are a regular member.", "membership", "regular", True),
    ("You are a regular, silver or gold member.", "membership", "regular", False),
    ("Order #W1234567 is processed.", "order_status", "processed", True),
    ("It was canceled.", "order_status", "cancelled", True),
    ("It is pending, processed or delivered.", "order_status", "processed", False),
])
def test_states(text, kind, value, expected):
    assert states(text, kind, value) is expected


def test_stated_needs_one_message_that_states_the_value_alone():
    assert stated(["Which flight?", "It is delayed."], "flight_status", "delayed")
    assert not stated(["It is delayed or landed.", "Or on time."], "flight_status", "delayed")


def test_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown statement kind"):
        states("x", "colour", "red")


def test_names_rule():
    assert names_rule("Only pending orders can be cancelled.", ["pending"], ["delivered", "balance"])
    assert names_rule("It was delivered, and only pending orders can be cancelled.", ["pending"], ["balance"])
    stuffed = "pending delivered balance 24 hours flown basic economy remove"
    assert not names_rule(stuffed, ["pending"], ["delivered", "balance"])
    assert not names_rule("I can't do that.", ["pending"], [])
    assert names_rule("Bags can never be REMOVED, sorry", ["remove"], ["24 hours"])


def test_a_rule_is_named_in_words_and_an_identifier_still_conflicts():
    assert names_rule("Basic economy flights cannot be changed.", ["basic economy"], ["remove"])
    assert not names_rule("Values: basic_economy, economy, business.", ["basic economy"], ["remove"])
    assert not names_rule("Only pending orders; flight is flown_or_departed", ["pending"], ["flown or departed"])


def test_values_the_check_allows_besides_the_stated_one():
    """The rule's own words and what the customer asked for are no claim about the record."""
    refusal = "Order #W1 is processed, and only pending orders can be cancelled."
    assert not states(refusal, "order_status", "processed")
    assert states(refusal, "order_status", "processed", ["pending", "cancelled"])
    assert not states("It is pending or processed.", "order_status", "delivered", ["pending", "processed"])
    bags = "You asked for 3 bags, and the reservation already has 5 checked bags."
    assert states(bags, "bags", "5", ["3"]) and not states(bags, "bags", "5")
    balance = "Your gift card balance of $47.38 does not cover the order total of $94.76."
    assert stated([balance], "amount", "47.38", ["94.76"]) and not stated([balance], "amount", "47.38")
    assert not states(" ".join(f"${k}" for k in range(200)), "amount", "47", ["94"])


def test_told_alone_reports_the_first_contradicting_value():
    from trace_gym.statements import told_alone

    assert told_alone(["It costs $45.50."], "amount", "45.50") == (True, None)
    assert told_alone(["It costs $12.", "No: $45.50."], "amount", "45.50") == (False, "12.00")
    assert told_alone(["No: $45.50.", "Or maybe $12?"], "amount", "45.50") == (True, "12.00")
    # the values a request involves besides (a fee per passenger) are no contradiction
    assert told_alone(["$100 per passenger: $300 in all.", "So $300."], "amount", "300", ["100"]) == (True, None)
    assert told_alone(["The order is delivered."], "order_status", "processed") == (False, "delivered")
    assert told_alone(["Nothing to say."], "flight_status", "landed") == (False, None)
