"""The retail domain: tau2-shaped users, products with variants, and orders."""

from importlib import resources

from trace_gym.worlds.retail.data import RetailWorld
from trace_gym.worlds.retail.generator import RetailBuilder, RetailWorldSize, generate_world
from trace_gym.worlds.retail.tools import TOOLS

POLICY = resources.files(__package__).joinpath("policy.md").read_text(encoding="utf-8")
POLICY_COMPACT = resources.files(__package__).joinpath("policy_compact.md").read_text(encoding="utf-8")

__all__ = ["RetailWorld", "RetailBuilder", "RetailWorldSize", "generate_world", "TOOLS", "POLICY", "POLICY_COMPACT"]
