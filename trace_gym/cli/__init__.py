"""The `trace-gym` command line: one module per command, each with `NAME`, `HELP`,
`add_arguments(parser)` and `run(args) -> exit code`.

    trace-gym list [--json]
    trace-gym info ENV_ID [--json]
    trace-gym play ENV_ID --seed N [--policy oracle|random] [--hint] [--json]
    trace-gym view FILE.jsonl [--index N] [--json]
    trace-gym audit ENV_ID|PATH [--json] [--examples N] [--timeout S] [--seed-base N] [--no-record]
                    [--isolation bubblewrap|fallback] [--require-isolation]
    trace-gym rollout ENV_ID --policy ... --seeds A:B [--samples K] --out FILE.jsonl
    trace-gym eval ENV_ID --policy ... --seeds A:B [--trials K] [--json]
    trace-gym export ENV_ID --seeds A:B [--split train|test] [--knob KEY=VALUE ...] --out FILE.jsonl
    trace-gym calibrate ENV_ID --policy ... [--seeds A:B] [--samples K] [--mean LO,HI] ...
    trace-gym import-tau2 RESULTS... --out FILE.jsonl
    trace-gym import-swebench FILES... --report PATH [--dataset PATH] [--skip-missing] --out FILE.jsonl
    trace-gym analyze RUNS... --out DIR [--labeller programmatic|llm] [--runs N] [--k K] ...
    trace-gym synthesize SELECTED.json [--base-url URL] [--model M] [--policy ...] ...
    trace-gym train --env ENV_ID [--base PATH] --out DIR [--config FILE] [--resume] [any GRPOConfig field]
    trace-gym compose --adapters A1,A2 --envs ENV1,ENV2 --out DIR [--base PATH] [any ComposeConfig/GateConfig field]
    trace-gym pipeline [--config FILE] [--out DIR] [--budget smoke|default] [--dry-run]
    trace-gym base-agent build [--from smollm2-135m-instruct|scratch|DIR] [--out DIR] [any recipe field]
    trace-gym tiny-agent build ...   (base-agent build --from scratch)

A command whose work has a config dataclass builds its flags from it (`trace_gym.cli.flags`):
the field's docstring is the flag's help and the dataclass validates the values, so a
setting is declared and checked in one place. Bad input ends in one line on stderr naming
what is wrong and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from trace_gym.cli import (
    analyze,
    audit,
    base_agent,
    calibrate,
    compose,
    evaluate,
    export,
    import_swebench,
    import_tau2,
    info,
    list_envs,
    pipeline,
    play,
    rollout,
    synthesize,
    train,
    view,
)
from trace_gym.errors import TraceGymError

COMMANDS = (list_envs, info, play, view, audit, rollout, evaluate, export, calibrate, import_tau2, import_swebench,
            analyze, synthesize, train, compose, pipeline, base_agent)
"""Every command module, in the order `trace-gym --help` lists them. Adding a command is one
module and one entry here."""

DESCRIPTION = ("Turn an LLM agent's recurring failures into capability-targeted training environments "
               "(TRACE): analyze, synthesize, train, compose.")

__all__ = ["COMMANDS", "EXTRAS", "build_parser", "command_names", "main", "quiet_libraries", "version"]


def command_names() -> list[str]:
    """Every command's name, aliases included."""
    return [name for command in COMMANDS for name in (command.NAME, getattr(command, "ALIAS", None)) if name]


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command. With `only` (a command name), only that command gets its
    flags and the others are listed by name and help: `main` builds it so, since a command's
    flags import its config dataclass and a step's config module may import torch."""
    parser = argparse.ArgumentParser(prog="trace-gym", description=DESCRIPTION)
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        names: list[tuple[str, str, dict[str, Any]]] = [(command.NAME, command.HELP, {})]
        if getattr(command, "ALIAS", None):
            names.append((command.ALIAS, command.ALIAS_HELP, {"scratch": True}))
        for name, helptext, extra in names:
            p = sub.add_parser(name, help=helptext, description=helptext)
            p.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
            if only is None or only == name:
                command.add_arguments(p, **extra)
            p.set_defaults(run=command.run)
    return parser


