"""What every capability env shares (the modules in generated_envs/ build on it).

A capability env isolates one capability on the target's own tools: per seed it draws a
domain (airline or retail, from a configurable mix), a task over a small world, and often a
pre-filled conversation (the customer identified, the lookups done, the request and its
confirmation given) so that every rollout starts where the capability is needed. The
episode ends at the agent's first reply without a tool call, or at the task's step limit.

A module supplies `generate(rng, config) -> (task, world)`, `verify(task, initial_world,
final_world, messages) -> Verdict` and `oracle(task, messages) -> action`; its env class
names them (`generate_task`, `verify_task`, `oracle`) with its capability, config class,
tools and hint guidance.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from trace_gym import messages as msg
from trace_gym.env import EpisodeState, NewEpisode, Task, TraceEnv
from trace_gym.errors import InvalidConfig
from trace_gym.jsondata import copy_json, dumps_tree
from trace_gym.rng import Rng
from trace_gym.tools import Tool, ToolKind, Toolset, render_output
from trace_gym.verdict import Verdict
from trace_gym.worlds import DOMAINS, PROMPT_STYLES, domain_named, retail
from trace_gym.worlds.retail.data import CATALOGUE
from trace_gym.worlds.world import Record, World

# Views of the domain records (trace_gym.worlds.DOMAINS), kept under the names that generated
# env modules import; the records are the one source.
DOMAIN_TOOLS: dict[str, Toolset] = {name: d.tools for name, d in DOMAINS.items()}
"""Domain -> every tool of the domain."""
WRITE_TOOLS: dict[str, frozenset[str]] = {name: d.write_tools for name, d in DOMAINS.items()}
"""Domain -> the names of its tools that change the world."""
POLICIES: dict[tuple[str, str], str] = {(name, style): d.policy_text(style)
                                        for name, d in DOMAINS.items() for style in PROMPT_STYLES}
"""(domain, prompt style) -> the policy text."""
INTRO: dict[str, str] = {name: d.intro for name, d in DOMAINS.items()}
"""Domain -> the system prompt's opening, before the policy (the target envs' wording)."""


@dataclass(frozen=True)
class CapabilityConfig:
    """Knobs every capability env has (modules subclass it to add their own)."""

    airline_share: float = 0.5
    """Probability that a seed's task is in the airline domain (the rest: retail)."""
    prompt_style: str = "full"
    """System prompt: the full policy ("full") or the short one for tiny models ("compact")."""

    def __post_init__(self) -> None:
        for f in fields(self):
            check = getattr(self, f"_check_{f.name}", None)
            if check is not None:
                problem = check(getattr(self, f.name))
                if problem:
                    raise InvalidConfig(f"{f.name}={getattr(self, f.name)!r} is invalid: {problem}")

    @staticmethod
    def _check_airline_share(v: Any) -> str | None:
        return None if isinstance(v, (int, float)) and 0 <= v <= 1 else "must be a number in [0, 1]"

    @staticmethod
    def _check_prompt_style(v: Any) -> str | None:
        return None if v in PROMPT_STYLES else f"allowed: {', '.join(PROMPT_STYLES)}"


def in_range(low: float, high: float, integer: bool = False):
    """A config field check: a number (an integer, if asked) in [low, high]."""

    def check(v: Any) -> str | None:
        kinds = (int,) if integer else (int, float)
        if isinstance(v, bool) or not isinstance(v, kinds) or not low <= v <= high:
            return f"must be {'an integer' if integer else 'a number'} in [{low}, {high}]"
        return None

    return staticmethod(check)


def system_prompt(domain: str, style: str) -> str:
    """The system prompt of a capability env's task in `domain`: the domain record's intro
    and its policy in `style` ("full" or "compact"), as the target env's prompt is made."""
    return domain_named(domain).system_prompt(style)


def domain_toolsets(tools_by_domain: dict[str, list[str]]) -> dict[str, Toolset]:
    """Domain -> the named target tools, as one toolset (built once per module: a reset
    should not pay for it)."""
    return {domain: domain_named(domain).tools.subset(names) for domain, names in tools_by_domain.items()}


def union_toolset(tools_by_domain: dict[str, list[str]]) -> Toolset:
    """Every tool the env can expose, for its action space. Tools of the same name in both
    domains have the same parameters, so one schema serves both."""
    seen: dict[str, Tool] = {}
    for domain, names in tools_by_domain.items():
        for name in names:
            seen.setdefault(name, domain_named(domain).tools[name])
    return Toolset(seen.values())


PRODUCT_NAMES = tuple(sorted(CATALOGUE))
"""Every product type of the retail catalogue, sorted (what `retail_store` draws from)."""
STORE_SIZE = retail.DOMAIN.world_size(users=0)
"""The size of a capability env's retail world: no other customers."""


def retail_store(rng: Rng, products: int, variants: int = 1) -> retail.RetailBuilder:
    """A retail builder whose store holds `products` product types from the catalogue, with
    up to `variants` variants each. Building a product costs more than anything else in a
    retail task, and the agent only ever meets the products of its task's records: no
    capability env lets it list the store."""
    builder = retail.DOMAIN.builder(rng, STORE_SIZE, products=False)
    for name in rng.sample(PRODUCT_NAMES, products):
        builder.add_product(name, variants)
    return builder


