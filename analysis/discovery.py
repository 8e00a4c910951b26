"""Discovery: an LLM analyst proposes candidate capabilities from passed and failed
trajectories (prompts/capability_discovery.md)."""

from __future__ import annotations

import re
from typing import Any

import jinja2

from trace_gym.analysis.llm import Analyst
from trace_gym.resources import read_prompt
from trace_gym.trajectory import SummaryLimits, summarize

NAME = re.compile(r"^[a-z]+(_[a-z]+){1,4}$")

SCHEMA = {
    "type": "object",
    "required": ["capabilities"],
    "properties": {"capabilities": {"type": "array", "items": {
        "type": "object",
        "required": ["name", "definition", "examples"],
        "properties": {
            "name": {"type": "string"},
            "definition": {"type": "string", "minLength": 20},
            "examples": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
        },
    }}},
}


def render(template: str, **values: Any) -> str:
    """A prompt of prompts/ rendered with these values (a missing value is an error)."""
    return jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True).from_string(
        read_prompt(template)).render(**values)


def discover(analyst: Analyst, records: list[dict[str, Any]], min_capabilities: int = 4,
             max_capabilities: int = 10, budget_chars: int = 60_000,
             limits: SummaryLimits = SummaryLimits()) -> list[dict[str, Any]]:
    """4-10 validated capabilities; the analyst is asked again with what was wrong."""
    passed = [r for r in records if r["passed"]]
    failed = [r for r in records if not r["passed"]]
    summaries: dict[bool, list[str]] = {True: [], False: []}
    used = 0
    # Two failures for each pass, alternating, until the budget is spent: the analyst
    # contrasts them, and failures carry more of the signal.
    queue = []
    for i in range(max(len(failed), 2 * len(passed))):
        if i < len(failed):
            queue.append(failed[i])
        if i % 2 == 0 and i // 2 < len(passed):
            queue.append(passed[i // 2])
    for r in queue:
        text = summarize(r, limits)
        if used + len(text) > budget_chars and summaries[r["passed"]]:
            continue
        summaries[r["passed"]].append(text)
        used += len(text)
    known = {r["id"]: r["passed"] for r in records}

    def check(value: dict[str, Any]) -> str | None:
        caps = value["capabilities"]
        if not min_capabilities <= len(caps) <= max_capabilities:
            return f"propose between {min_capabilities} and {max_capabilities} capabilities, not {len(caps)}"
        names = [c["name"] for c in caps]
        bad = [n for n in names if not NAME.match(n)]
        if bad:
            return f"names must be snake_case words (2 to 5): {bad}"
        if len(set(names)) != len(names):
            return "capability names must be distinct"
        for c in caps:
            unknown = [e for e in c["examples"] if e not in known]
            if unknown:
                return f"{c['name']}: unknown conversation ids {unknown}"
            if len({known[e] for e in c["examples"]}) < 2 and len({r["passed"] for r in records}) == 2:
                return f"{c['name']}: examples must mix passed and failed conversations"
        return None

    prompt = render("capability_discovery.md", passed=summaries[True], failed=summaries[False],
                    min_capabilities=min_capabilities, max_capabilities=max_capabilities)
    value = analyst.ask_json([{"role": "user", "content": prompt}], SCHEMA, check, what="list of capabilities")
    return value["capabilities"]
