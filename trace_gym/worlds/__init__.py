"""tau2-shaped domain worlds: data, seeded generators, tools and policy texts, and the table
of their records.

`DOMAINS` maps each domain's name to its `Domain` record (defined once, as `DOMAIN`, in
the domain's own package); `domain_named` looks one up and refuses an unknown name by name.
The table lives here, not in a module of its own, because the worlds are the one layer that
every reader of a domain already imports and that imports none of them (targets, capability
envs, registry, synthesis, testing, analysis), so no cycle can form; and because
`trace_gym.worlds` is already among the modules generated env code may import, so a
synthesized env can read the records too. Adding a domain: a world package with its
`DOMAIN`, listed in `DOMAINS` below (trace_gym/worlds/airline/README.md says the rest).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType

from trace_gym.errors import InvalidConfig
from trace_gym.worlds import airline, retail
from trace_gym.worlds.domain import PROMPT_STYLES, Domain
from trace_gym.worlds.world import World

DOMAINS: Mapping[str, Domain] = MappingProxyType({d.name: d for d in (airline.DOMAIN, retail.DOMAIN)})
"""Domain name -> its record, in a fixed order (airline, retail): the order the built-in
targets are registered and listed in."""


def domain_named(name: str) -> Domain:
    """The record of the domain called `name`; an unknown name is an InvalidConfig that
    names it, the nearest known name and every known one."""
    found = DOMAINS.get(name) if isinstance(name, str) else None
    if found is None:
        close = difflib.get_close_matches(str(name), list(DOMAINS), n=1, cutoff=0.5)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        raise InvalidConfig(f"unknown domain {name!r}.{hint} Known domains: {', '.join(DOMAINS)}.")
    return found


__all__ = ["DOMAINS", "PROMPT_STYLES", "Domain", "World", "domain_named"]
