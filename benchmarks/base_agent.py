"""The embedded base agent: build time, and how it does on the targets and capability envs.

    python benchmarks/base_agent.py [--model DIR] [--config configs/embedded.toml]
                                    [--sections build,targets,weak,capabilities,analysis | scaling]
                                    [--engine openvino|torch] [--constrain-calls] [--in-flight 64]
                                    [--seeds 64] [--weak-episodes 32] [--cap-seeds 8] [--cap-samples 8]
                                    [--analysis-episodes N] [--threads N]

Every env is made with its knobs in `--config` (`[env_knobs."ENV"]`, `trace_gym.runconfig`),
every local policy runs on `--engine` (OpenVINO GenAI by default, tool calls constrained with
`--constrain-calls`), and episodes go through the episode driver, `--in-flight` at once. The
start prints the CPU flags seen, the precision and threads, the engine and the constraint.
Each section prints its figures as it finishes, each goal next to its figure, and `uptime`
with every timing (wall time on a shared machine depends on the load); the end prints the
benchmark's wall time and a summary, one line per goal: its figure, met or not met.

Sections:

- build: `trace-gym base-agent build` from an empty cache (a temporary TRACE_GYM_HOME:
  download, conversion and SFT) with the config's `[base_agent]` recipe, then the same call
  again (returns the cached agent). Goal: at most 30 min, bound only where the CPU computes
  bf16 natively (printed, not bound, on AVX2-only CPUs).
- targets: `--seeds` test seeds per target env, greedy: the share of agent turns that parse
  (goal >= 0.95), pass rate (goal 0.25-0.60) with a 95% bootstrap interval, mean reward, pass
  rate per task kind (weak kinds marked), episodes per minute, and the mean assistant turns an
  episode against the oracle's on the same seeds (goal: at most 1.5x). A turn parses when
  every call in it is a valid call of one of the offered tools (arguments valid against its
  schema), or when it is a reply and the oracle, asked on the same observation, would also
  reply: text where a tool call was due does not count.
- weak: with the targets' `kinds` knob on top of their knobs, `--weak-episodes` test episodes
  whose requests are all of the agent's weak kinds and as many of the other kinds, split
  between the targets: the pass rate of each group (goal: weak at most half the others').
- capabilities: the four capability envs at the trainer's temperature (the config's
  `[train]`, its max_new_tokens too), `--cap-seeds` test seeds x `--cap-samples` samples, each
  sample with its own sampling seed derived from (seed, sample) as GRPO's rollouts derive
  theirs: parse rate (goal >= 0.95), mean reward, success rate, whether both lie in the
  calibration bands [0.2, 0.6] (goal: at least 2 of 4 envs), the share of constant-reward
  groups (goal <= 0.5), and the calibration's other checks.
- analysis: the programmatic analysis of the embedded default: the agent's greedy rollouts on
  the targets' train seeds, as the pipeline's rollout stage draws them (`--analysis-episodes`
  per target, default the config's `[rollout]` episodes), analysed as its analysis stage
  does: the table (name, status, mean Delta, mean coverage), and whether it selects at least
  two capabilities whose envs the capabilities section found in band.
- scaling (by name only, alone: it builds its own agents): each of `--scaling-builds`
  (CONFIG:EPISODES, default the miniature at 24, 72 and 128 demonstrations a target, about
  5, 15 and 30 minutes of SFT, and the knobs before the miniature,
  `benchmarks/configs/embedded-before-miniature.toml`, at 128) built from an empty cache and
  played greedy on `--scaling-seeds` test seeds per target with its config's knobs, the oracle
  on the same seeds; then a table, one row per build: minutes, SFT tokens, demonstrations,
  and per target the parse rate, the pass rate (all, weak kinds, the others) and the agent's
  assistant turns over the oracle's. The builds and their trajectories are kept under
  `--keep-build` and `--keep-runs`.
- kv (by name only, not a default section; torch engine): `--kv-episodes` episodes per target
  (all in flight), with and without KV reuse, side by side: prefilled tokens per episode,
  wall and CPU seconds, episodes per minute, and whether every transcript is identical.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trace_gym.agents.hardware import usable_cores  # imports no torch: before OMP is read

os.environ.setdefault("OMP_NUM_THREADS", str(usable_cores()))

import fastjsonschema

import trace_gym  # noqa: F401
from trace_gym.messages import INVALID_TOOL_CALL
from trace_gym.pipeline.contract import RunConfig
from trace_gym.pipeline.stages.analysis import AnalysisTable
from trace_gym.pipeline.stages.base_agent import BaseAgentTable
from trace_gym.pipeline.stages.eval import EvalTable
from trace_gym.pipeline.stages.rollouts import RolloutTable
from trace_gym.seeding import SPLITS

TARGETS = ("trace/airline-v0", "trace/retail-v0")
CAPABILITY_ENVS = ("trace/precondition_verification-v0", "trace/structured_data_reasoning-v0",
                   "trace/multi_step_task_completion-v0", "trace/tool_calling_precision-v0")
DEFAULT_CONFIG = "embedded"  # the shipped configs/embedded.toml
DEFAULT_SECTIONS = "build,targets,weak,capabilities,analysis"
BEFORE_MINIATURE = str(Path(__file__).parent / "configs" / "embedded-before-miniature.toml")
SCALING_BUILDS = f"embedded:24,embedded:72,embedded:128,{BEFORE_MINIATURE}:128"
"""The miniature at about 5, 15 and 30 minutes of SFT, and the knobs before it at 30."""

PARSE_GOAL = 0.95
PASS_BAND = (0.25, 0.60)
WEAK_RATIO_GOAL = 0.5
TURNS_RATIO_GOAL = 1.5
BUILD_GOAL_S = 1800.0
IN_BAND_GOAL = 2
CONSTANT_GOAL = 0.5


def uptime() -> str:
    return "load " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


# -- goals -----------------------------------------------------------------------------------

GOALS: list[tuple[str, str, bool | None]] = []
"""(goal, measured figure, met: True / False / None when not bound), in the order measured."""


def goal(label: str, figure: str, met: bool | None) -> str:
    """Record a goal's figure; the words printed next to it."""
    GOALS.append((label, figure, met))
    return {True: "met", False: "not met", None: "not bound"}[met]


