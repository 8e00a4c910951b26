"""The pipeline's stages. Each writes into its own directory of the run and returns a JSON
record of its outputs; `Run.stage` skips a stage whose inputs (its configuration and the
records of the stages it reads, hashed) are those of its last finished run, so a rerun
redoes only what changed and a crash loses at most the stage in flight (training resumes
inside its stage from the trainer's own checkpoints)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trace_gym.jsondata import sha256_json, write_json_atomic
from trace_gym.pipeline.config import domain_of, endpoint, given_model, knobs, recipe_table
from trace_gym.provenance import dir_sha256
from trace_gym.seeding import band
from trace_gym.seeding import seeds as split_seeds

class Run:
    """A run directory and its stage records (`stages/NAME.json`)."""

    def __init__(self, out: Path, log: Callable[[str], None]) -> None:
        self.out, self.log = Path(out), log
        (self.out / "stages").mkdir(parents=True, exist_ok=True)
        self.seconds: dict[str, float] = {}
        self.skipped: list[str] = []

    def record(self, name: str) -> dict[str, Any] | None:
        """The record of stage `name`'s last finished run, or None."""
        path = self.out / "stages" / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    def stage(self, name: str, inputs: dict[str, Any], fn: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        """Stage `name`'s outputs: its last record's when `inputs` hash the same, else
        `fn(directory)` run (afresh when the inputs changed since its directory was made)
        and recorded."""
        key = sha256_json(inputs)
        done = self.record(name)
        if done is not None and done["inputs_sha256"] == key:
            self.seconds[name] = done["seconds"]
            self.skipped.append(name)
            self.log(f"{name}: unchanged, reused")
            return done["outputs"]
        directory = self.out / name
        # A stage killed under these inputs resumes from what its directory holds; one whose
        # inputs changed starts afresh (its resumable parts would refuse the new settings).
        marker = directory / ".inputs_sha256"
        if directory.exists() and (not marker.is_file() or marker.read_text().strip() != key):
            self.log(f"{name}: inputs changed, rerun" if done is not None or marker.is_file() else
                      f"{name}: running afresh")
            shutil.rmtree(directory)
        directory.mkdir(parents=True, exist_ok=True)
        marker.write_text(key + "\n")
        self.log(f"{name}: running")
        start = time.perf_counter()
        outputs = fn(directory)
        seconds = time.perf_counter() - start
        self.seconds[name] = seconds
        write_json_atomic(self.out / "stages" / f"{name}.json",
                          {"inputs_sha256": key, "outputs": outputs, "seconds": round(seconds, 1)})
        self.log(f"{name}: done in {seconds:.0f} s")
        return outputs


def file_sha(path: Path) -> str:
    """The sha256 of a file (or a directory's files)."""
    return dir_sha256(path)


def local_factory(path: str, temperature: float, max_new_tokens: int, **extra: Any):
    """The "local" policy's factory on the model `path`."""
    from trace_gym.agents.spec import PolicySpec

    return PolicySpec("local", {"model_path": path, "temperature": temperature, "max_new_tokens": max_new_tokens,
                                **extra})


def base_factory(config: dict[str, Any], agent: dict[str, Any], temperature: float, max_new_tokens: int):
    """The base agent's own policy factory: the "endpoint" policy on the server that
    `[base_agent] base_url` names (vLLM serving the given model), else the "local" one on
    its directory."""
    served = endpoint(config)
    if served is None:
        return local_factory(agent["path"], temperature, max_new_tokens)
    from trace_gym.agents.spec import PolicySpec

    return PolicySpec("endpoint", {"base_url": served["base_url"], "model": served["model"],
                                   "temperature": temperature, "max_tokens": max_new_tokens})


def _served(factory: Any) -> bool:
    """Whether the factory's policy waits on a server (its episodes then overlap in threads)."""
    from trace_gym.agents.spec import PolicySpec

    return isinstance(factory, PolicySpec) and factory.server


def play(env_id: str, factory: Any, seeds: list[int], out: Path, config: dict[str, Any], batch: int,
         samples: int = 1, knobs_added: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """Episodes appended to `out` (resumed), `batch` in flight at once (a model policy
    generates them together)."""
    from trace_gym.rollout import read_records, rollout

    rollout(env_id, factory, seeds, out, samples=samples, workers=batch, progress=True, threaded=_served(factory),
            env_kwargs={**knobs(config, env_id), **(knobs_added or {})})
    wanted = set(seeds)
    return [r for r in read_records(out) if r["seed"] in wanted and r["sample"] < samples]


# -- 1. the base agent -------------------------------------------------------------------------

def base_agent(config: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Stage 1: the base agent's model directory and its hash: the committed test fixture
    (built from its recipe when not in a checkout), the model `[base_agent] model` names,
    used as is (and, with `base_url`, the name its endpoint serves it under), or a build from
    the `[base_agent]` recipe."""
    section = config["base_agent"]
    model = given_model(config)
    if model:
        from trace_gym.errors import InvalidConfig

        if not (Path(model) / "config.json").is_file():
            raise InvalidConfig(f"{config['source']}: [base_agent] model={model!r} is not a model directory (no "
                                "config.json): name the directory of the weights (those the endpoint serves)")
        served = endpoint(config)
        return {"path": str(Path(model)), "sha256": dir_sha256(model),
                **({"served_model": served["model"]} if served else {})}
    if section["fixture"]:
        checkout = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tiny_agent"
        if (checkout / "config.json").is_file():
            path = checkout
        else:  # an installed package: build the same fixture with its from-scratch recipe
            from trace_gym.baseagent.scratch import FIXTURE_RECIPE, TinyAgentConfig, build

            path = build(TinyAgentConfig(**FIXTURE_RECIPE), directory / "fixture", log=None)
    else:
        from trace_gym.baseagent.build import BaseAgentConfig, build

        path = build(BaseAgentConfig.from_table(recipe_table(config), where=f"{config['source']} [base_agent]",
                                                seed=config["pipeline"]["seed"]), log=None)
    return {"path": str(path), "sha256": dir_sha256(path)}


# -- 2. rollouts of the base agent, 3. analysis ---------------------------------------------------

def rollouts(config: dict[str, Any], agent: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Stage 2: the base agent's greedy rollouts on each target's train seeds, with each
    file's hash and pass rate."""
    section = config["rollout"]
    factory = base_factory(config, agent, 0.0, section["max_new_tokens"])
    seeds = band("analysis_rollouts", section["episodes"])
    files = {}
    for env_id in config["pipeline"]["targets"]:
        path = directory / f"{env_id.split('/')[1]}.jsonl"
        records = play(env_id, factory, seeds, path, config, section["batch"])
        files[env_id] = {"path": str(path), "sha256": file_sha(path),
                         "pass_rate": sum(r["passed"] for r in records) / len(records)}
    return {"files": files}


def analysis(config: dict[str, Any], runs: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Stage 3: the capability analysis of the rollouts, and where its selected capabilities
    are written. A known capability of another domain (`trace_gym.capabilities.ALL` less the
    run's domain's) is not selected: its env trains another domain's agent."""
    from trace_gym import capabilities as cap
    from trace_gym.analysis.aggregate import Params, default_k
    from trace_gym.analysis.pipeline import AnalysisConfig, analyze

    section = config["analysis"]
    n = section["runs"]
    llm = section["labeller"] == "llm"
    data = analyze([Path(f["path"]) for f in runs["files"].values()], directory, AnalysisConfig(
        labeller=section["labeller"], runs=n, params=Params(k=default_k(n), n=n),
        base_url=section["base_url"] or None if llm else None, model=section["model"] or None if llm else None),
        log=lambda m: None)
    foreign = set(cap.ALL) - set(domain_of(config).capability_envs)
    out: dict[str, Any] = {"selected": str(directory / "selected_capabilities.json"), "capabilities": []}
    for c in data["capabilities"]:
        row = {"name": c["name"], "status": c["status"], "mean_delta": c.get("mean_delta"),
               "mean_cov": c.get("mean_cov")}
        if c["name"] in foreign and c["status"] != "NOT_SELECTED":
            row["status"] = "NOT_SELECTED"
            out.setdefault("notes", []).append(f"{c['name']}: selected by the analysis ({c['status']}) but a "
                                               f"capability of another domain than {domain_of(config).name!r}; "
                                               "not trained")
        out["capabilities"].append(row)
    return out


# -- 4. envs (shipped or synthesized), 5. audit -------------------------------------------------

def envs(config: dict[str, Any], selected: dict[str, Any], runs: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Stage 4: an env per selected capability: the shipped one of its name (the domain's
    env of that capability: `PipelineDomain.capability_envs`), or one synthesized when an
    endpoint is configured; notes say which capabilities got none."""
    chosen = [c for c in selected["capabilities"] if c["status"] != "NOT_SELECTED"]
    out, notes = [], list(selected.get("notes", []))
    pending = [c for c in chosen if c["status"] != "SHIPPED"]
    shipped = domain_of(config).capability_envs
    for c in chosen:
        if c["status"] == "SHIPPED":
            out.append({"capability": c["name"], "env_id": shipped.get(c["name"], f"trace/{c['name']}-v0"),
                        "origin": "shipped"})
    if pending and config["synthesis"]["base_url"]:
        from openai import OpenAI

        from trace_gym.analysis.trajectories import load_records
        from trace_gym.synthesis import synthesize

        section = config["synthesis"]
        client = OpenAI(base_url=section["base_url"], api_key="EMPTY", max_retries=3, timeout=600)

        def complete(messages):
            return client.chat.completions.create(model=section["model"] or "default", messages=messages,
                                                  temperature=0.7).choices[0].message.content or ""

        records = load_records([Path(f["path"]) for f in runs["files"].values()])
        for r in synthesize(Path(selected["selected"]), complete, records=records, run_dir=directory,
                            attempts=section["attempts"], log=lambda m: None):
            if r.status == "READY":
                out.append({"capability": r.capability, "env_id": r.env_id, "origin": "synthesized"})
            else:
                notes.append(f"{r.capability}: synthesis {r.status} after {r.attempts} attempt(s)")
    else:
        notes += [f"{c['name']}: no shipped env has this name and no synthesis endpoint is configured "
                  "([synthesis] base_url); not trained" for c in pending]
    return {"envs": out, "notes": notes}


def audit(config: dict[str, Any], chosen: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Which chosen envs may be trained on: what `trace_gym.registry.trust` says (generated
    code needs a passing audit for its current code, kit and library)."""
    from trace_gym.registry import REFUSED, trust

    out = []
    for env in chosen["envs"]:
        decision = trust(env["env_id"], training=True)
        out.append({**env, "runs": decision.mode, "audit": decision.reason})
    return {"envs": out, "trainable": [e for e in out if e["runs"] != REFUSED]}


# -- 6. calibration, 7. training --------------------------------------------------------------

def calibrate(config: dict[str, Any], agent: dict[str, Any], audited: dict[str, Any], directory: Path) -> dict[str, Any]:
    """Stage 6: the base agent's calibration (temperature 1.0, default bands) on each
    trainable env."""
    from trace_gym.calibration import Bands
    from trace_gym.calibration import calibrate as check

    section = config["calibrate"]
    factory = base_factory(config, agent, 1.0, config["rollout"]["max_new_tokens"])
    seeds = band("calibration", section["seeds"])
    out = {}
    for env in audited["trainable"]:
        records = play(env["env_id"], factory, seeds, directory / f"{env['capability']}.jsonl", config,
                       config["rollout"]["batch"], samples=section["samples"])
        result = check(records, Bands())
        out[env["env_id"]] = {k: result[k] for k in ("mean_reward", "success_rate", "reward_std", "calibrated",
                                                     "problems")}
    return out


def train_config(config: dict[str, Any], env_id: str, **overrides: Any):
    """The trainer's config for `env_id`: the `[train]` section, the env's knobs and the
    pipeline's seed, then `overrides`."""
    from trace_gym.trainer.config import GRPOConfig

    return GRPOConfig.from_dict({**config["train"], "env_id": env_id, "env_kwargs": knobs(config, env_id),
                                 "seed": config["pipeline"]["seed"], **overrides})


def train(config: dict[str, Any], agent: dict[str, Any], env_id: str, directory: Path, **overrides: Any
          ) -> dict[str, Any]:
    """Stage 7: train (or resume) one adapter on `env_id`; its directory, hash, episodes
    played and metrics file."""
    from trace_gym.trainer.training import train as run

    adapter = run(train_config(config, env_id, **overrides), agent["path"], directory, resume=True, log=None)
    rows = [json.loads(line) for line in (directory / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return {"adapter": str(adapter), "sha256": dir_sha256(adapter), "episodes": sum(r["episodes/total"] for r in rows),
            "metrics": str(directory / "metrics.jsonl")}


def gepa(config: dict[str, Any], agent: dict[str, Any], target: str, directory: Path) -> dict[str, Any]:
    """The GEPA baseline on one target: the base agent's instructions optimised on train seeds
    (`trace_gym.pipeline.gepa`); the test seeds stay for the evaluation."""
    from trace_gym.pipeline.gepa import endpoint_lm, optimize_instructions

    section = config["baselines"]
    train = band("gepa_train", section["gepa_train_seeds"])
    val = band("gepa_val", section["gepa_val_seeds"])
    factory = base_factory(config, agent, 0.0, config["eval"]["max_new_tokens"])
    return optimize_instructions(target, knobs(config, target), factory,
                                 endpoint_lm(section["gepa_base_url"], section["gepa_model"] or "default"),
                                 train, val, section["gepa_max_metric_calls"], seed=config["pipeline"]["seed"],
                                 run_dir=directory)


# -- 8. composition ---------------------------------------------------------------------------

def compose(config: dict[str, Any], agent: dict[str, Any], adapters: dict[str, dict[str, Any]],
            directory: Path) -> dict[str, Any]:
    """Stage 8: compose the adapters (gate data from the adapters' own successes, or from
    the oracle on plumbing budgets); the composition's directory, hash and routing report.
    A served base agent gets the task router only (`compose_served`)."""
    from trace_gym.moe.composition import compose as run
    from trace_gym.moe.config import ComposeConfig, GateConfig

    section = config["compose"]
    envs = list(adapters)
    if endpoint(config) is not None:
        return compose_served(adapters, directory)
    trajectories = None
    if section["gate_data"] == "oracle":  # plumbing budgets: the fixture agent succeeds at nothing
        from trace_gym.agents.spec import PolicySpec

        trajectories = {}
        seeds = band("gate_oracle", section["episodes"])
        for env_id in envs:
            path = directory / "oracle" / f"{env_id.split('/')[1]}.jsonl"
            trajectories[env_id] = play(env_id, PolicySpec("oracle"), seeds, path, config, 1)
    run(agent["path"], [adapters[e]["adapter"] for e in envs], envs, directory,
        ComposeConfig(episodes=section["episodes"], gates=GateConfig(epochs=section["epochs"])),
        env_kwargs={e: knobs(config, e) for e in envs}, trajectories=trajectories, log=None)
    return {"directory": str(directory), "sha256": dir_sha256(directory / "mixture"),
            "gate_data": section["gate_data"], "routing": json.loads((directory / "routing.json").read_text())}


SERVED_MIXTURE = ("no mixture: the base agent is served ([base_agent] base_url), and the token-level mixture needs "
                  "the model's weights in this process (a GPU at model scale); the task router is the composition "
                  "the server plays")
"""Why a served run composes the task router only."""


def compose_served(adapters: dict[str, dict[str, Any]], directory: Path) -> dict[str, Any]:
    """Stage 8 for a served base agent: the task router only (`router.json`: each
    capability's adapter and env), played on the server by the "served_router" policy."""
    from trace_gym.moe.composition import capability_of

    names = {capability_of(env_id): env_id for env_id in adapters}
    directory.mkdir(parents=True, exist_ok=True)
    write_json_atomic(directory / "router.json", {
        "adapters": {name: str(Path(adapters[env_id]["adapter"]).resolve()) for name, env_id in names.items()},
        "envs": names})
    routing = {"accuracy": {}, "note": SERVED_MIXTURE}
    write_json_atomic(directory / "routing.json", routing)
    return {"directory": str(directory), "sha256": dir_sha256(directory / "router.json"), "gate_data": "none",
            "routing": routing}


# -- 9. evaluation ----------------------------------------------------------------------------

def contenders(config: dict[str, Any], agent: dict[str, Any], adapters: dict[str, dict[str, Any]],
               composed: dict[str, Any] | None, direct: dict[str, dict[str, Any]],
               prompted: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """What the final table compares: label -> policy factory (greedy); `prompted` (GEPA's
    instructions per target) adds the "GEPA" row, the base agent with them (`instructed`)."""
    from trace_gym.agents.spec import PolicySpec

    section = config["eval"]
    sampling = {"temperature": 0.0, "max_new_tokens": section["max_new_tokens"]}
    served = endpoint(config)
    if served is None:
        def with_adapter(adapter: str) -> Any:
            return local_factory(agent["path"], adapter=adapter, **sampling)
    else:  # the server loads each adapter at runtime and plays it (`EndpointPolicy`'s adapter)
        def with_adapter(adapter: str) -> Any:
            return PolicySpec("endpoint", {"base_url": served["base_url"], "model": served["model"], "adapter": adapter,
                                           "temperature": 0.0, "max_tokens": section["max_new_tokens"]})
    out = {"base": base_factory(config, agent, **sampling)}
    for env_id, a in adapters.items():
        out[f"adapter {env_id.split('/')[1].removesuffix('-v0')}"] = with_adapter(a["adapter"])
    if composed is not None and served is not None:
        out["router"] = PolicySpec("served_router", {"base_url": served["base_url"], "model": served["model"],
                                                     "compose_dir": composed["directory"], "temperature": 0.0,
                                                     "max_tokens": section["max_new_tokens"]})
    elif composed is not None:
        for name in ("router", "mixture"):
            out[name] = PolicySpec(name, {"model_path": agent["path"], "compose_dir": composed["directory"],
                                          **sampling})
    for target, d in direct.items():
        out[f"direct GRPO on {target.split('/')[1]}"] = with_adapter(d["adapter"])
    if prompted:
        out["GEPA"] = base_factory(config, agent, **sampling)
    return out


def instructed(prompted: dict[str, dict[str, Any]] | None) -> dict[str, dict[str, dict[str, Any]]]:
    """label -> target -> the knobs a contender adds: GEPA's instructions on each target."""
    return {"GEPA": {t: {"agent_instructions": g["instructions"]} for t, g in prompted.items()}} if prompted else {}


def evaluate(config: dict[str, Any], policies: dict[str, Any], directory: Path,
             extra: dict[str, dict[str, dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Each contender on the targets' first test seeds; `extra` (label -> target -> knobs)
    adds knobs to one contender's episodes (GEPA's instructions)."""
    from trace_gym.evaluation import bootstrap_interval

    section = config["eval"]
    seeds = list(split_seeds("test", 0, section["seeds"]))  # evaluation plays the first test seeds
    table: dict[str, dict[str, Any]] = {}
    for env_id in config["pipeline"]["targets"]:
        for label, factory in policies.items():
            path = directory / f"{env_id.split('/')[1]}-{label.replace(' ', '_')}.jsonl"
            added = (extra or {}).get(label, {}).get(env_id, {})
            records = play(env_id, factory, seeds, path, config, section["batch"], knobs_added=added)
            passes = [float(r["passed"]) for r in records]
            lo, hi = bootstrap_interval(passes)
            table.setdefault(label, {})[env_id] = {
                "pass_rate": sum(passes) / len(passes), "ci95": [lo, hi], "episodes": len(passes),
                "mean_reward": sum(r["reward"] for r in records) / len(records), "records": str(path)}
    return {"table": table, "order": list(policies), "seeds": len(seeds)}

