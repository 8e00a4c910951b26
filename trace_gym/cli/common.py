"""What several commands share: count types, the policy flags and their factory, the
rollout a command runs, the calibration bands, the base model a command defaults to."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trace_gym.cli.flags import add_config_flags, config_values
from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.seeding import SPLITS

if TYPE_CHECKING:
    from trace_gym.agents.spec import PolicySpec


def at_least(minimum: int) -> Callable[[str], int]:
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


COUNT, NON_NEGATIVE = at_least(1), at_least(0)


def out_file(out: str | Path) -> Path:
    """A JSON Lines file `--out`, refused when it is a folder or its folder does not exist (a
    misspelt path would otherwise leave a tree of new folders). Folders a command writes
    (`--out DIR`) are made with their parents: a run directory is a tree of its own."""
    out = Path(out)
    if out.is_dir():
        raise InvalidConfig(f"--out {out} is a folder; give the JSON Lines file to write, e.g. {out / 'rollout.jsonl'}")
    if not out.parent.is_dir():
        raise InvalidConfig(f"--out {out}: the folder {out.parent} does not exist; create it first "
                            f"(mkdir -p {out.parent})")
    return out


def base_model(path: str | None, must_exist: bool = False) -> Path:
    """The base model a command uses: `path`, else the embedded base agent in the cache
    (refused, naming the command to run, when `must_exist` and it is not built)."""
    if path:
        return Path(path)
    from trace_gym.baseagent.build import default_agent_dir

    base = default_agent_dir()
    if must_exist and not (base / "config.json").is_file():
        raise TraceGymError(f"no --base given and the embedded base agent is not built ({base}); run "
                            "`trace-gym base-agent build` or pass --base DIR")
    return base


def add_policy_flags(p: argparse.ArgumentParser, title: str = "policy", default: str | None = "oracle",
                     temperature_flag: str = "--temperature", temperature: float = 1.0, endpoint: bool = True) -> None:
    """The flags `policy_factory` reads. `endpoint=False` leaves out --base-url, --model and
    --api-key, for a command whose own endpoint flags the endpoint policy then shares."""
    from trace_gym.agents import policy_entry, policy_names
    from trace_gym.agents.base import ENGINES
    from trace_gym.agents.hardware import DTYPES

    g = p.add_argument_group(title)
    g.add_argument("--policy", default=default, choices=policy_names(),
                   help="; ".join(f"{name}: {policy_entry(name).summary}" for name in policy_names()))
    if endpoint:
        g.add_argument("--base-url", help="endpoint URL (default: $OPENAI_BASE_URL or the first of $VLLM_BASE_URLS)")
        g.add_argument("--model", help="endpoint model name (default: $TRACE_GYM_MODEL)")
        g.add_argument("--api-key", help="endpoint key (default: $OPENAI_API_KEY, else EMPTY)")
    g.add_argument("--model-path", help="local model directory (default: the base agent in the cache)")
    g.add_argument("--adapter", help="LoRA adapter directory: for the local model, or for --policy endpoint "
                   "(loaded on the vLLM server at runtime; the server must read this path)")
    g.add_argument("--compose-dir", help="a `trace-gym compose` output directory (for --policy mixture or router)")
    g.add_argument(temperature_flag, dest="temperature", type=float, default=temperature)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--max-new-tokens", type=int, default=192)
    g.add_argument("--dtype", default="auto", choices=DTYPES,
                   help="local model precision: auto = bf16 where the CPU has it natively (avx512_bf16, AMX), "
                        "else fp32")
    g.add_argument("--threads", type=int, help="local model threads (default: every core this process may use)")
    g.add_argument("--engine", default=ENGINES[0], choices=ENGINES,
                   help="what runs a local model: openvino (OpenVINO GenAI, the fastest on CPU) or torch (the "
                        "continuous-batching torch engine); mixture and router policies run on torch")
    g.add_argument("--constrain-calls", action="store_true",
                   help="constrain a local model's tool calls to the offered tools' schemas (engine openvino)")
    g.add_argument("--timeout", type=float, default=60.0, help="endpoint request timeout, seconds")
    g.add_argument("--retries", type=int, default=3, help="endpoint retries on transient errors")


_FLAG_OF = {"max_tokens": "max_new_tokens"}
"""A policy argument read from a flag of another name (the endpoint's `max_tokens`)."""


def policy_factory(args: argparse.Namespace) -> PolicySpec:
    """The policy the arguments describe, as a `PolicySpec` (a picklable zero-argument factory): the registered
    policy's `options`, each from the flag of its name (`trace_gym.agents.registry`)."""
    from trace_gym.agents import policy_entry
    from trace_gym.agents.spec import PolicySpec

    entry = policy_entry(args.policy)
    kwargs = {}
    for option in entry.options:
        flag = _FLAG_OF.get(option, option)
        if hasattr(args, flag):
            kwargs[option] = getattr(args, flag)
    if "model_path" in entry.options and not kwargs.get("model_path"):
        kwargs["model_path"] = str(base_model(None))
    if "announce" in entry.options:
        kwargs["announce"] = True
    return PolicySpec(args.policy, kwargs)


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


SPLIT_HELP = ", ".join(f"{name} from {r.start:,}" for name, r in SPLITS.items())
"""The splits as --help shows them."""


def add_rollout_flags(p: argparse.ArgumentParser, split: str = "train", seeds: str | None = None,
                      workers_default: int | None = None) -> None:
    """The flags of a command that rolls a policy out on an env: env id, seeds (required
    unless `seeds` gives a default), split, workers, hint, progress, and the run
    configuration's env knobs."""
    p.add_argument("env_id", help="environment id, e.g. trace/airline-v0")
    p.add_argument("--seeds", required=seeds is None, default=seeds,
                   help="A:B, indices into the split (seed = split start + index)"
                        + (f"; default {seeds}" if seeds else ""))
    p.add_argument("--split", default=split, choices=list(SPLITS),
                   help=f"which seeds: {SPLIT_HELP} (default: {split})")
    p.add_argument("--workers", type=COUNT, default=workers_default,
                   help="episodes in flight at once (a local model's batch, default "
                        f"{LOCAL_IN_FLIGHT}; an endpoint policy's threads, default the core count)")
    p.add_argument("--hint", action="store_true", help="add the env's expert guidance to the system prompt")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_knob_flags(p)


def add_knob_flags(p: argparse.ArgumentParser) -> None:
    """`--config` and `--knob`: the env's knobs (`env_kwargs` reads them)."""
    p.add_argument("--config", help="run configuration (a path, or a shipped one by name: embedded): the env's "
                   "knobs from env_knobs (the embedded base agent reads compact prompts)")
    p.add_argument("--knob", action="append", default=[], type=knob, metavar="KEY=VALUE",
                   help="an env knob (a gym.make keyword), over --config's; the value is read as JSON, else as "
                        "text (--knob forbidden_rate=0.3 --knob kinds='[\"baggage\"]'); repeatable")


def env_kwargs(args: argparse.Namespace, env_id: str) -> dict[str, Any] | None:
    """The env's knobs the flags give: --config's env_knobs, then each --knob over them
    (None: neither flag)."""
    kwargs = None
    if getattr(args, "config", None):
        from trace_gym.runconfig import env_knobs

        kwargs = env_knobs(args.config, env_id)
    if getattr(args, "knob", None):
        kwargs = {**(kwargs or {}), **dict(args.knob)}
    return kwargs


def knob(text: str) -> tuple[str, object]:
    """A `--knob KEY=VALUE` flag's (key, value): the value parsed as JSON, else kept as text."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE with KEY a knob's name")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value


def run_rollout(args: argparse.Namespace, out: Path | None, samples: int, default_out: str = "") -> Path:
    """Roll out as the arguments say; without `out`, into `default_out` with the run's
    fingerprint id appended (another policy, model, adapter, sampling, hint or env version
    gets another file). Returns the file."""
    from trace_gym.agents import policy_entry
    from trace_gym.registry import entry
    from trace_gym.rollout import rollout
    from trace_gym.runs import fingerprint_id, run_fingerprint
    from trace_gym.seeding import parse_seed_range, seeds

    if out is not None:  # before any model loads
        out_file(out)
    env_id = entry(args.env_id).id
    start, stop = parse_seed_range(args.seeds)
    knobs = env_kwargs(args, env_id)
    factory = policy_factory(args)
    fingerprint = run_fingerprint(env_id, factory, hint=args.hint, env_kwargs=knobs)
    out = out or Path(f"{default_out}-{fingerprint_id(fingerprint)}.jsonl")
    # a policy whose turns wait on a server runs its episodes in threads; local ones batch them
    summary = rollout(env_id, factory, seeds(args.split, start, stop), out, samples=samples,
                      hint=args.hint, workers=in_flight(args), threaded=policy_entry(args.policy).server,
                      progress=not args.quiet, env_kwargs=knobs, fingerprint=fingerprint)
    if not args.quiet:
        print(f"{summary.written} episode(s) written to {summary.path}; {summary.skipped} already there",
              file=sys.stderr)
    return out


_BAND_FLAGS = {"mean_reward": "--mean", "success_rate": "--success", "min_reward_std": "--min-std",
               "max_all_success_groups": "--max-all-success", "max_all_zero_groups": "--max-all-zero",
               "max_constant_groups": "--max-constant"}


def add_band_flags(p: argparse.ArgumentParser) -> None:
    """The calibration bands' flags (`trace_gym.calibration.Bands`)."""
    from trace_gym.calibration import Bands

    add_config_flags(p.add_argument_group("calibration bands (inclusive)"), Bands, flags=_BAND_FLAGS)


def bands(args: argparse.Namespace):
    """The calibration bands the flags set (the rest at their defaults)."""
    from trace_gym.calibration import Bands

    return Bands(**config_values(args, Bands))


def print_record(record: dict, heading: str) -> None:
    """A trajectory record as a person reads it: the env and task, the transcript, the verdict."""
    from rich.console import Console
    from rich.table import Table

    from trace_gym.render import render_human

    console = Console()
    console.print(f"[bold]{record.get('env_id')}[/bold]  {heading}  task {record.get('task_kind')}  "
                  f"needs {', '.join(record.get('capabilities_needed') or []) or '-'}")
    render_human(record["messages"])
    table = Table(title=f"reward {record['reward']:.2f} ({record.get('termination_reason')})")
    for col in ("check", "passed", "credit", "detail"):
        table.add_column(col)
    for check in (record.get("verdict") or {}).get("checks", []):
        table.add_row(check["name"], "yes" if check["passed"] else "no", f"{check.get('credit', 0.0):.2f}",
                      check.get("detail", ""))
    console.print(table)