def summary() -> None:
    print("summary:")
    width = max((len(label) for label, _, _ in GOALS), default=0)
    for label, figure, met in GOALS:
        print(f"  {label:{width}s}  {figure}: {'met' if met else 'not met' if met is False else 'printed, not bound'}")
    bound = [met for _, _, met in GOALS if met is not None]
    print(f"  {sum(bound)} of {len(bound)} goals met" if bound else "  no goal measured", flush=True)


# -- the run's setup -------------------------------------------------------------------------

@dataclass
class Setup:
    """What every section reads: the arguments, the run configuration, the agent, the policies."""

    args: argparse.Namespace
    pipeline: RunConfig
    """The run configuration, defaults filled in (`trace_gym.pipeline.config.load`)."""
    train: Any
    """The config's `[train]` table (a GRPOConfig)."""
    model: Path | None = None
    weak: tuple[str, ...] = ()
    in_band: set[str] | None = None
    """The capability envs the capabilities section found in band (None: not measured)."""
    policies: dict[tuple[float, int], Any] = field(default_factory=dict)
    config: str = ""
    """The run configuration (default: --config)."""
    label: str = ""
    """Prefix of the names of the trajectories kept (--keep-runs)."""
    built: dict[str, Any] = field(default_factory=dict)
    """The timed build's seconds and SFT figures (section build)."""

    def __post_init__(self) -> None:
        self.config = self.config or self.args.config

    def knobs(self, env_id: str) -> dict[str, Any]:
        from trace_gym.runconfig import env_knobs

        return env_knobs(self.config, env_id)

    def policy(self, temperature: float, max_new_tokens: int) -> Any:
        """The local policy at this temperature and turn length (made once)."""
        from trace_gym.agents import make_policy

        key = (float(temperature), int(max_new_tokens))
        if key not in self.policies:
            self.policies[key] = make_policy("local", model_path=str(self.model), temperature=temperature,
                                             max_new_tokens=max_new_tokens, threads=self.args.threads,
                                             engine=self.args.engine, constrain_calls=self.args.constrain_calls)
        return self.policies[key]

    def close(self) -> None:
        for policy in self.policies.values():
            close = getattr(policy, "close", None)
            if close is not None:
                close()
        self.policies.clear()


# -- playing episodes ------------------------------------------------------------------------

def new_turns() -> dict[str, int]:
    return {"turns": 0, "parsed": 0, "invalid_call": 0, "unknown_tool": 0, "bad_arguments": 0, "text_for_call": 0}


def play(policy, env_id: str, episodes: list[Any], env_kwargs: dict[str, Any], in_flight: int,
         check_turns: bool = False) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Episodes through the episode driver, `in_flight` at once (a batched policy decodes them
    together), envs made by the registry with `env_kwargs`; with `check_turns`, every agent
    turn is classified against the tools' schemas and the oracle before the env steps it."""
    from trace_gym.driver import batched
    from trace_gym.driver import play as drive

    turns = new_turns()
    agent = _Classifying(batched(policy), turns) if check_turns else policy
    played = drive(episodes, agent, env_id=env_id, env_kwargs=env_kwargs, in_flight=in_flight)
    return [p.record() for p in played], turns


