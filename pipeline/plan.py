"""`trace-gym pipeline --dry-run`: what each stage would play, and how long it would take here.

The configuration is checked (every table, the trainer's recipe, the base agent's recipe and
every env's knobs, each env made once) and no model is loaded. Each stage's estimate is its
episodes over the rate this machine measured for the same kind of work (`trace_gym.rates`:
every rollout, training iteration and base-agent build records one); a stage with no measured
rate says so instead of guessing. Which capability envs the analysis selects is not known
before it runs, so the stages after it are planned for every shipped capability env of the
run's domain (`[pipeline] domain`): an upper bound. Episodes the base agent plays on an
endpoint (`[base_agent] base_url`) are not estimated: no rate is measured for a server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trace_gym import rates
from trace_gym.pipeline.config import PIPELINE_DOMAINS, domain_of, endpoint, given_model, knobs, recipe_table

BUDGET_S = 60 * 60
"""The default run's budget after the base agent is built (issue text: 60 minutes on a
2-core CPU with native bf16)."""


@dataclass
class Step:
    """One line of the plan."""

    stage: str
    work: str
    """What the stage does, in words."""
    seconds: float | None
    """The estimate, None where this machine has measured no rate for the work."""
    basis: str
    """What the estimate rests on."""


def _capability_envs(config: dict[str, Any]) -> list[str]:
    """The shipped capability envs of the run's domain."""
    return list(domain_of(config).capability_envs.values())


def _player(temperature: float) -> str:
    """The rate key of the pipeline's local model at `temperature` (its default engine and
    the precision "auto" resolves to here)."""
    from trace_gym.agents.base import DEFAULT_ENGINE
    from trace_gym.agents.hardware import placement

    return rates.player({"name": "local", "engine": DEFAULT_ENGINE, "dtype": placement("auto").dtype,
                         "temperature": temperature})


def _episodes(stage: str, work: str, what: str | dict[str, str], counts: dict[str, int]) -> Step:
    """A stage that plays `counts[env]` episodes of each env, at the rate measured for `what`
    (a dict: the endpoint the episodes are played on, whose rate is not measured)."""
    if isinstance(what, dict):
        return Step(stage, work, None, f"played on the endpoint {what['base_url']} ({what['model']}): no rate is "
                                       "measured for a server")
    seconds, bases = 0.0, []
    for env_id, n in counts.items():
        measured = rates.rate(what, env_id)
        if measured is None:
            return Step(stage, work, None, f"no rate measured on this machine for {what} on {env_id}")
        seconds += n / measured.per_minute * 60
        bases.append(f"{measured.per_minute:.1f}/min on {measured.measured_on}")
    return Step(stage, work, seconds, f"{what}: " + "; ".join(dict.fromkeys(bases)))


def _base_agent(config: dict[str, Any]) -> Step:
    import json

    section = config["base_agent"]
    if section["fixture"]:
        return Step("base_agent", "the committed test fixture (no build)", 0.0, "nothing to build")
    model = given_model(config)
    if model:
        here = "" if (Path(model) / "config.json").is_file() else " (not a model directory on this machine)"
        served = endpoint(config)
        work = f"the given model {model}{here}, as is" + (f", served by {served['base_url']} as {served['model']!r}"
                                                           if served else "")
        return Step("base_agent", work, 0.0, "nothing to build")
    from trace_gym.baseagent.build import BaseAgentConfig, default_out

    recipe = BaseAgentConfig.from_table(recipe_table(config), where=f"{config['source']} [base_agent]",
                                        seed=config["pipeline"]["seed"])
    out = default_out(recipe)
    record = out / "trace_gym_build.json"
    try:
        built = json.loads(record.read_text()).get("config") == json.loads(json.dumps(recipe.identity()))
    except (OSError, ValueError):
        built = False
    if built:
        return Step("base_agent", f"cached: {out}", 0.0, "built before")
    # the recipe builds the customer-service agent: its demonstrations are of that domain's envs
    demos = (2 * recipe.episodes + len(PIPELINE_DOMAINS["customer_service"].capability_envs)
             * recipe.capability_episodes) * recipe.epochs
    measured = rates.rate("base-agent build", recipe.source)
    work = f"build {out.name}: SFT on about {demos} oracle demonstrations (once; then cached)"
    if measured is None:
        return Step("base_agent", work, None, "no build measured on this machine")
    return Step("base_agent", work, demos / measured.per_minute * 60,
                f"builds here: {measured.per_minute:.1f} demonstrations/min")