EXTRAS = {"torch": "train", "transformers": "train", "peft": "train", "trl": "train", "accelerate": "train",
          "datasets": "train", "gguf": "train", "openvino": "openvino", "openvino_genai": "openvino",
          "openvino_tokenizers": "openvino", "vllm": "vllm", "gepa": "gepa", "skyrl_gym": "skyrl",
          "matplotlib": "plot", "art": "art"}
"""The top-level module -> the extra of trace-gym that installs it (pyproject's extras)."""

INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT, as shells report it)."""
BROKEN_PIPE = 141
"""Exit code when the reader of our output went away (128 + SIGPIPE, as `head` leaves it)."""


VERBOSE_HELP = ("also show the libraries' own loading bars and advisory warnings (transformers, torch, peft, "
                "trl) and trace-gym's debug log")


def quiet_libraries(verbose: bool, quiet: bool = False) -> None:
    """Send trace-gym's log (the `trace_gym` logger: progress lines and bars) to stderr through
    rich, at WARNING under a command's `--quiet`, and, unless `verbose`, keep the model libraries' loading bars and advisory warnings out of it: what a
    command prints is its own progress (stderr) and its results (stdout)."""
    import logging
    import os
    import warnings

    from rich.logging import RichHandler

    from trace_gym.progress import stderr_console

    logger = logging.getLogger("trace_gym")
    if not logger.handlers:
        logger.addHandler(RichHandler(console=stderr_console(), show_path=False, markup=False))
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    if verbose:
        return
    # read when those libraries are first imported: set before any command imports them
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    for category in (FutureWarning, UserWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=r"(transformers|torch|peft|trl|accelerate)(\.|$)")


def version() -> str:
    """The installed trace-gym's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("trace-gym")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def check_run_config(path: str) -> None:
    """Refuse a run configuration that holds a table no stage has (a misspelt `[trian]` would
    otherwise leave the trainer at its defaults without a word)."""
    from trace_gym import runconfig
    from trace_gym.pipeline.config import check_tables
    from trace_gym.resources import config_path

    check_tables(runconfig.load(path), config_path(path))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command the arguments name; its exit code: 2 with one line on a bad input or a
    missing extra, 130 after Ctrl-C, 141 when the output's reader went away, never a traceback
    for those."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["--version"], ["-V"]):
        print(f"trace-gym {version()}")
        return 0
    if not argv:  # a bare `trace-gym`: what it can do
        build_parser().print_help()
        return 0
    chosen = next((a for a in argv if not a.startswith("-")), None)
    with _logging_restored():
        return _run(argv, chosen)


def _run(argv: list[str], chosen: str | None) -> int:
    try:
        args = build_parser(only=chosen).parse_args(argv)
        quiet_libraries(getattr(args, "verbose", False), getattr(args, "quiet", False))
        if getattr(args, "config", None):
            check_run_config(args.config)
        return args.run(args)
    except TraceGymError as exc:
        print(f"trace-gym: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        extra = EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"trace-gym: error: this command needs {exc.name}, which trace-gym's {extra!r} extra installs: "
              f"pip install 'trace-gym[{extra}]'", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("trace-gym: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        _quiet_stdout()
        return BROKEN_PIPE


@contextlib.contextmanager
def _logging_restored() -> Iterator[None]:
    """The `trace_gym` logger's level and handlers as they were before the command: `main`
    called in a program (or a test) leaves that program's logging as it found it."""
    import logging

    logger = logging.getLogger("trace_gym")
    level, handlers = logger.level, list(logger.handlers)
    try:
        yield
    finally:
        logger.setLevel(level)
        logger.handlers[:] = handlers


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of the closed pipe
    raises nothing more (Python's documented recipe for SIGPIPE)."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())

