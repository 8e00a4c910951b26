"""The target envs' expert guidance (hint mode).

Their system prompt itself (intro, then policy) is the domain record's
(`trace_gym.worlds.domain.Domain.system_prompt`), the same the capability envs use.
"""

from __future__ import annotations

from trace_gym import capabilities as cap

GUIDANCE = {
    cap.PRECONDITION: "Before any change, look up the records it touches and check every rule of "
                      "the policy that applies; if one fails, refuse and say which rule.",
    cap.STRUCTURED: "Read the records the tools return carefully: find the exact record the "
                    "customer describes and work out prices, fees and allowances from them.",
    cap.MULTI_STEP: "The customer may want several things: finish each one before moving on, and "
                    "do not end the conversation while one is still open.",
    cap.PRECISION: "When you act, copy every identifier and value exactly as the records show it, "
                   "and include every field the action needs.",
}
"""Guidance per capability: it says how to work, never which tool or argument to use."""


def guidance(capabilities: list[str]) -> str:
    """The hint-mode guidance for these capabilities, one line each, plus the confirmation rule."""
    lines = [GUIDANCE[c] for c in capabilities if c in GUIDANCE]
    lines.append("Confirm each change with the customer before making it.")
    return "\n".join(f"- {line}" for line in lines)
