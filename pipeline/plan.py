"""`trace-gym pipeline --dry-run`: what each stage would play, and how long it would take here.

The configuration is checked (every table, the trainer's recipe, the base agent's recipe and
every env's knobs, each env made once) and no model is loaded. Each stage estimates itself
(`Stage.estimate`): its episodes over the rate this machine measured for the same kind of
work (`trace_gym.pipeline.estimates`). Which capability envs the analysis selects is not
known before it runs, so the stages after it are planned for every shipped capability env of
the run's domain: an upper bound.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trace_gym import rates
from trace_gym.pipeline import stages as stage_list
from trace_gym.pipeline.contract import RunConfig, Stage, Step
from trace_gym.pipeline.estimates import capability_envs, minutes

BUDGET_S = 60 * 60
"""The default run's budget after the base agent is built (60 minutes on a 2-core CPU with
native bf16)."""


def plan(config: RunConfig, stages: list[Stage[Any, Any]] | None = None) -> list[Step]:
    """Each stage's work and estimate under `config` (a loaded pipeline configuration)."""
    stages = stage_list.STAGES if stages is None else stages
    return [step for i, stage in enumerate(stages) for step in stage.estimate(config, stages[:i])]


def check(config: RunConfig) -> None:
    """Refuse a configuration whose envs or knobs cannot be made (as the stages would, later)."""
    import gymnasium as gym

    import trace_gym  # noqa: F401  (registers the envs)
    from trace_gym.errors import InvalidConfig

    for env_id in [*config.targets, *capability_envs(config)]:
        try:
            env = gym.make(env_id, **config.knobs(env_id))
            env.reset(seed=0)  # some knobs are read when a task is drawn
            env.close()
        except Exception as exc:  # the env's own message names the knob
            raise InvalidConfig(f"{config.source}: {env_id} with knobs {config.knobs(env_id)}: {exc}") from None


def render(steps: list[Step], config: RunConfig) -> str:
    """The plan as lines of text: a line per stage, then the total against the budget."""
    lines = [f"plan of {config.source} (budget {config.budget}); estimates from this machine's "
             f"measured rates ({rates.rates_path()})"]
    for s in steps:
        estimate = minutes(s.seconds) if s.seconds is not None else "not estimated"
        lines.append(f"  {s.stage:12s} {estimate:>14s}  {s.work}  [{s.basis}]")
    known = [(s.stage, s.seconds) for s in steps if s.seconds is not None]
    total = sum(seconds for _, seconds in known)
    unknown = [s.stage for s in steps if s.seconds is None]
    after_build = [(stage, seconds) for stage, seconds in known if stage != "base_agent"]
    lines.append(f"total: {minutes(total)}" + (f" and {', '.join(unknown)} not estimated" if unknown else ""))
    if sum(seconds for _, seconds in after_build) > BUDGET_S:
        longest = sorted(after_build, key=lambda s: -s[1])[:2]
        lines.append(f"over the {BUDGET_S // 60}-minute budget after the build "
                     f"({minutes(sum(seconds for _, seconds in after_build))}): the longest stages are "
                     f"{', '.join(f'{stage} ({minutes(seconds)})' for stage, seconds in longest)}; "
                     "shrink their sizes in the config's [budgets.default] tables")
    return "\n".join(lines)


def dry_run(config_path: str | Path | None = None, budget: str = "default", domain: str | None = None,
            overrides: dict[str, Any] | None = None) -> str:
    """Check the configuration (`overrides`, table by table, over the file's; `domain`:
    `--domain`) and return the plan, without loading a model."""
    from trace_gym.pipeline.config import load

    config = load(config_path, budget, overrides, domain=domain)
    check(config)
    return render(plan(config), config)
