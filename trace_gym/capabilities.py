"""The capabilities trace-gym tags tasks with: the four TRACE found on tau2-bench, and the two
of the coding domain (SWE-bench-style repository bug fixing, `trace_gym.coding`)."""

from __future__ import annotations

PRECONDITION = "precondition_verification"
STRUCTURED = "structured_data_reasoning"
MULTI_STEP = "multi_step_task_completion"
PRECISION = "tool_calling_precision"
LOCALIZATION = "code_localization"
REPRODUCTION = "issue_reproduction"

DESCRIPTIONS: dict[str, str] = {
    PRECONDITION: (
        "Checking every policy rule and record state that a requested write depends on before "
        "making it, and refusing, with the rule named, when a condition fails."
    ),
    STRUCTURED: (
        "Deriving the right values from structured records: finding the record the user "
        "describes, comparing options under constraints, computing fees, prices and allowances."
    ),
    MULTI_STEP: (
        "Completing every sub-task of a request that asks for several things in one "
        "conversation, without dropping or merging any."
    ),
    PRECISION: (
        "Calling tools with the exact name and every argument right: ids, nested lists of "
        "records, payment method ids, full address fields."
    ),
    LOCALIZATION: (
        "Finding where a reported bug lives: reading and searching a repository from an issue's "
        "symptom to the file and function whose code is wrong, before editing anything."
    ),
    REPRODUCTION: (
        "Turning an issue's report into a test that fails on the buggy code and passes once it "
        "is fixed, on inputs of one's own rather than only the report's."
    ),
}

CUSTOMER_SERVICE = (PRECONDITION, STRUCTURED, MULTI_STEP, PRECISION)
"""The capabilities of the customer-service domains (airline, retail)."""
CODING = (LOCALIZATION, REPRODUCTION)
"""The capabilities of the coding domain."""
ALL = tuple(DESCRIPTIONS)
"""Every capability, customer service first."""
