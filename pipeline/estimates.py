"""What a stage's estimate rests on: this machine's measured rates (`trace_gym.rates`: every
rollout, training iteration and base-agent build records one). A stage with no measured rate
says so instead of guessing; episodes played on an endpoint are not estimated (no rate is
measured for a server)."""

from __future__ import annotations

from trace_gym import rates
from trace_gym.pipeline.contract import RunConfig, Step
from trace_gym.pipeline.domains import PIPELINE_DOMAINS


def capability_envs(config: RunConfig) -> list[str]:
    """The shipped capability envs of the run's domain: which ones the analysis selects is not
    known before it runs, so the stages after it are planned for all of them (an upper bound)."""
    return list(PIPELINE_DOMAINS[config.domain].capability_envs.values())


def player(temperature: float) -> str:
    """The rate key of the pipeline's local model at `temperature` (its default engine and the
    precision "auto" resolves to here)."""
    from trace_gym.agents.base import DEFAULT_ENGINE
    from trace_gym.agents.hardware import placement

    key = rates.player({"name": "local", "engine": DEFAULT_ENGINE, "dtype": placement("auto").dtype,
                        "temperature": temperature})
    assert key is not None  # a "local" policy always has a rate key
    return key


def minutes(seconds: float) -> str:
    """Seconds as minutes, one decimal."""
    return f"{seconds / 60:.1f} min"


def episodes(stage: str, work: str, what: str | dict[str, str], counts: dict[str, int]) -> Step:
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


def base_players(config: RunConfig) -> tuple[str | dict[str, str], str | dict[str, str]]:
    """What plays the base agent's own greedy and sampled episodes: its endpoint (both), or
    the local model's rate keys."""
    from trace_gym.pipeline.stages.base_agent import endpoint

    served = endpoint(config)
    return (served, served) if served else (player(0.0), player(1.0))
