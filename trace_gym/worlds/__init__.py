"""tau2-shaped domain worlds: data, seeded generators, tools and policy texts."""

from trace_gym.worlds.world import World

__all__ = ["World"]
