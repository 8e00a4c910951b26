"""trace-gym: turn an LLM agent's recurring failures into capability-targeted training.

Importing the package registers every env in Gymnasium's `trace` namespace:

    import gymnasium as gym, trace_gym
    env = gym.make("trace/airline-v0")
"""

from trace_gym.env import TraceEnv
from trace_gym.errors import EpisodeError, InvalidConfig, ToolError, TraceGymError, UnknownEnv
from trace_gym.registry import list_envs, make, register_all
from trace_gym.verdict import Check, Verdict

__version__ = "0.1.0"

register_all()

__all__ = [
    "TraceEnv", "Verdict", "Check", "list_envs", "make",
    "TraceGymError", "UnknownEnv", "InvalidConfig", "ToolError", "EpisodeError",
]
