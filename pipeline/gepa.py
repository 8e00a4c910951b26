"""GEPA prompt optimisation, a baseline for the whole loop: the base agent's instructions
evolved by reflection (the PyPI `gepa` package, `gepa.optimize`) on a target's train seeds.

The candidate has one component, `instructions`: text appended to the agent's system prompt
(the targets' `agent_instructions` knob), starting empty, so the seed candidate is the base
agent itself. A candidate is scored by playing train seeds with the base agent, greedy, and
taking each episode's reward; the reflection model (an OpenAI-compatible endpoint, or any
callable from prompt to text) reads, for a minibatch, each transcript and what its verdict
failed, and proposes new instructions. `max_metric_calls` bounds the episodes GEPA plays.
The result is the best candidate on the validation seeds (other train seeds); the pipeline
then evaluates it on the test seeds like any other contender.

Randomness: GEPA draws minibatches from its own seeded generator (`seed`); the episodes are
the envs' seeds, played greedy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from trace_gym.errors import InvalidConfig

COMPONENT = "instructions"


def _require_gepa() -> Any:
    try:
        import gepa
    except ImportError:
        raise InvalidConfig("the GEPA baseline needs the gepa package: pip install 'trace-gym[gepa]'") from None
    return gepa


def endpoint_lm(base_url: str, model: str, api_key: str = "EMPTY", timeout: float = 600) -> Callable[[str], str]:
    """A reflection model on an OpenAI-compatible endpoint: prompt (or messages) -> text."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=3, timeout=timeout)

    def complete(prompt: str | list[dict[str, Any]]) -> str:
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        return client.chat.completions.create(model=model, messages=cast(Any, messages),  # OpenAI's message types
                                              temperature=0.7).choices[0].message.content or ""

    return complete


def feedback(record: dict[str, Any]) -> str:
    """What the verdict says of one episode, for the reflection model."""
    verdict = record.get("verdict") or {}
    failed = [f"{c['name']}" + (f" ({c['detail']})" if c.get("detail") else "")
              for c in verdict.get("checks", []) if not c.get("passed")]
    if record.get("error"):
        return f"the episode failed: {record['error']}"
    return (f"reward {record['reward']:.2f}, ended by {record['termination_reason']}; "
            + (f"failed checks: {'; '.join(failed)}" if failed else "every check passed"))


def transcript(record: dict[str, Any], limit: int = 6000) -> str:
    """The conversation after the system prompt, one line a message, cut to `limit` characters."""
    lines = []
    for m in record.get("messages", [])[1:]:
        calls = m.get("tool_calls") or []
        said = m.get("content") or ""
        if calls:
            said += " " + " ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in calls)
        lines.append(f"{m['role']}: {said.strip()}")
    text = "\n".join(lines)
    return text if len(text) <= limit else text[: limit // 2] + "\n...\n" + text[-limit // 2:]


@dataclass
class TargetAdapter:
    """A `gepa.GEPAAdapter` over one target: a candidate's instructions go into the env's
    `agent_instructions`; each data instance is a train seed."""

    env_id: str
    knobs: dict[str, Any]
    factory: Any
    """The base agent's policy factory (greedy)."""
    in_flight: int = 16

    def evaluate(self, batch: list[int], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        """Play one episode per seed of `batch` with the candidate's instructions; the
        rewards are the scores, and the trajectory records the outputs (and the traces, with
        `capture_traces`)."""
        from gepa import EvaluationBatch

        from trace_gym.driver import EpisodeRequest, play

        knobs = {**self.knobs, "agent_instructions": candidate.get(COMPONENT, "")}
        records = {p.seed: p.record() for p in play([EpisodeRequest(seed) for seed in batch], self.factory,
                                                    env_id=self.env_id, env_kwargs=knobs, in_flight=self.in_flight)}
        ordered = [records[seed] for seed in batch]
        return EvaluationBatch(outputs=ordered, scores=[float(r["reward"]) for r in ordered],
                               trajectories=ordered if capture_traces else None)

    def make_reflective_dataset(self, candidate: dict[str, str], eval_batch: Any,
                                components_to_update: list[str]) -> dict[str, list[dict[str, Any]]]:
        """For each component to update, one row per evaluated episode: what the agent was
        given, its transcript, and the verifier's feedback."""
        rows = [{"Inputs": "A customer-service conversation under the policy in the agent's system prompt.",
                 "Generated Outputs": transcript(r), "Feedback": feedback(r)}
                for r in eval_batch.trajectories or []]
        return {name: rows for name in components_to_update}

    propose_new_texts = None  # GEPA's own reflective proposal


class _Quiet:
    def log(self, message: str) -> None:  # GEPA's progress lines stay out of the pipeline's display
        pass


def optimize_instructions(env_id: str, knobs: dict[str, Any], factory: Any, reflection_lm: Callable[[str], str],
                          train_seeds: Sequence[int], val_seeds: Sequence[int], max_metric_calls: int,
                          seed: int = 0, run_dir: str | Path | None = None) -> dict[str, Any]:
    """Run GEPA; the best instructions and their validation score, with the seed candidate's."""
    gepa = _require_gepa()
    if max_metric_calls < len(val_seeds):
        raise InvalidConfig(f"gepa: max_metric_calls={max_metric_calls} cannot even score the seed candidate on "
                            f"{len(val_seeds)} validation seeds")
    adapter = TargetAdapter(env_id, dict(knobs), factory)
    result = gepa.optimize(seed_candidate={COMPONENT: ""}, trainset=list(train_seeds), valset=list(val_seeds),
                           adapter=adapter, reflection_lm=reflection_lm, max_metric_calls=max_metric_calls,
                           seed=seed, logger=_Quiet(), display_progress_bar=False,
                           run_dir=str(run_dir) if run_dir else None, raise_on_exception=True)
    scores = list(result.val_aggregate_scores)
    best = result.best_idx
    out = {"instructions": result.candidates[best][COMPONENT], "val_score": scores[best],
           "seed_val_score": scores[0], "candidates": len(result.candidates),
           "metric_calls": result.total_metric_calls}
    if run_dir:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / "result.json").write_text(json.dumps(out, indent=1))
    return out