def oracle() -> Any:
    from trace_gym.agents import make_policy

    return make_policy("oracle")


class _Classifying:
    """A batched policy that classifies each turn of another one (`classify`) as it comes."""

    def __init__(self, inner: Any, turns: dict[str, int]) -> None:
        from trace_gym.schema import compile_arguments_validator

        self.inner, self.name, self.turns = inner, inner.name, turns
        self.validators: dict[str, Any] = {}
        self.compile = compile_arguments_validator
        if hasattr(inner, "capacity"):  # a turn-by-turn instance plays one episode at a time
            self.capacity = inner.capacity
        if hasattr(inner, "metadata"):  # how the model runs, recorded with each episode
            self.metadata = inner.metadata

    def submit(self, live: Any) -> None:
        self.inner.submit(live)

    def collect(self) -> list[Any]:
        ready = self.inner.collect()
        for live, reply in ready:
            classify(live.env, live.messages, live.tools, reply.action, self.turns, self.validators, self.compile)
        return ready

    def release(self, live: Any) -> None:
        self.inner.release(live)


def classify(env, messages, tools_offered, action: str, turns: dict[str, int], validators, compile_validator) -> None:
    from trace_gym.actions import parse_action

    turns["turns"] += 1
    parsed = parse_action(action)
    tools = {t["function"]["name"]: t["function"]["parameters"] for t in tools_offered}
    if parsed.is_reply:
        try:
            due = parse_action(env.unwrapped.oracle_action(messages))
            wanted_call = not due.is_reply
        except Exception:  # noqa: BLE001  (an observation the oracle cannot act from: count the reply)
            wanted_call = False
        turns["text_for_call" if wanted_call else "parsed"] += 1
        return
    for call in parsed.calls:
        if not call.valid or call.name == INVALID_TOOL_CALL:
            turns["invalid_call"] += 1
            return
        if call.name not in tools:
            turns["unknown_tool"] += 1
            return
        if call.name not in validators:
            validators[call.name] = compile_validator(tools[call.name])
        try:
            validators[call.name](call.arguments)
        except fastjsonschema.JsonSchemaValueException:
            turns["bad_arguments"] += 1
            return
    turns["parsed"] += 1


def parse_rate(turns: dict[str, int]) -> float:
    return turns["parsed"] / max(1, turns["turns"])


def describe_turns(turns: dict[str, int]) -> str:
    return (f"parsed turns {parse_rate(turns):.3f} of {turns['turns']} (invalid calls {turns['invalid_call']}, "
            f"unknown tools {turns['unknown_tool']}, bad arguments {turns['bad_arguments']}, text where a call "
            f"was due {turns['text_for_call']})")


def assistant_turns(record: dict[str, Any]) -> int:
    return sum(m.get("role") == "assistant" for m in record["messages"])


def mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def interval(values: list[float]) -> tuple[float, float]:
    from trace_gym.evaluation import bootstrap_interval

    return bootstrap_interval(values)


def sampling_seed(base: int, seed: int, sample: int) -> int:
    """A sample's sampling seed, derived from (seed, sample) as GRPO's rollouts derive theirs
    (`trace_gym.trainer.grpo.requests_for`, at iteration 0)."""
    from trace_gym.agents.episodes import sampling_seed as derive

    return derive(base, 0, seed, sample)


def errors_of(records: list[dict[str, Any]]) -> str:
    failed = sum(bool(r.get("error")) for r in records)
    return f"; {failed} env error(s)" if failed else ""


def keep_runs(args, name: str, records: list[dict[str, Any]]) -> None:
    if args.keep_runs:
        path = Path(args.keep_runs) / f"{name.replace('/', '_')}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))


def weak_kinds_of(model: Path) -> tuple[str, ...]:
    record = model / "trace_gym_build.json"
    if record.is_file():
        return tuple(json.loads(record.read_text())["config"].get("weak_kinds") or ())
    return ()


# -- sections ----------------------------------------------------------------------------

