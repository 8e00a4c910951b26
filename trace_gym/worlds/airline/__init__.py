"""The airline domain: tau2-shaped users, flights and reservations.

`DOMAIN` is the domain's record (`trace_gym.worlds.domain.Domain`): what the target env,
the capability envs, the registry, synthesis, the property kit and the labeller read about
airline. See README.md in this folder.
"""

from importlib import resources
from types import MappingProxyType

from trace_gym import capabilities as cap
from trace_gym.worlds.airline.data import AirlineWorld
from trace_gym.worlds.airline.generator import AirlineBuilder, AirlineWorldSize, generate_world
from trace_gym.worlds.airline.tools import TOOLS
from trace_gym.worlds.domain import Domain

POLICY = resources.files(__package__).joinpath("policy.md").read_text(encoding="utf-8")
"""The full airline policy (policy.md)."""
POLICY_COMPACT = resources.files(__package__).joinpath("policy_compact.md").read_text(encoding="utf-8")
"""The short airline policy for tiny models (policy_compact.md)."""

_P, _S, _T = cap.PRECONDITION, cap.STRUCTURED, cap.PRECISION

DOMAIN = Domain(
    name="airline",
    intro="You are a customer service agent for an airline. Help the customer following the policy below.",
    tools=TOOLS,
    policy=POLICY,
    policy_compact=POLICY_COMPACT,
    world_size=AirlineWorldSize,
    builder=AirlineBuilder,
    records="reservations",
    target_env_id="trace/airline-v0",
    target_entry_point="trace_gym.targets.env:AirlineTargetEnv",
    target_description="Airline customer service with a scripted customer (target env).",
    tau2_env_id="tau2/airline",
    can_need=MappingProxyType({
        "cancel_reservation": (_P, _S), "change_flight": (_P, _S, _T), "change_cabin": (_P, _S, _T),
        "baggage": (_P, _S, _T), "update_passengers": (_P, _S, _T), "book_flight": (_S, _T),
        "compensation": (_P, _S), "flight_status": (), "bag_allowance": (_S,),
    }),
    plan_steps=11,
)
"""The airline domain's record: the one place its facts are kept."""

__all__ = ["DOMAIN", "POLICY", "POLICY_COMPACT", "TOOLS", "AirlineBuilder", "AirlineWorld", "AirlineWorldSize", "generate_world"]
