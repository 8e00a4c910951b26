"""The property-test kit: what every trace-gym env must satisfy, as library code.

    >>> from trace_gym.testing import EnvRef, KitSettings, run_kit
    >>> ref = EnvRef(env_id="trace/precondition_verification-v0")
    >>> report = run_kit(ref, KitSettings(examples=5, oracle_seeds=5),
    ...                  only=["gym_api", "oracle_solves", "rewards_in_range"])
    >>> report.passed, [r.name for r in report.results], report.failures()
    (True, ['gym_api', 'oracle_solves', 'rewards_in_range'], [])

Without `only`, every property of the env's kind runs (`default_properties`: the
customer-service ones, about half a minute an env, or the coding ones).

The test suite runs it over every registered env; `trace-gym audit` runs it over generated
code before any training. The kit always runs in a trusted process: generated code is loaded
only by a sandboxed env worker, and the kit drives it through `RemoteEnv` (see EnvRef).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trace_gym.errors import InvalidConfig
from trace_gym.sandbox.pool import WorkerLost
from trace_gym.testing.envref import EnvRef
from trace_gym.testing.properties import (
    CODING_PROPERTIES,
    CUSTOMER_SERVICE_PROPERTIES,
    HYPOTHESIS_SEED,
    PROPERTIES,
    KitSettings,
    PropertyFailed,
)
from trace_gym.testing.version import KIT_VERSION


@dataclass(frozen=True)
class PropertyResult:
    """The outcome of one property on one env: passed or not, what it found, and how long it took."""

    name: str
    passed: bool
    detail: str
    seconds: float = field(default=0.0, compare=False)

    def to_json(self, timings: bool = False) -> dict[str, Any]:
        """The result as JSON; the seconds only with `timings` (an audit lock holds none)."""
        out = {"name": self.name, "passed": self.passed, "detail": self.detail}
        if timings:
            out["seconds"] = round(self.seconds, 3)
        return out


@dataclass(frozen=True)
class KitReport:
    """Every property's result for one env."""

    env: str
    results: tuple[PropertyResult, ...]

    @property
    def passed(self) -> bool:
        """Whether every property held."""
        return all(r.passed for r in self.results)

    def failures(self) -> list[str]:
        """'name: detail' of each property that failed."""
        return [f"{r.name}: {r.detail}" for r in self.results if not r.passed]


def run_property(name: str, ref: EnvRef, settings: KitSettings = KitSettings(), **kwargs: Any) -> PropertyResult:
    """Run one property of the kit on `ref`; a failure, or an env that raises, is a failed result,
    never an exception (but for a resource limit or a lost worker)."""
    start = time.perf_counter()
    try:
        detail = PROPERTIES[name](ref, settings, **kwargs)
        passed = True
    except PropertyFailed as exc:
        detail, passed = str(exc), False
    except (MemoryError, WorkerLost):  # a resource limit or a lost worker, not a property: stop the kit
        raise
    except Exception as exc:  # noqa: BLE001  (an env that crashes fails the property, with the error)
        detail, passed = f"raised {type(exc).__name__}: {exc}", False
    return PropertyResult(name, passed, detail, time.perf_counter() - start)


def default_properties(ref: EnvRef) -> tuple[str, ...]:
    """The properties `run_kit` runs on `ref` unless told: the coding ones for an env that
    offers a coding tool (`trace_gym.testing.coding.CODING_TOOLS`), else the customer-service ones."""
    from trace_gym.testing.coding import CODING_TOOLS

    env = ref.make()
    try:
        coding = bool(CODING_TOOLS & set(env.action_space.toolset))
    finally:
        env.close()
    return CODING_PROPERTIES if coding else CUSTOMER_SERVICE_PROPERTIES


def run_kit(ref: EnvRef, settings: KitSettings = KitSettings(), only: list[str] | None = None,
            skip: list[str] | None = None, on_result: Callable[[PropertyResult], None] | None = None) -> KitReport:
    """Run the kit's properties on `ref` (all, or `only` those, less `skip`), telling
    `on_result` each result as it comes; an unknown property name is refused."""
    names = [n for n in (only or default_properties(ref)) if n not in (skip or [])]
    unknown = [n for n in names if n not in PROPERTIES]
    if unknown:
        raise InvalidConfig(f"unknown properties {unknown}; known: {', '.join(PROPERTIES)}")
    results = []
    for name in names:
        results.append(run_property(name, ref, settings))
        if on_result is not None:
            on_result(results[-1])
    return KitReport(ref.describe(), tuple(results))


__all__ = ["KIT_VERSION", "HYPOTHESIS_SEED", "EnvRef", "KitSettings", "KitReport", "PropertyResult",
           "PropertyFailed", "PROPERTIES", "CODING_PROPERTIES", "CUSTOMER_SERVICE_PROPERTIES", "default_properties",
           "run_kit", "run_property"]
