"""A verdict's details are one printable line whatever an agent put in them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from trace_gym.verdict import Check, Verdict, printable


def test_control_and_bidi_characters_in_a_detail_are_escaped():
    raw = "ValueError: \x1b[2J\x1b]0;owned\x07 \u202egnp.exe\nnext line"
    verdict = Verdict(0.0, (Check("pass_on_fixed", False, 0.4, raw), Check("plain", True, 0.6, "fine")))
    detail = verdict.checks[0].detail
    assert detail == "ValueError: \\x1b[2J\\x1b]0;owned\\x07 \\u202egnp.exe\\nnext line"
    assert verdict.checks[1].detail == "fine" and verdict.to_json()["checks"][0]["detail"] == detail


@given(st.text())
def test_printable_gives_a_printable_line_and_keeps_printable_text(text):
    out = printable(text)
    assert out.isprintable()
    if text.isprintable():
        assert out == text