def any_item(rng: Rng, builder: retail.RetailBuilder) -> list[tuple[Record, Record]]:
    """One random item of the store, as an order's items."""
    product = rng.choice(list(builder.world.products.values()))
    return [(product, rng.choice(list(product["variants"].values())))]


@dataclass
class Prefill:
    """Builds the conversation an episode starts from, running lookups on the world."""

    world: World
    toolset: Toolset
    messages: list[msg.Message] = field(default_factory=list)
    turns: int = 0
    """Assistant messages so far (a lookup's call id is numbered by it)."""

    def user(self, text: str) -> None:
        """Add a customer message to the conversation."""
        self.messages.append(msg.user(text))

    def say(self, text: str) -> None:
        """Add an agent reply (no tool call) to the conversation."""
        self.messages.append({"role": "assistant", "content": text})
        self.turns += 1

    def lookup(self, name: str, **arguments: Any) -> Any:
        """Call a read tool as the agent did earlier; returns the tool's output."""
        tool = self.toolset[name]
        assert tool.kind is not ToolKind.WRITE, f"a pre-filled lookup cannot write ({name})"
        call_id = f"call_prefill_{self.turns}"
        self.turns += 1
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": name, "arguments": dumps_tree(arguments)}}]})
        value = tool.fn(self.world, **arguments)
        content = render_output(value)
        self.messages.append(msg.tool_result(call_id, content))
        return value


def agent_turns(task: Any, messages: list[msg.Message]) -> list[msg.Message]:
    """The agent's own turns: the assistant messages after the system prompt and the
    task's pre-filled conversation."""
    return [m for m in messages[1 + len(task.prefill):] if m["role"] == "assistant"]


def write_calls(task: Any, messages: list[msg.Message], arguments: bool = True) -> list[tuple[str, Any, bool]]:
    """(name, arguments, succeeded) of every write call the agent made, in order. With
    `arguments=False` the arguments are None: a verifier that only counts writes need not
    parse them (a good part of a verification's cost)."""
    own = messages[1 + len(task.prefill):]
    results = {m["tool_call_id"]: m["content"] for m in own if m["role"] == "tool"}
    writes = WRITE_TOOLS[task.domain]
    out = []
    for m in own:
        if m["role"] == "assistant" and m.get("tool_calls"):
            for tc in m["tool_calls"]:
                name = tc.get("function", {}).get("name")
                if name in writes:
                    ok = not results.get(tc.get("id"), "Error").startswith("Error")
                    out.append((name, msg.call_arguments(tc) if arguments else None, ok))
    return out


def final_reply(task: Any, messages: list[msg.Message]) -> str:
    """The agent's last reply to the customer ('' if none)."""
    for m in reversed(agent_turns(task, messages)):
        if not m.get("tool_calls"):
            return m.get("content") or ""
    return ""


def next_step(task: Any, messages: list[msg.Message], plan: list[Any]) -> Any:
    """The oracle's turn: the plan's step at the number of turns the agent has taken."""
    done = len(agent_turns(task, messages))
    return copy_json(plan[min(done, len(plan) - 1)])


class CapabilityEnv(TraceEnv[Task, World]):
    """Base class of the capability envs (see the module docstring)."""

    capability: ClassVar[str]
    Config: ClassVar[type[CapabilityConfig]] = CapabilityConfig
    tools: ClassVar[dict[str, list[str]]]
    """Domain -> names of the target tools this env exposes."""
    guidance: ClassVar[str]
    """Expert guidance for hint mode (never names a tool or an argument)."""
    generate_task: ClassVar[staticmethod[[Rng, Any], tuple[Any, World]]]
    """The module's `generate(rng, config)`."""
    verify_task: ClassVar[staticmethod[[Any, World, World, list[msg.Message]], Verdict]]
    """The module's `verify(task, initial_world, final_world, messages)`."""
    oracle: ClassVar[staticmethod[[Any, list[msg.Message]], Any]]
    """The module's `oracle(task, messages)`."""

    def __init__(self, render_mode: str | None = None, **knobs: Any) -> None:
        names = [f.name for f in fields(self.Config)]
        unknown = set(knobs) - set(names)
        if unknown:
            raise InvalidConfig(f"unknown argument(s) {sorted(unknown)} for {type(self).__name__}; "
                                f"allowed: {', '.join(names + ['render_mode'])}")
        self.config = self.Config(**knobs)
        self._toolsets = domain_toolsets(self.tools)
        super().__init__(union_toolset(self.tools), render_mode=render_mode)

    def _new_episode(self, rng: Rng) -> NewEpisode:
        task, world = self.generate_task(rng, self.config)
        return NewEpisode(
            task=task,
            world=world,
            system_prompt=system_prompt(task.domain, self.config.prompt_style),
            opening=task.prefill,
            max_steps=task.max_steps,
            hint=self.guidance,
            toolset=self._toolsets[task.domain],
        )

    def _after_reply(self, episode: EpisodeState, text: str) -> str | None:
        return "reply"

    def verify(self, task: Any, initial_world: World, final_world: World,
               messages: list[msg.Message]) -> Verdict:
        """The score of an episode: the module's `verify` (see `TraceEnv.verify`)."""
        return self.verify_task(task, initial_world, final_world, messages)

    def oracle_action(self, messages: list[msg.Message]) -> Any:
        """The oracle's next action for this conversation: the module's `oracle`."""
        return self.oracle(self.task, messages)
