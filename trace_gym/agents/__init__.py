"""Policies: given the conversation and the tool schemas, return the agent's next turn."""

from trace_gym.agents.base import OraclePolicy, Policy, RandomPolicy, make_policy

__all__ = ["OraclePolicy", "Policy", "RandomPolicy", "make_policy"]