def plan(config: dict[str, Any]) -> list[Step]:
    """Each stage's work and estimate under `config` (a loaded pipeline configuration)."""
    targets = config["pipeline"]["targets"]
    capability = _capability_envs(config)
    greedy, sampled = _player(0.0), _player(1.0)
    served = endpoint(config)  # the base agent's own episodes play there, not on a local engine
    base_greedy, base_sampled = (served, served) if served else (greedy, sampled)
    rollout, calibration, evaluation = config["rollout"], config["calibrate"], config["eval"]
    steps = [_base_agent(config),
             _episodes("rollouts", f"{rollout['episodes']} greedy train episodes of each target", base_greedy,
                       {t: rollout["episodes"] for t in targets}),
             Step("analysis", f"{config['analysis']['labeller']} labeller, {config['analysis']['runs']} runs",
                  0.0 if config["analysis"]["labeller"] == "programmatic" else None,
                  "no model" if config["analysis"]["labeller"] == "programmatic" else "an analyst endpoint"),
             Step("envs, audit", f"the selected capabilities' envs (at most {len(capability)} shipped ones)", 0.0,
                  "shipped envs carry their audit records"),
             _episodes("calibrate", f"{calibration['seeds']} seeds x {calibration['samples']} samples of each env "
                                    "at temperature 1.0", base_sampled,
                       {e: calibration["seeds"] * calibration["samples"] for e in capability})]
    from trace_gym.pipeline.stages import train_config

    per_env = {e: train_config(config, e).iterations * train_config(config, e).groups
               * train_config(config, e).group_size for e in capability}
    backend = train_config(config, capability[0]).backend
    step = _episodes("train", f"one adapter per env: {next(iter(per_env.values()))} episodes each "
                              "(iterations x groups x group size)", f"train {backend}", per_env)
    if step.seconds is None:  # no training measured here: its rollouts alone, said so
        rollouts_only = _episodes("train", step.work, sampled, per_env)
        if rollouts_only.seconds is not None:
            step = Step("train", step.work, None, f"no training measured on this machine; its rollouts alone: "
                                                  f"{_minutes(rollouts_only.seconds)}")
    steps.append(step)
    compose = config["compose"]
    if served:  # the server plays the router; the mixture needs the weights in this process
        steps.append(Step("compose", "the task router only (no mixture: it needs the model's weights in this "
                                     "process)", 0.0, "writes router.json"))
    else:
        steps.append(_episodes("compose", f"{compose['episodes']} episodes of each adapter for gate data, "
                                          f"{compose['epochs']} epochs of gate training (not counted)", sampled,
                               {e: compose["episodes"] for e in capability}))
    contenders = 1 + len(capability) + (1 if served else 2)  # base, each adapter, router, mixture (not served)
    if config["baselines"]["direct_grpo"]:
        contenders += len(targets)
    if config["baselines"]["gepa"]:
        calls = config["baselines"]["gepa_max_metric_calls"]
        steps.append(_episodes("gepa", f"at most {calls} greedy train episodes of each target, and the reflection "
                                       "model's calls (not counted)", base_greedy, {t: calls for t in targets}))
        contenders += 1
    work = f"{contenders} policies x {evaluation['seeds']} greedy test episodes of each target"
    if served:  # every row on the endpoint (the adapters loaded at runtime)
        steps.append(Step("eval", work, None, f"every row plays on the endpoint {served['base_url']}: no rate is "
                                              "measured for a server"))
    else:
        steps.append(_episodes("eval", work, greedy, {t: contenders * evaluation["seeds"] for t in targets}))
    return steps


def check(config: dict[str, Any]) -> None:
    """Refuse a configuration whose envs or knobs cannot be made (as the stages would, later)."""
    import gymnasium as gym

    import trace_gym  # noqa: F401  (registers the envs)
    from trace_gym.errors import InvalidConfig

    for env_id in [*config["pipeline"]["targets"], *_capability_envs(config)]:
        try:
            env = gym.make(env_id, **knobs(config, env_id))
            env.reset(seed=0)  # some knobs are read when a task is drawn
            env.close()
        except Exception as exc:  # the env's own message names the knob
            raise InvalidConfig(f"{config['source']}: {env_id} with knobs {knobs(config, env_id)}: {exc}") from None


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def render(steps: list[Step], config: dict[str, Any]) -> str:
    """The plan as lines of text: a line per stage, then the total against the budget."""
    lines = [f"plan of {config['source']} (budget {config['budget']}); estimates from this machine's "
             f"measured rates ({rates.rates_path()})"]
    for s in steps:
        estimate = _minutes(s.seconds) if s.seconds is not None else "not estimated"
        lines.append(f"  {s.stage:12s} {estimate:>14s}  {s.work}  [{s.basis}]")
    known = [s for s in steps if s.seconds is not None]
    total = sum(s.seconds for s in known)
    unknown = [s.stage for s in steps if s.seconds is None]
    after_build = sum(s.seconds for s in known if s.stage != "base_agent")
    lines.append(f"total: {_minutes(total)}" + (f" and {', '.join(unknown)} not estimated" if unknown else ""))
    if after_build > BUDGET_S:
        longest = sorted((s for s in known if s.stage != "base_agent"), key=lambda s: -s.seconds)[:2]
        lines.append(f"over the {BUDGET_S // 60}-minute budget after the build ({_minutes(after_build)}): "
                     f"the longest stages are {', '.join(f'{s.stage} ({_minutes(s.seconds)})' for s in longest)}; "
                     "shrink their sizes in the config's [budgets.default] tables")
    return "\n".join(lines)


def dry_run(config_path: str | Path | None = None, budget: str = "default", domain: str | None = None) -> str:
    """Check the configuration (`domain`: `--domain`, over the file's) and return the plan,
    without loading a model."""
    from trace_gym.pipeline.config import load

    config = load(config_path, budget, domain=domain)
    check(config)
    return render(plan(config), config)
