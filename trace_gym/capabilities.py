"""The capabilities trace-gym tags tasks with (the four TRACE found on tau2-bench)."""

from __future__ import annotations

PRECONDITION = "precondition_verification"
STRUCTURED = "structured_data_reasoning"
MULTI_STEP = "multi_step_task_completion"
PRECISION = "tool_calling_precision"

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
}

ALL = tuple(DESCRIPTIONS)
