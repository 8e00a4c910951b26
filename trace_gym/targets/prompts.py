"""System prompts of the target envs, and their expert guidance (hint mode)."""

from __future__ import annotations

from trace_gym import capabilities as cap

INTRO = {
    "airline": "You are a customer service agent for an airline. Help the customer following the policy below.",
    "retail": "You are a customer service agent for an online store. Help the customer following the policy below.",
}

# Guidance per capability; it says how to work, never which tool or argument to use.
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


def system_prompt(domain: str, policy: str) -> str:
    return f"{INTRO[domain]}\n\n{policy}"


def guidance(capabilities: list[str]) -> str:
    lines = [GUIDANCE[c] for c in capabilities if c in GUIDANCE]
    lines.append("Confirm each change with the customer before making it.")
    return "\n".join(f"- {line}" for line in lines)
