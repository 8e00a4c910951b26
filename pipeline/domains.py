"""The pipeline's domains (`[pipeline] domain`, `--domain`): each decides a run's targets
(unless `[pipeline] targets` names them), the capabilities the analysis may select and the
shipped env that trains each one."""

from __future__ import annotations

from dataclasses import dataclass

from trace_gym import capabilities as cap
from trace_gym.coding import DOMAIN as CODING
from trace_gym.worlds import DOMAINS

DEFAULT_CONFIG = "embedded"
"""The shipped configuration the pipeline runs without `--config` (package data, so that an
installed wheel has it too)."""


@dataclass(frozen=True)
class PipelineDomain:
    """What the domain decides in a run: its targets (unless `[pipeline] targets` names them),
    the capabilities the analysis may select and each one's shipped env."""

    name: str
    targets: tuple[str, ...]
    capability_envs: dict[str, str]
    """capability -> the shipped env that trains it."""
    config: str
    """The shipped configuration `--domain NAME` runs without `--config`."""


PIPELINE_DOMAINS: dict[str, PipelineDomain] = {
    "customer_service": PipelineDomain("customer_service", tuple(d.target_env_id for d in DOMAINS.values()),
                                       {c: f"trace/{c}-v0" for c in cap.CUSTOMER_SERVICE}, DEFAULT_CONFIG),
    "coding": PipelineDomain("coding", (CODING.target_env_id,),
                             dict(zip(CODING.capabilities, CODING.capability_env_ids)), "coding"),
}
DOMAIN_NAMES = tuple(PIPELINE_DOMAINS)
"""The values of `[pipeline] domain` (and `--domain`), the default first."""
DEFAULT_DOMAIN = DOMAIN_NAMES[0]


def default_config(domain: str | None = None) -> str:
    """The shipped configuration a run of `domain` reads without `--config` (the embedded one
    when no domain is named)."""
    return PIPELINE_DOMAINS[domain].config if domain in PIPELINE_DOMAINS else DEFAULT_CONFIG
