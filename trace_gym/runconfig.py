"""Run configurations: TOML files (the shipped ones in configs/, by name: `embedded`) that the
pipeline, the trainer and the benchmarks read.

    [env_knobs."trace/precondition_verification-v0"]
    prompt_style = "compact"
    forbidden_rate = 0.6

`env_knobs` holds, per env id, the `gym.make` keyword arguments a run uses for that env (the
difficulty a base agent is calibrated at, say). Unknown top-level tables are refused, and a
knob is checked by the env itself when it is made, with its own error naming the field.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from trace_gym.errors import InvalidConfig

EMBEDDED_PROMPT_STYLE = "compact"
"""The prompt style the embedded base agent is built and played with: the short policy
texts (`policy_compact.md`) that a 135M model's context holds. Every default that plays
the embedded agent takes it from here (`embedded_knobs`); `gym.make` keeps "full"."""

def load(path: str | Path) -> dict[str, Any]:
    """The run configuration at `path` (or the shipped one of that name), its `env_knobs`
    checked: the one TOML reader of every step. Which tables a file may hold is the
    pipeline's to say (its stages declare them: `trace_gym.pipeline.config.check_tables`,
    which every command that takes `--config` runs); each reader checks the keys of its own."""
    if sys.version_info >= (3, 11):  # a version check, not an ImportError, so that a type checker follows it
        import tomllib
    else:  # Python 3.10: its backport, a dependency there
        import tomli as tomllib
    from trace_gym.resources import SHIPPED_CONFIGS, config_path

    if str(path) in SHIPPED_CONFIGS:
        path = config_path(path)
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        import difflib

        near = difflib.get_close_matches(str(path.name if path.suffix == ".toml" else path), SHIPPED_CONFIGS, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise InvalidConfig(f"no run configuration at {path} (nor a shipped one: {', '.join(SHIPPED_CONFIGS)})"
                            f"{hint}") from None
    except tomllib.TOMLDecodeError as exc:
        raise InvalidConfig(f"{path} is not valid TOML: {exc}") from None
    for env_id, knobs in data.get("env_knobs", {}).items():
        if not isinstance(knobs, dict):
            raise InvalidConfig(f"{path}: env_knobs.{env_id!r} must be a table of knobs")
    return data


def env_knobs(path: str | Path, env_id: str) -> dict[str, Any]:
    """The knobs the configuration sets for `env_id` ({} when it sets none)."""
    return dict(load(path).get("env_knobs", {}).get(env_id, {}))


def target_knobs(env_id: str, knobs: dict[str, Any]) -> dict[str, Any]:
    """`knobs` as the target `env_id` takes them: a `kinds` list naming the kinds of several
    targets keeps only this target's (all of its kinds where it names none of them), so one
    table of demonstration knobs serves both targets.

    >>> target_knobs("trace/retail-v0", {"kinds": ["cancel_order", "flight_status"], "distractors": 0})
    {'kinds': ['cancel_order'], 'distractors': 0}
    >>> target_knobs("trace/airline-v0", {"kinds": ["cancel_order"]})
    {}
    """
    if "kinds" not in knobs or knobs["kinds"] is None:
        return dict(knobs)
    from trace_gym.worlds import DOMAINS

    domain = next((d for d in DOMAINS.values() if d.target_env_id == env_id), None)
    if domain is None:
        return dict(knobs)
    own = [k for k in knobs["kinds"] if k in domain.kinds]
    out = {k: v for k, v in knobs.items() if k != "kinds"}
    return {"kinds": own, **out} if own else out


def embedded_knobs(knobs: dict[str, Any] | None = None) -> dict[str, Any]:
    """`knobs` over the embedded base agent's prompt style: the env knobs of a run that
    plays the embedded agent, where a configuration does not say otherwise.

    >>> embedded_knobs({"distractors": 1})
    {'prompt_style': 'compact', 'distractors': 1}
    >>> embedded_knobs({"prompt_style": "full"})
    {'prompt_style': 'full'}
    """
    return {"prompt_style": EMBEDDED_PROMPT_STYLE, **(knobs or {})}
