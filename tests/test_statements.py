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
