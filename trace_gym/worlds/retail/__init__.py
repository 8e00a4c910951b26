"""The retail domain: tau2-shaped users, products with variants, and orders.

`DOMAIN` is the domain's record (`trace_gym.worlds.domain.Domain`): what the target env,
the capability envs, the registry, synthesis, the property kit and the labeller read about
retail. See README.md in this folder.
"""

from importlib import resources
from types import MappingProxyType

from trace_gym import capabilities as cap
from trace_gym.worlds.domain import Domain
from trace_gym.worlds.retail.data import RetailWorld
from trace_gym.worlds.retail.generator import RetailBuilder, RetailWorldSize, generate_world
from trace_gym.worlds.retail.tools import TOOLS

POLICY = resources.files(__package__).joinpath("policy.md").read_text(encoding="utf-8")
"""The full retail policy (policy.md)."""
POLICY_COMPACT = resources.files(__package__).joinpath("policy_compact.md").read_text(encoding="utf-8")
"""The short retail policy for tiny models (policy_compact.md)."""

_P, _S, _T = cap.PRECONDITION, cap.STRUCTURED, cap.PRECISION

DOMAIN = Domain(
    name="retail",
    intro="You are a customer service agent for an online store. Help the customer following the policy below.",
    tools=TOOLS,
    policy=POLICY,
    policy_compact=POLICY_COMPACT,
    world_size=RetailWorldSize,
    builder=RetailBuilder,
    records="orders",
    target_env_id="trace/retail-v0",
    target_entry_point="trace_gym.targets.env:RetailTargetEnv",
    target_description="Retail customer service with a scripted customer (target env).",
    tau2_env_id="tau2/retail",
    can_need=MappingProxyType({
        "cancel_order": (_P, _S, _T), "modify_items": (_P, _S, _T), "exchange_items": (_P, _S, _T),
        "modify_order_address": (_P, _S, _T), "modify_order_payment": (_P, _S, _T),
        "return_items": (_P, _S, _T), "modify_user_address": (_T,), "order_info": (_S,),
    }),
    plan_steps=9,
)
"""The retail domain's record: the one place its facts are kept."""

__all__ = ["DOMAIN", "POLICY", "POLICY_COMPACT", "TOOLS", "RetailBuilder", "RetailWorld", "RetailWorldSize", "generate_world"]
