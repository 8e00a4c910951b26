"""What the synthesis agent is told: the capability and failed examples, the target's tool
schemas, the env contract, the audit rules and one shipped env as the model of the shape."""

from __future__ import annotations

import json
from typing import Any

import jinja2

from trace_gym.resources import read_prompt

CONTRACT = """\
- One Python module, importable on its own, that defines exactly one env class subclassing
  `trace_gym.capability_env.CapabilityEnv` (or `trace_gym.env.TraceEnv`), with `capability`
  set to the capability's name.
- A module docstring that is the spec: the task, the tools, the reward, when the episode
  ends, and a transfer rationale of 3 to 5 sentences (why training here helps on the target).
- A frozen config dataclass (subclass `CapabilityConfig`) whose fields are the difficulty
  knobs, each validated.
- A task dataclass with `domain`, `kind`, `prefill` (the pre-filled conversation),
  `hidden` (values the agent must find, never stated in system or user messages),
  `max_steps`, `capabilities_needed`, `instructions` and `to_json()`. Where the agent must
  infer a categorical outcome from the records (allowed or forbidden, ...), `to_json()`
  carries it as `decision`, and the request's wording is drawn the same way whatever it is;
  where a request must be refused, `to_json()` carries the terms naming the broken rule as
  `rule`.
- `generate(rng, config) -> (task, world)`: every random choice from `rng` (a
  `trace_gym.rng.Rng` derived from the episode seed); build worlds with
  `trace_gym.worlds.airline.AirlineBuilder` / `trace_gym.worlds.retail.RetailBuilder`.
- `verify(task, initial_world, final_world, messages) -> Verdict`: a pure, programmatic
  check (world state, exact tool names and arguments compared by JSON's types), score in
  [0, 1], with multi-level credit so a group of attempts on one seed gets different rewards.
  Reward only the behaviour: a write the tool rejects earns nothing and excuses nothing
  (count attempts, not only writes that went through); extra or failed writes cost; a
  required statement or refusal passes only when the reply says the right value or rule and
  no other of its kind (`trace_gym.statements`); a refusal also states the record fact that
  breaks the rule (a status, a cabin, a date, a balance), since naming the rule a request's
  kind usually breaks needs no record at all.
- `oracle(task, messages) -> action`: acts from the conversation and reaches reward 1.0.
- The episode ends at the agent's first reply without a tool call.
- Degenerate policies and adversaries (random calls, always refusing, the system prompt or
  every value in view as the reply, every write tool on every id in view, ten rejected
  writes before the oracle, the oracle with retyped or extra arguments, an early transfer,
  refusing each request with the rule its kind most often breaks without reading a record)
  must average at most 0.35 and at most the reply "I cannot help with that." plus 0.05, and
  never score 1.0 where that reply scores less."""


def audit_rules() -> str:
    """The audit's rules, as the synthesis prompt states them (read from the audit's own tables)."""
    from trace_gym.audit.static import ALLOWED_MODULES, REFUSED_BUILTINS, TRACE_GYM_MODULES

    return (
        f"- Imports allowed: {', '.join(sorted(ALLOWED_MODULES))}, and from trace_gym only "
        f"{', '.join(TRACE_GYM_MODULES)}, and from those only the names they define themselves. "
        "Nothing else.\n"
        "- A module is a namespace: use `np.array`, never `np` itself as a value.\n"
        f"- Refused in any form (called, aliased, stored, passed along): {', '.join(sorted(REFUSED_BUILTINS))}; "
        "no dunder attribute access, no attribute access by string (operator.attrgetter, string.Formatter, "
        "format strings with attribute or item fields: use f-strings), no `global`, no numpy module-level "
        "random functions, no generator or bit generator without a seed, no numpy file IO, no clocks.\n"
        "- Dynamic checks, with the module in a sandbox (no network, no writable files, CPU, memory and time "
        "limits): check_env, determinism (also across processes with different PYTHONHASHSEED), the oracle "
        "scores 1.0 and every oracle write is accepted by the world, any change to an oracle write "
        "argument scores below 1, degenerate policies and adversaries score low, the request's "
        "wording does not predict the task's `decision` (a bag-of-words classifier may not beat "
        "the majority class by more than 0.05), malformed actions never raise, `hidden` values (a list "
        "on every task, empty when there is nothing to find) never appear in system or user "
        "messages, tool schemas are the target's, tasks differ across seeds, train and test seeds "
        "give different tasks."
    )


def example_module() -> str:
    """The source of the shipped env the synthesis prompt shows as the model of the shape."""
    from trace_gym.registry import shipped_envs_dir

    return (shipped_envs_dir() / "tool_calling_precision.py").read_text()


def render(capability: dict[str, Any], examples: list[str], tools: list[dict[str, Any]]) -> str:
    """The synthesis prompt for one capability: its failed examples, the target's tool schemas, the
    contract, the audit rules and the example module."""
    template = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True).from_string(
        read_prompt("environment_generation.md"))
    return template.render(capability=capability, examples=examples, tools_json=json.dumps(tools, indent=1),
                           contract=CONTRACT, audit_rules=audit_rules(), example_module=example_module())