def section_build(s: Setup, episodes: int | None = None, keep: str | None = None) -> Path:
    """Build the config's agent from an empty cache (`episodes` per target where given), time
    it and the cached call after it, and keep it in `keep` (default --keep-build)."""
    import shutil

    from trace_gym.agents.hardware import native_bf16

    args, agent = s.args, s.pipeline.table(BaseAgentTable).values()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "TRACE_GYM_HOME": home}
        command = [sys.executable, "-m", "trace_gym.cli", "base-agent", "build", "--quiet", "--config", s.config,
                   "--from", agent["source"], "--weak-kinds", ",".join(agent["weak_kinds"]),
                   "--seed", str(s.pipeline.seed)]
        if episodes is not None:
            command += ["--episodes", str(episodes)]
        if args.threads:
            command += ["--threads", str(args.threads)]
        print(f"build: {agent['source']} with {s.config}'s recipe, {episodes or agent['episodes']} demonstrations "
              f"a target, weak kinds {', '.join(agent['weak_kinds']) or 'none'}, from an empty cache ({uptime()})",
              flush=True)
        start = time.perf_counter()
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout.strip()
        first = time.perf_counter() - start
        start = time.perf_counter()
        again = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout.strip()
        second = time.perf_counter() - start
        native = native_bf16()
        record = json.loads((Path(out) / "trace_gym_build.json").read_text())
        s.built = {"seconds": first, **record["sft"]}
        verdict = goal(f"build from an empty cache <= 1800 s ({s.config}, {episodes or agent['episodes']} a target)"
                       + ("" if native else " (no native bf16: not bound)"),
                       f"{first:.0f} s", first <= BUILD_GOAL_S if native else None)
        print(f"build: {first:.0f} s from an empty cache (goal: at most {BUILD_GOAL_S:.0f} s"
              f"{'' if native else ', printed, not bound: this CPU has no native bf16'}: {verdict}); "
              f"{record['sft']['examples']} demonstrations ({record['sft'].get('cut', '?')} cut at max_tokens, the "
              f"longest {record['sft'].get('longest', '?')} tokens), {record['sft']['tokens']} tokens, "
              f"{record['sft']['steps']} steps, {record['precision']} on {record['threads']} thread(s); the same "
              f"call again {second:.1f} s, same directory {out == again}  ({uptime()})", flush=True)
        kept = Path(keep or args.keep_build or tempfile.mkdtemp(prefix="base-agent-"))
        shutil.copytree(out, kept, dirs_exist_ok=True)
        return kept


def target_figures(s: Setup, env_id: str, seeds: int) -> dict[str, Any]:
    """The agent greedy on `seeds` test seeds of a target, and the oracle on the same seeds:
    parse rate (and the turns behind it), pass rates (all, weak kinds, others, per kind),
    mean reward, assistant turns against the oracle's, timings."""
    from trace_gym.driver import EpisodeRequest

    args = s.args
    policy = s.policy(0.0, s.pipeline.table(EvalTable).max_new_tokens)
    knobs = s.knobs(env_id)
    episodes = [EpisodeRequest(SPLITS["test"].start + i) for i in range(seeds)]
    start, cpu = time.perf_counter(), time.process_time()
    records, turns = play(policy, env_id, episodes, knobs, args.in_flight, check_turns=True)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    keep_runs(args, f"{s.label}{env_id}-targets", records)
    oracle_records, _ = play(oracle, env_id, episodes, knobs, args.in_flight)
    kinds: dict[str, list[float]] = defaultdict(list)
    for r in records:
        kinds[r["task_kind"]].append(float(r["passed"]))
    passes = [float(r["passed"]) for r in records]
    agent_turns = mean([assistant_turns(r) for r in records])
    oracle_turns = mean([assistant_turns(r) for r in oracle_records])
    return {"knobs": knobs, "records": records, "turns": turns, "parse": parse_rate(turns), "passes": passes,
            "pass": mean(passes), "interval": interval(passes), "reward": mean([r["reward"] for r in records]),
            "kinds": dict(sorted(kinds.items())),
            "weak": [p for k, v in kinds.items() if k in s.weak for p in v],
            "other": [p for k, v in kinds.items() if k not in s.weak for p in v],
            "agent_turns": agent_turns, "oracle_turns": oracle_turns,
            "turns_ratio": agent_turns / oracle_turns if oracle_turns else float("nan"),
            "oracle_pass": mean([float(r["passed"]) for r in oracle_records]), "wall": wall, "cpu": cpu}


