"""The programmatic labeller, for trace-gym's own target envs and imported SWE-bench runs
(`trace-gym import-swebench`), no LLM.

It reads only the trajectory record: the capabilities the task records as needed, the
verdict's checks and what the agent did. For a capability the task did not need: NA. For a
passed trajectory: PRESENT for every needed capability. For a failed one, a needed
capability is LACKING when the trajectory shows its failure mode, else PRESENT:

- precondition_verification: a refusal check failed (a forbidden request was carried out
  or attempted, or refused without looking up the record, stating what it shows or naming
  the rule), or, under the strict protocol, a policy rule that comes before acting was
  skipped: a write made without the customer's explicit yes to a summary of it
  (`confirmation`), or the customer's records read before they said who they are
  (`identification`). Both are rules an action depends on, checked before it is taken,
  which is this capability's definition; neither is a malformed call (precision), a wrong
  value (data reasoning) or a dropped sub-task (multi-step);
- tool_calling_precision: a write call was malformed or refused by its tool (an
  `invalid_tool_call`, or an "Error: ..." answer to a write);
- structured_data_reasoning: a required piece of information was not told, or the final
  database is wrong although every write the agent made went through (a well-formed call
  with the wrong record or values);
- multi_step_task_completion: the conversation did not end with the customer satisfied
  (the step limit was hit, the agent transferred them, or they gave up) and no required
  information or refusal check failed: a conversation that derails because the agent never
  told a figure or never named a rule is put down to that, the more specific failure;
- code_localization (coding): the verdict's `localized` check failed: the agent's change left
  out a file the fix needs (coding-v0: the file holding the bug; an imported SWE-bench run,
  `trace_gym.swebench`: a file of the gold patch). A record without the check (no gold patch
  known) is PRESENT;
- issue_reproduction (coding): the verdict's `reproduced` check failed: the agent edited the
  code before running any (no reproduction of the issue first). A record without it is
  PRESENT.
"""

from __future__ import annotations

import json
from typing import Any

from trace_gym import capabilities as cap
from trace_gym.messages import INVALID_TOOL_CALL
from trace_gym.targets.user import GIVE_UP
from trace_gym.worlds import DOMAINS

WRITE_TOOLS = frozenset().union(*(d.write_tools for d in DOMAINS.values()))
"""The write tools of every domain record: a call to one is a write, whichever target it was made on."""
PRECONDITION_CHECKS = ("refusal", "forbidden_write", "confirmation", "identification")
"""Verdict checks (name prefixes) whose failure shows a precondition left unchecked."""
CODING_CHECKS = {cap.LOCALIZATION: "localized", cap.REPRODUCTION: "reproduced"}
"""The verdict check whose failure shows each coding capability lacking (coding-v0 and
`trace-gym import-swebench` both emit them, with credit 0)."""


def _writes(record: dict[str, Any]) -> list[tuple[str, bool]]:
    """(tool name, went through) of every write call."""
    results = {m["tool_call_id"]: m["content"] for m in record["messages"] if m["role"] == "tool"}
    out = []
    for m in record["messages"]:
        for tc in m.get("tool_calls") or []:
            name = tc["function"]["name"]
            if name in WRITE_TOOLS:
                out.append((name, not results.get(tc["id"], "Error").startswith("Error")))
    return out


def _failed_checks(record: dict[str, Any]) -> list[str]:
    return [c["name"] for c in (record.get("verdict") or {}).get("checks", []) if not c.get("passed")]


def lacking(record: dict[str, Any], capability: str) -> bool:
    """Whether a failed trajectory shows the failure mode of `capability` (the rules of the module
    docstring)."""
    failed = _failed_checks(record)
    if capability in CODING_CHECKS:
        return CODING_CHECKS[capability] in failed
    writes = _writes(record)
    if capability == cap.PRECONDITION:
        return any(name.startswith(PRECONDITION_CHECKS) for name in failed)
    if capability == cap.PRECISION:
        invalid = any(tc["function"]["name"] == INVALID_TOOL_CALL
                      for m in record["messages"] for tc in m.get("tool_calls") or [])
        return invalid or any(not ok for _, ok in writes)
    if capability == cap.STRUCTURED:
        told = any(name.startswith("communicate") for name in failed)
        wrong_world = "database" in failed and bool(writes) and all(ok for _, ok in writes)
        return told or wrong_world
    if capability == cap.MULTI_STEP:
        gave_up = any(m["role"] == "user" and m.get("content") == GIVE_UP for m in record["messages"])
        explained = any(name.startswith(("communicate", "refusal")) for name in failed)
        return (gave_up or record.get("termination_reason") != "user_stop") and not explained
    return False


def label(record: dict[str, Any], capability: str) -> str:
    """NA, PRESENT or LACKING for one trajectory and one capability (the module docstring's rules)."""
    if capability not in (record.get("capabilities_needed") or []):
        return "NA"
    if record["passed"]:
        return "PRESENT"
    return "LACKING" if lacking(record, capability) else "PRESENT"


def label_all(records: list[dict[str, Any]], capabilities: list[str]) -> dict[str, dict[str, str]]:
    """Capability -> trajectory id -> label, for every pair (one labelling run)."""
    return {c: {r["id"]: label(r, c) for r in records} for c in capabilities}


def describe() -> str:
    """The capabilities the programmatic labeller knows, with their definitions, as JSON."""
    return json.dumps({c: cap.DESCRIPTIONS[c] for c in cap.ALL})
