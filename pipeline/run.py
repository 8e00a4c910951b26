"""`trace-gym pipeline`: the four steps of TRACE end to end on one run directory.

base agent -> its rollouts on the targets' train seeds -> capability analysis -> the envs of
the selected capabilities (shipped, or synthesized when an endpoint is configured) -> their
audit -> calibration of the base agent on them -> one adapter per env -> composition (task
router and mixture) -> evaluation on the targets' test seeds (base, each adapter, router,
mixture, direct GRPO on each target with the same rollout budget when
`baselines.direct_grpo`, and the base agent with GEPA's instructions when `baselines.gepa`)
-> the report.

Every stage is skipped when its inputs are unchanged (`trace_gym.pipeline.stages.Run`), so
a second run reuses everything and a killed one resumes at the stage in flight.

`[pipeline] domain` (`--domain`) picks the targets and the capabilities the analysis may
select: "customer_service" (airline, retail) or "coding" (`trace/coding-v0`, whose base
agent is a given model served by vLLM, or the fixture on the smoke budget; the shipped
`coding` configuration).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trace_gym.pipeline import report, stages
from trace_gym.pipeline.clock import Clock, estimates
from trace_gym.pipeline.config import DEFAULT_DOMAIN, load

STAGES = ("base_agent", "rollouts", "analysis", "envs", "audit", "calibrate", "train", "compose", "eval", "report")


def run_pipeline(config_path: str | Path | None = None, out: str | Path = "runs/pipeline", budget: str = "default",
                 log: Callable[[str], None] | None = None, overrides: dict[str, Any] | None = None,
                 domain: str | None = None) -> dict[str, Any]:
    """Run every stage of the pipeline on the run directory `out`, reusing each stage whose
    inputs are unchanged, and write the report (`domain`: `--domain`, over the file's).
    Returns the run's state: every stage's record."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    config = load(config_path, budget, overrides, domain)
    # the domain decides what the analysis may select and which env a capability trains on;
    # named in the inputs only off the default, so that earlier runs' stages stay reusable
    in_domain = {} if config["pipeline"]["domain"] == DEFAULT_DOMAIN else {"domain": config["pipeline"]["domain"]}
    console = Console(stderr=True)
    say = log or (lambda m: console.print(f"[dim]{m}[/dim]"))
    run = stages.Run(Path(out), say)
    state: dict[str, Any] = {"config": config}
    live = log is None and console.is_terminal  # else a line a minute says what the display would
    timer = Clock(estimates(config), say, ticking=not live)

    class Left(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(timer.left(), style="dim")

    progress = Progress(TextColumn("pipeline {task.fields[stage]}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), Left(), console=console, disable=not live)
    with progress, timer:
        task = progress.add_task("pipeline", total=len(STAGES), stage="")

        def step(name: str, advance: int = 1) -> None:
            progress.update(task, advance=advance, stage=name)
            timer.start(name)

        step("base_agent", advance=0)
        agent = state["agent"] = run.stage("base_agent", {"section": config["base_agent"],
                                                          "seed": config["pipeline"]["seed"]},
                                           lambda d: stages.base_agent(config, d))
        step("rollouts")
        runs = run.stage("rollouts", {"agent": agent, "section": config["rollout"],
                                      "targets": config["pipeline"]["targets"], "knobs": config["env_knobs"],
                                      "code": _codes(config["pipeline"]["targets"])},
                         lambda d: stages.rollouts(config, agent, d))
        state["rollouts"] = runs
        step("analysis")
        state["analysis"] = run.stage("analysis", {"runs": runs, "section": config["analysis"], **in_domain},
                                      lambda d: stages.analysis(config, runs, d))
        step("envs")
        state["envs"] = run.stage("envs", {"analysis": state["analysis"], "section": config["synthesis"],
                                           **in_domain},
                                  lambda d: stages.envs(config, state["analysis"], runs, d))
        step("audit")
        state["audit"] = run.stage("audit", {"envs": state["envs"], "kit": _kit_key()},
                                   lambda d: stages.audit(config, state["envs"], d))
        step("calibrate")
        state["calibration"] = run.stage("calibrate", {"agent": agent, "audit": state["audit"],
                                                       "section": config["calibrate"], "knobs": config["env_knobs"],
                                                       "code": _codes(e["env_id"] for e in
                                                                      state["audit"]["trainable"])},
                                         lambda d: stages.calibrate(config, agent, state["audit"], d))
        step("train")
        adapters = {}
        for env in state["audit"]["trainable"]:
            env_id = env["env_id"]
            adapters[env_id] = run.stage(f"train-{env['capability']}", _train_inputs(config, agent, env_id),
                                         lambda d, e=env_id: stages.train(config, agent, e, d))
        state["adapters"] = adapters
        state["direct"] = {}
        if config["baselines"]["direct_grpo"] and adapters:
            budget_episodes = sum(a["episodes"] for a in adapters.values())
            per_iteration = _train_config(config, config["pipeline"]["targets"][0]).groups * \
                _train_config(config, config["pipeline"]["targets"][0]).group_size
            iterations = max(1, math.ceil(budget_episodes / per_iteration))
            for target in config["pipeline"]["targets"]:  # the same number of episodes as all adapters together
                state["direct"][target] = run.stage(
                    f"direct-{target.split('/')[1]}", {**_train_inputs(config, agent, target), "iterations": iterations},
                    lambda d, t=target: stages.train(config, agent, t, d, iterations=iterations, hint_fraction=0.0))
        state["gepa"], state["gepa_note"] = {}, None
        section = config["baselines"]
        if section["gepa"] and not section["gepa_base_url"]:
            state["gepa_note"] = ("GEPA is on but [baselines] gepa_base_url names no reflection model (an "
                                  "OpenAI-compatible endpoint), so there is no GEPA row.")
        elif section["gepa"]:
            for target in config["pipeline"]["targets"]:
                state["gepa"][target] = run.stage(
                    f"gepa-{target.split('/')[1]}", {"agent": agent, "section": section,
                                                     "knobs": config["env_knobs"].get(target, {}),
                                                     "code": _codes([target]), "eval": config["eval"]},
                    lambda d, t=target: stages.gepa(config, agent, t, d))
        step("compose")
        state["compose"] = None
        if adapters:
            state["compose"] = run.stage("compose", {"agent": agent, "adapters": adapters,
                                                     "section": config["compose"], "knobs": config["env_knobs"],
                                                     "code": _codes(adapters)},
                                         lambda d: stages.compose(config, agent, adapters, d))
        else:
            state["compose_note"] = "No adapter was trained, so there is nothing to compose."
        step("eval")
        policies = stages.contenders(config, agent, adapters, state["compose"], state["direct"], state["gepa"])
        extra = stages.instructed(state["gepa"])
        state["eval"] = run.stage("eval", {"agent": agent, "adapters": adapters, "compose": state["compose"],
                                           "direct": state["direct"], "section": config["eval"],
                                           "targets": config["pipeline"]["targets"], "knobs": config["env_knobs"],
                                           "code": _codes(config["pipeline"]["targets"]), "policies": sorted(policies),
                                           **({"gepa": extra} if extra else {})},
                                  lambda d: stages.evaluate(config, policies, d, extra))
        step("report")
        state["seconds"], state["skipped"] = run.seconds, run.skipped
        state["report"] = report.write(Path(out), state)
        progress.update(task, completed=len(STAGES), stage="done")
    return state


def _codes(env_ids: Any) -> dict[str, str]:
    """The code hash of every env a stage plays: a changed env reruns the stage."""
    from trace_gym.registry import env_sha256

    return {env_id: env_sha256(env_id) for env_id in sorted(env_ids)}


def _kit_key() -> dict[str, str]:
    from trace_gym.audit.lock import current_key

    return current_key()


def _train_config(config: dict[str, Any], env_id: str):
    return stages.train_config(config, env_id)


def _train_inputs(config: dict[str, Any], agent: dict[str, Any], env_id: str) -> dict[str, Any]:
    from trace_gym.registry import env_sha256

    return {"agent": agent, "config": _train_config(config, env_id).to_json(), "env_sha256": env_sha256(env_id)}


def main_table(state: dict[str, Any]) -> str:
    """The final table as text, for the terminal."""
    targets = state["config"]["pipeline"]["targets"]
    lines = ["policy".ljust(36) + "".join(t.split("/")[1].ljust(24) for t in targets)]
    for label in state["eval"].get("order", list(state["eval"]["table"])):
        row = state["eval"]["table"][label]
        lines.append(label.ljust(36) + "".join(
            f"{row[t]['pass_rate']:.3f} [{row[t]['ci95'][0]:.2f}, {row[t]['ci95'][1]:.2f}]".ljust(24) for t in targets))
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover
    state = run_pipeline(*sys.argv[1:2])
    print(main_table(state))