def section_targets(s: Setup) -> None:
    args = s.args
    for env_id in TARGETS:
        f = target_figures(s, env_id, args.seeds)
        rate, (lo, hi), parse, ratio, passes = f["pass"], f["interval"], f["parse"], f["turns_ratio"], f["passes"]
        parse_ok = goal(f"{env_id} parse rate >= {PARSE_GOAL}", f"{parse:.3f}", parse >= PARSE_GOAL)
        pass_ok = goal(f"{env_id} pass rate, greedy, in {PASS_BAND[0]:.2f}-{PASS_BAND[1]:.2f}", f"{rate:.3f}",
                       PASS_BAND[0] <= rate <= PASS_BAND[1])
        print(f"{env_id} ({len(passes)} test seeds, greedy, knobs {f['knobs']}): {describe_turns(f['turns'])} "
              f"(goal >= {PARSE_GOAL}: {parse_ok}); pass rate {rate:.3f} ({int(sum(passes))}/{len(passes)}, 95% CI "
              f"{lo:.3f}-{hi:.3f}; goal {PASS_BAND[0]:.2f}-{PASS_BAND[1]:.2f}: {pass_ok}); mean reward "
              f"{f['reward']:.3f}{errors_of(f['records'])}; {60 * len(passes) / f['wall']:.2f} episodes/min "
              f"({f['wall']:.0f} s wall, {f['cpu']:.0f} s CPU, {uptime()})", flush=True)
        print("  by kind: " + "; ".join(f"{k}{' (weak)' if k in s.weak else ''} {mean(v):.2f} of {len(v)}"
                                        for k, v in f["kinds"].items()), flush=True)
        turns_ok = goal(f"{env_id} mean assistant turns <= {TURNS_RATIO_GOAL}x the oracle's",
                        f"{ratio:.2f}x ({f['agent_turns']:.1f} vs {f['oracle_turns']:.1f})", ratio <= TURNS_RATIO_GOAL)
        print(f"  assistant turns an episode: agent {f['agent_turns']:.2f}, oracle {f['oracle_turns']:.2f} on the "
              f"same seeds (oracle pass rate {f['oracle_pass']:.3f}); ratio {ratio:.2f} (goal <= {TURNS_RATIO_GOAL}: "
              f"{turns_ok})", flush=True)


def section_scaling(s: Setup) -> None:
    """Build each of --scaling-builds from an empty cache and play it greedy on --scaling-seeds
    test seeds per target with its config's knobs; one table row per build."""
    from trace_gym.pipeline.config import load

    args = s.args
    rows = []
    root = Path(args.keep_build or tempfile.mkdtemp(prefix="scaling-"))  # one folder for every build
    for entry in args.scaling_builds.split(","):
        config, _, episodes = entry.rpartition(":")
        if not config or not episodes.isdigit():
            raise SystemExit(f"--scaling-builds: {entry!r} is not CONFIG:EPISODES")
        label = f"{Path(config).stem}:{episodes}"
        name = label.replace(":", "-")
        variant = Setup(args, load(config), s.train, config=config, label=name + "-")
        variant.model = section_build(variant, int(episodes), str(root / name))
        variant.weak = weak_kinds_of(variant.model)
        try:
            figures = {env_id: target_figures(variant, env_id, args.scaling_seeds) for env_id in TARGETS}
        finally:
            variant.close()
        rows.append((label, variant.built, figures))
        for env_id, f in figures.items():
            print(f"  {label} {env_id}: parse {f['parse']:.3f} ({describe_turns(f['turns'])}); pass {f['pass']:.3f}; "
                  f"by kind " + "; ".join(f"{k} {int(sum(v))}/{len(v)}" for k, v in f["kinds"].items())
                  + f"; turns {f['agent_turns']:.2f} vs the oracle's {f['oracle_turns']:.2f}{errors_of(f['records'])}"
                  f"  ({uptime()})", flush=True)
        scaling_table(rows, args.scaling_seeds)  # after every build: a run cut short keeps its rows


def scaling_table(rows: list[tuple[str, dict[str, Any], dict[str, Any]]], seeds: int) -> None:
    print(f"scaling ({seeds} greedy test seeds per target; pass: all, weak kinds, other kinds; "
          f"turns: the agent's assistant turns over the oracle's):")
    head = f"  {'build':32s} {'min':>5s} {'tokens':>8s} {'demos':>5s}"
    for env_id in TARGETS:
        name = env_id.split("/")[1].split("-")[0]
        head += f" | {name + ' parse':>12s} {'pass':>5s} {'weak':>5s} {'other':>5s} {'turns':>5s}"
    print(head)
    for label, built, figures in rows:
        line = f"  {label:32s} {built['seconds'] / 60:5.1f} {built['tokens']:8d} {built['examples']:5d}"
        for env_id in TARGETS:
            f = figures[env_id]
            line += (f" | {f['parse']:12.3f} {f['pass']:5.2f} {mean(f['weak']):5.2f} {mean(f['other']):5.2f} "
                     f"{f['turns_ratio']:5.2f}")
        print(line, flush=True)


