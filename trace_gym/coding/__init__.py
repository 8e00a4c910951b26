"""The coding domain: SWE-bench-style repository bug fixing, procedurally generated.

Per seed, a small Python package with one injected bug, the issue a user writes about it
and hidden tests (`trace_gym.coding.repo`, from the templates of
`trace_gym.coding.templates`); SWE-agent-style tools over the repository
(`trace_gym.coding.tools`); every command and test run in a bubblewrap sandbox with limits
(`trace_gym.sandbox.jail`); verifiers that decide outside the sandbox
(`trace_gym.coding.verify`). The target env is `trace/coding-v0` (`trace_gym.coding.env`);
the capability envs `trace/code_localization-v0` and `trace/issue_reproduction-v0` ship in
generated_envs/. `DOMAIN` is the domain's record; importing this package imports no env
and starts no sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass

from trace_gym import capabilities as cap


@dataclass(frozen=True)
class CodingDomain:
    """The coding domain's record: what the registry, the importer and the pipeline read.

    A record of its own rather than a `trace_gym.worlds.Domain`: that one describes a
    customer-service world (its policy, records, builder and tau2-bench id), none of which a
    repository has."""

    name: str
    intro: str
    """The system prompt's opening, shared by the target and the capability envs."""
    target_env_id: str
    target_entry_point: str
    target_description: str
    source_env_id: str
    """The env id imported SWE-bench trajectories are recorded under."""
    capabilities: tuple[str, ...]
    """The capabilities a coding task can need (the labeller's and the pipeline's list)."""
    capability_env_ids: tuple[str, ...]


DOMAIN = CodingDomain(
    name="coding",
    intro=("You are a software engineer fixing a reported bug in a Python repository. You work only through "
           "the tools: read and search the code, run commands and the tests in the sandbox, edit files, and "
           "call submit when the fix is done. Do not change the tests to make them pass."),
    target_env_id="trace/coding-v0",
    target_entry_point="trace_gym.coding.env:CodingEnv",
    target_description="Fix the bug an issue reports in a generated Python package; hidden tests decide.",
    source_env_id="swebench/verified",
    capabilities=cap.CODING,
    capability_env_ids=tuple(f"trace/{c}-v0" for c in cap.CODING),
)
"""The coding domain's record."""

__all__ = ["DOMAIN", "CodingDomain"]
