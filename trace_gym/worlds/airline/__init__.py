"""The airline domain: tau2-shaped users, flights and reservations."""

from importlib import resources

from trace_gym.worlds.airline.data import AirlineWorld
from trace_gym.worlds.airline.generator import AirlineBuilder, AirlineWorldSize, generate_world
from trace_gym.worlds.airline.tools import TOOLS

POLICY = resources.files(__package__).joinpath("policy.md").read_text(encoding="utf-8")
POLICY_COMPACT = resources.files(__package__).joinpath("policy_compact.md").read_text(encoding="utf-8")

__all__ = ["AirlineWorld", "AirlineBuilder", "AirlineWorldSize", "generate_world", "TOOLS", "POLICY", "POLICY_COMPACT"]