def section_kv(s: Setup) -> None:
    from trace_gym.agents.local import LocalModelPolicy
    from trace_gym.driver import EpisodeRequest

    args = s.args
    print("kv: torch engine (LocalModelPolicy), whatever --engine says", flush=True)
    for env_id in TARGETS:
        episodes = [EpisodeRequest(SPLITS["test"].start + 500 + i) for i in range(args.kv_episodes)]
        results = {}
        for reuse in (True, False):
            policy = LocalModelPolicy(s.model, temperature=0.0,
                                      max_new_tokens=s.pipeline.table(EvalTable).max_new_tokens,
                                      threads=args.threads, kv_reuse=reuse)
            start, cpu = time.perf_counter(), time.process_time()
            records, _ = play(policy, env_id, episodes, s.knobs(env_id), args.kv_episodes)
            results[reuse] = (records, time.perf_counter() - start, time.process_time() - cpu, policy.engine.stats)
        (a, wall_a, cpu_a, stats_a), (b, wall_b, cpu_b, stats_b) = results[True], results[False]
        same = [r["messages"] for r in sorted(a, key=lambda r: r["seed"])] == \
            [r["messages"] for r in sorted(b, key=lambda r: r["seed"])]
        n = len(episodes)
        print(f"{env_id} KV reuse, {n} episodes in one batch: prefilled tokens/episode {stats_a.prefilled / n:.0f} "
              f"with reuse, {stats_b.prefilled / n:.0f} without (ratio "
              f"{stats_a.prefilled / max(1, stats_b.prefilled):.3f}); wall {wall_a:.0f} s vs {wall_b:.0f} s (ratio "
              f"{wall_a / wall_b:.3f}); CPU {cpu_a:.0f} s vs {cpu_b:.0f} s (ratio {cpu_a / max(cpu_b, 1e-9):.3f}); "
              f"episodes/min {60 * n / wall_a:.2f} vs {60 * n / wall_b:.2f}; decoded tokens {stats_a.decoded} vs "
              f"{stats_b.decoded}; identical transcripts {same}  ({uptime()})", flush=True)


def section_weak(s: Setup) -> None:
    from trace_gym.driver import EpisodeRequest
    from trace_gym.targets import airline, retail

    args = s.args
    if not s.weak:
        print("weak: the agent has no weak kinds (built with --weak-kinds ''; see --weak-kinds)", flush=True)
        return
    policy = s.policy(0.0, s.pipeline.table(EvalTable).max_new_tokens)
    groups: dict[str, list[dict[str, Any]]] = {"weak": [], "other": []}
    per_target = args.weak_episodes // len(TARGETS)
    start = time.perf_counter()
    for env_id, kinds in zip(TARGETS, (airline.KINDS, retail.KINDS)):
        mine = [k for k in kinds if k in s.weak]
        others = [k for k in kinds if k not in s.weak]
        for group, chosen in (("weak", mine), ("other", others)):
            if not chosen:
                continue
            episodes = [EpisodeRequest(SPLITS["test"].start + 2000 + i) for i in range(per_target)]
            records, _ = play(policy, env_id, episodes, {**s.knobs(env_id), "kinds": tuple(chosen)}, args.in_flight)
            groups[group] += records
            keep_runs(args, f"{env_id}-{group}-kinds", records)
    rates = {g: mean([float(r["passed"]) for r in rs]) for g, rs in groups.items()}
    ratio = rates["weak"] / rates["other"] if rates["other"] else float("nan")
    # met only where the other kinds pass at all: 0 against 0 shows no gap
    met = bool(groups["weak"]) and rates["other"] > 0 and rates["weak"] <= WEAK_RATIO_GOAL * rates["other"]
    verdict = goal(f"weak kinds' pass rate <= {WEAK_RATIO_GOAL}x the other kinds'",
                   f"{rates['weak']:.3f} vs {rates['other']:.3f} (ratio {ratio:.2f})", met)
    print(f"weak kinds {', '.join(s.weak)}: pass rate {rates['weak']:.3f} on {len(groups['weak'])} test episodes; "
          f"other kinds {rates['other']:.3f} on {len(groups['other'])}; ratio {ratio:.3f} (goal <= "
          f"{WEAK_RATIO_GOAL}: {verdict})  [{time.perf_counter() - start:.0f} s, {uptime()}]", flush=True)


