"""`Domain`: everything the rest of trace-gym reads about one domain, in one record.

Each world package defines its record once (`trace_gym.worlds.airline.DOMAIN`,
`trace_gym.worlds.retail.DOMAIN`) and `trace_gym.worlds.DOMAINS` collects them. Every reader
takes its facts from there: the target envs (tools, policy, intro, world size, records,
task kinds, step-limit bound), the capability envs (`trace_gym.capability_env`: tools, write
tools, policy, intro), the registry (target env id, entry point, description), the rates
(target env ids), the synthesis agent (tau2 env id, tools), the property kit (the target's
tool schemas) and the programmatic labeller (write tools).

The record holds only facts that some reader reads; how a domain's tasks are drawn (its
request drafters) stays in its target module (`trace_gym.targets.<domain>`), whose kinds
must be the record's (a test checks it); it drafts them in the record's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from trace_gym import capabilities as cap
from trace_gym.errors import InvalidConfig
from trace_gym.tools import ToolKind, Toolset
from trace_gym.validation import require

PROMPT_STYLES = ("full", "compact")
"""System prompt styles: the full policy ("full") or the short one for tiny models ("compact")."""


@dataclass(frozen=True, eq=False)
class Domain:
    """One customer-service domain: its world, tools, policy, target env and task kinds.

    Built once per world package and never changed; every field is checked at construction.
    Records compare (and hash) by identity: there is one per domain.
    """

    name: str
    """The domain's name, as tasks and trajectories record it ("airline", "retail")."""
    intro: str
    """The system prompt's opening, before the policy: the one wording that the target
    envs and the capability envs share."""
    tools: Toolset
    """Every tool of the domain, with the tau2-bench schemas (a target env offers all)."""
    policy: str
    """The full policy text (policy.md of the world package)."""
    policy_compact: str
    """The short policy for tiny models (policy_compact.md of the world package)."""
    world_size: type
    """The dataclass of the world's size knobs (e.g. `AirlineWorldSize`)."""
    builder: type
    """The world's seeded builder (e.g. `AirlineBuilder`)."""
    records: str
    """The users' field that lists a customer's records, and the world's table of them
    ("reservations", "orders")."""
    target_env_id: str
    """The id of the domain's built-in target env (e.g. "trace/airline-v0")."""
    target_entry_point: str
    """Where Gymnasium finds the target env's class ("module:Class"), imported only when
    the env is made."""
    target_description: str
    """The target env's one-line description, as `trace-gym list` shows it."""
    tau2_env_id: str
    """The env id tau2-bench's results of this domain are imported under (e.g. "tau2/airline")."""
    can_need: Mapping[str, tuple[str, ...]]
    """Task kind of the target env -> every capability a request of that kind can need
    (allowed or forbidden, with or without the record's id: the hint covers these, so it
    tells nothing of the decision). Its order is the order the target env draws kinds in:
    part of what a seed gives."""
    plan_steps: int
    """The most oracle turns a target request takes besides the lookups that find its
    record (the target env's step limit follows from it)."""

    def __post_init__(self) -> None:
        require(self, "name", isinstance(self.name, str) and self.name.isidentifier(),
                "must be a lower-case identifier, e.g. 'airline'")
        require(self, "intro", isinstance(self.intro, str) and self.intro.strip() != "" and "\n" not in self.intro,
                "must be one line of text")
        require(self, "tools", isinstance(self.tools, Toolset) and len(self.tools) > 0, "must be a non-empty Toolset")
        for field_name in ("policy", "policy_compact"):
            text = getattr(self, field_name)
            require(self, field_name, isinstance(text, str) and text.strip() != "", "must be a non-empty text")
        require(self, "records", isinstance(self.records, str) and self.records.isidentifier(),
                "must name the users' field that lists their records, e.g. 'reservations'")
        require(self, "target_env_id", isinstance(self.target_env_id, str)
                and self.target_env_id.startswith("trace/") and "-v" in self.target_env_id,
                "must be a versioned id in the trace namespace, e.g. 'trace/airline-v0'")
        require(self, "target_entry_point", isinstance(self.target_entry_point, str)
                and self.target_entry_point.count(":") == 1 and all(self.target_entry_point.split(":")),
                "must be 'module:Class', e.g. 'trace_gym.targets.env:AirlineTargetEnv'")
        require(self, "tau2_env_id", isinstance(self.tau2_env_id, str) and self.tau2_env_id.startswith("tau2/"),
                "must start with 'tau2/', e.g. 'tau2/airline'")
        require(self, "can_need", isinstance(self.can_need, Mapping) and len(self.can_need) > 0,
                "must map at least one task kind to the capabilities it can need")
        for kind, needs in self.can_need.items():
            unknown = [c for c in needs if c not in cap.ALL] if isinstance(needs, tuple) else None
            if unknown is None or unknown:
                raise InvalidConfig(f"Domain.can_need[{kind!r}]={needs!r} is invalid: must be a tuple of "
                                    f"capabilities; allowed: {', '.join(cap.ALL)}")
        require(self, "plan_steps", type(self.plan_steps) is int and self.plan_steps > 0,
                "must be a positive integer")

    @property
    def kinds(self) -> tuple[str, ...]:
        """The target env's task kinds, in the order it draws them."""
        return tuple(self.can_need)

    @property
    def write_tools(self) -> frozenset[str]:
        """The names of the tools that change the world (tau2-bench's WRITE kind)."""
        return frozenset(self.tools.names(ToolKind.WRITE))

    def policy_text(self, style: str) -> str:
        """The policy in a prompt style ("full" or "compact")."""
        if style not in PROMPT_STYLES:
            raise InvalidConfig(f"prompt style {style!r} is unknown; allowed: {', '.join(PROMPT_STYLES)}")
        return self.policy if style == "full" else self.policy_compact

    def system_prompt(self, style: str) -> str:
        """The system prompt every env of the domain starts from: the intro, then the policy."""
        return f"{self.intro}\n\n{self.policy_text(style)}"
