"""Policies: given the conversation and the tool schemas, return the agent's next turn.

`make_policy(name, **kwargs)` builds a registered policy (`policy_names()`); a new one is a
module and one `register_policy` line (`trace_gym.agents.registry`)."""

from trace_gym.agents.base import OraclePolicy, Policy, RandomPolicy
from trace_gym.agents.registry import PolicyEntry, make_policy, policy_entry, policy_names, register_policy

__all__ = ["OraclePolicy", "Policy", "PolicyEntry", "RandomPolicy", "make_policy", "policy_entry", "policy_names",
           "register_policy"]