def section_capabilities(s: Setup) -> None:
    from trace_gym.calibration import Bands, calibrate
    from trace_gym.driver import EpisodeRequest

    args, train = s.args, s.train
    bands = Bands()
    policy = s.policy(train.temperature, train.max_new_tokens)
    in_band: set[str] = set()
    seeds = [SPLITS["test"].start + i for i in range(args.cap_seeds)]
    for env_id in CAPABILITY_ENVS:
        episodes = [EpisodeRequest(seed, k, sampling_seed=sampling_seed(train.seed, seed, k))
                    for seed in seeds for k in range(args.cap_samples)]
        start = time.perf_counter()
        records, turns = play(policy, env_id, episodes, s.knobs(env_id), args.in_flight, check_turns=True)
        result = calibrate(records, bands)
        by_seed: dict[int, list[float]] = defaultdict(list)
        for r in records:
            by_seed[r["seed"]].append(float(r["reward"]))
        constant = sum(max(g) - min(g) <= 1e-12 for g in by_seed.values()) / max(1, len(by_seed))
        (lo_m, hi_m), (lo_s, hi_s) = bands.mean_reward, bands.success_rate
        band = lo_m <= result["mean_reward"] <= hi_m and lo_s <= result["success_rate"] <= hi_s
        if band:
            in_band.add(env_id)
        parse = parse_rate(turns)
        parse_ok = goal(f"{env_id} parse rate >= {PARSE_GOAL}", f"{parse:.3f}", parse >= PARSE_GOAL)
        constant_ok = goal(f"{env_id} constant-reward groups <= {CONSTANT_GOAL}", f"{constant:.3f}",
                           constant <= CONSTANT_GOAL)
        print(f"{env_id} at temperature {train.temperature} ({len(by_seed)} test seeds x {args.cap_samples} samples, "
              f"knobs {s.knobs(env_id)}): {describe_turns(turns)} (goal >= {PARSE_GOAL}: {parse_ok}); mean reward "
              f"{result['mean_reward']:.3f}, success rate {result['success_rate']:.3f}, in bands "
              f"[{lo_m}, {hi_m}] {band}; constant-reward groups {constant:.3f} (goal <= {CONSTANT_GOAL}: "
              f"{constant_ok}); std {result['reward_std']:.3f}, every calibration check passed "
              f"{result['calibrated']}{errors_of(records)}  [{time.perf_counter() - start:.0f} s, {uptime()}]",
              flush=True)
        for problem in result["problems"]:
            print(f"  - {problem}")
        keep_runs(args, f"{env_id}-capability", records)
    s.in_band = in_band
    verdict = goal(f"capability envs in the bands at T = {train.temperature} >= {IN_BAND_GOAL} of "
                   f"{len(CAPABILITY_ENVS)}", f"{len(in_band)}", len(in_band) >= IN_BAND_GOAL)
    print(f"capability envs in the bands: {len(in_band)} of {len(CAPABILITY_ENVS)} (goal >= {IN_BAND_GOAL}: "
          f"{verdict}){': ' + ', '.join(sorted(in_band)) if in_band else ''}", flush=True)


def section_analysis(s: Setup) -> None:
    from trace_gym.analysis.aggregate import Params, default_k
    from trace_gym.analysis.pipeline import AnalysisConfig, analyze
    from trace_gym.driver import EpisodeRequest
    from trace_gym.registry import list_envs
    from trace_gym.seeding import band

    args = s.args
    rollout, section = s.pipeline.table(RolloutTable).values(), s.pipeline.table(AnalysisTable).values()
    count = args.analysis_episodes if args.analysis_episodes is not None else rollout["episodes"]
    if section["labeller"] != "programmatic":
        print(f"analysis: the config's labeller is {section['labeller']!r}; this benchmark runs the programmatic one")
    policy = s.policy(0.0, rollout["max_new_tokens"])
    episodes = [EpisodeRequest(seed) for seed in band("analysis_rollouts", count)]  # the pipeline's rollout stage's
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        needed: dict[str, int] = defaultdict(int)
        for env_id in TARGETS:
            start = time.perf_counter()
            records, _ = play(policy, env_id, episodes, s.knobs(env_id), args.in_flight)
            path = Path(tmp) / f"{env_id.split('/')[1]}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
            files.append(path)
            for r in records:
                if r["task_kind"] in s.weak:
                    for c in r["capabilities_needed"]:
                        needed[c] += 1
            print(f"analysis rollouts, {env_id}: {sum(r['passed'] for r in records)}/{len(records)} train seeds "
                  f"passed{errors_of(records)}  [{time.perf_counter() - start:.0f} s]", flush=True)
        n = section["runs"]
        data = analyze(files, Path(tmp) / "analysis",
                       AnalysisConfig(runs=n, params=Params(k=default_k(n), n=n)))
    caps = data["capabilities"]
    env_of = {e.capability: e.id for e in list_envs() if e.kind == "capability" and e.capability}
    width = max([len("capability"), *(len(c["name"]) for c in caps)])
    print(f"analysis ({data['trajectories']['passed']} passed, {data['trajectories']['failed']} failed trajectories; "
          f"K {data['params']['k']} of N {data['params']['n']}):")
    print(f"  {'capability':{width}s}  {'status':12s}  {'mean Delta':>10s}  {'mean Cov':>8s}  env in band")
    for c in caps:
        env_id = env_of.get(c["name"])
        band = "n/a" if s.in_band is None or env_id is None else ("yes" if env_id in s.in_band else "no")
        print(f"  {c['name']:{width}s}  {c['status']:12s}  {c['mean_delta']:10.3f}  {c['mean_cov']:8.3f}  {band}")
    selected = [c["name"] for c in caps if c["status"] != "NOT_SELECTED"]
    print("  selected, in rank order: " + (", ".join(selected) or "none"))
    print("  capabilities the weak kinds' tasks need (tasks): " + (", ".join(
        f"{c} ({k})" for c, k in sorted(needed.items(), key=lambda x: -x[1])) or "none"), flush=True)
    label = f"analysis selects >= {IN_BAND_GOAL} capability envs in band"
    if s.in_band is None:
        verdict = "not checked: the capabilities section did not run"
        goal(label, f"{len(selected)} selected, bands not measured", False)
    else:
        chosen = [c for c in selected if env_of.get(c) in s.in_band]
        verdict = goal(label, f"{len(chosen)} ({', '.join(chosen) or 'none'})", len(chosen) >= IN_BAND_GOAL)
    print(f"  selected capabilities whose env is in band: goal >= {IN_BAND_GOAL}: {verdict}", flush=True)


SECTIONS = {"scaling": section_scaling, "targets": section_targets, "kv": section_kv, "weak": section_weak,
            "capabilities": section_capabilities, "analysis": section_analysis}


def main() -> None:
    from trace_gym.agents.base import ENGINES

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a built agent (default: build one now, timing it)")
    parser.add_argument("--config", default=str(DEFAULT_CONFIG),
                        help="run configuration: env knobs, [train], [base_agent], [rollout] (default: %(default)s)")
    parser.add_argument("--sections", default=DEFAULT_SECTIONS,
                        help=f"comma-separated, of build,{','.join(SECTIONS)} (default: %(default)s)")
    parser.add_argument("--engine", choices=ENGINES, default="openvino", help="every local policy's engine")
    parser.add_argument("--constrain-calls", action="store_true", help="constrain tool calls (OpenVINO only)")
    parser.add_argument("--in-flight", type=int, default=64, help="episodes in flight")
    parser.add_argument("--seeds", type=int, default=64, help="test seeds per target")
    parser.add_argument("--weak-episodes", type=int, default=32, help="test episodes per group (weak, other)")
    parser.add_argument("--weak-kinds", help="comma-separated weak kinds (default: the agent's build record)")
    parser.add_argument("--cap-seeds", type=int, default=8, help="test seeds per capability env")
    parser.add_argument("--cap-samples", type=int, default=8, help="samples per seed")
    parser.add_argument("--analysis-episodes", type=int, help="train seeds per target (default: [rollout] episodes)")
    parser.add_argument("--kv-episodes", type=int, default=8)
    parser.add_argument("--scaling-builds", default=SCALING_BUILDS,
                        help="section scaling: CONFIG:EPISODES builds, comma-separated (default: %(default)s)")
    parser.add_argument("--scaling-seeds", type=int, default=32, help="section scaling: test seeds per target")
    parser.add_argument("--threads", type=int, help="threads (default: every core this process may use)")
    parser.add_argument("--keep-build", help="where the timed build is kept")
    parser.add_argument("--keep-runs", help="directory for the sections' trajectories")
    args = parser.parse_args()
    sections = [x for x in args.sections.split(",") if x]
    unknown = sorted(set(sections) - {"build", *SECTIONS})
    if unknown:
        parser.error(f"unknown section(s) {', '.join(unknown)}; allowed: build, {', '.join(SECTIONS)}")
    if args.constrain_calls and args.engine != "openvino":
        parser.error("--constrain-calls exists only on --engine openvino")
    started = time.perf_counter()

    from trace_gym.agents.hardware import placement, vector_flags
    from trace_gym.pipeline.config import load
    from trace_gym.trainer.config import GRPOConfig

    s = Setup(args, load(args.config), GRPOConfig.from_toml(args.config))
    print(f"CPU flags seen: {vector_flags()}")
    print(f"local policies: engine {args.engine}, tool calls {'constrained' if args.constrain_calls else 'free'}, "
          f"{placement('auto', args.threads).describe()}, {args.in_flight} episodes in flight")
    print(f"config {args.config}: trainer's temperature {s.train.temperature}, max_new_tokens "
          f"{s.train.max_new_tokens}; targets' max_new_tokens {s.pipeline.table(EvalTable).max_new_tokens}", flush=True)
    s.model = Path(args.model) if args.model else None
    if sections == ["scaling"]:  # builds its own agents
        section_scaling(s)
        print(f"wall time: {time.perf_counter() - started:.0f} s  ({uptime()})")
        summary()
        return
    if "build" in sections or s.model is None:
        s.model = section_build(s)
    if args.weak_kinds is not None:
        s.weak = tuple(k for k in args.weak_kinds.split(",") if k)
    else:
        s.weak = weak_kinds_of(s.model)
    print(f"agent {s.model} (weak kinds: {', '.join(s.weak) or 'none'})", flush=True)
    try:
        for name, run in SECTIONS.items():
            if name in sections:
                run(s)
    finally:
        s.close()
    print(f"wall time: {time.perf_counter() - started:.0f} s  ({uptime()})")
    summary()


if __name__ == "__main__":
    main()
