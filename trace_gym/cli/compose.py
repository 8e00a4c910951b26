"""`trace-gym compose`, step 4: the task router and the gated mixture of trained adapters.

Every `ComposeConfig` and `GateConfig` field a flag can carry is a flag (its docstring the
help), validated by the dataclasses themselves.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trace_gym.cli.common import base_model
from trace_gym.cli.flags import add_config_flags, config_values

NAME = "compose"
HELP = "step 4: the task router and the gated mixture of the trained adapters"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags: the adapters and envs, then `ComposeConfig`'s and `GateConfig`'s."""
    from trace_gym.moe import ComposeConfig, GateConfig

    p.add_argument("--adapters", required=True, help="comma-separated adapter directories (trace-gym train's adapter/)")
    p.add_argument("--envs", required=True, help="comma-separated env ids, one per adapter (its capability's env)")
    p.add_argument("--out", required=True, help="output directory (mixture/, router.json, routing.json, routing.png)")
    p.add_argument("--base", help="base model directory (default: the embedded base agent)")
    p.add_argument("--config", help="run configuration whose env_knobs the gate-data rollouts use")
    p.add_argument("--trajectories", nargs="*", help="trajectory files to take gate data from instead (their "
                   "reward-1 episodes of each env, e.g. from `trace-gym rollout --adapter`)")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    add_config_flags(p.add_argument_group("gate data (trace_gym.moe.ComposeConfig)"), ComposeConfig, skip=("gates",))
    add_config_flags(p.add_argument_group("gate training (trace_gym.moe.GateConfig)"), GateConfig)


def run(args: argparse.Namespace) -> int:
    """Compose; print the output directory."""
    from trace_gym.moe import ComposeConfig, GateConfig, compose

    adapters, envs = args.adapters.split(","), args.envs.split(",")
    knobs = None
    if args.config:
        from trace_gym.runconfig import embedded_knobs, env_knobs

        knobs = {e: embedded_knobs(env_knobs(args.config, e)) for e in envs}
    config = ComposeConfig(**config_values(args, ComposeConfig, skip=("gates",)),
                           gates=GateConfig(**config_values(args, GateConfig)))
    trajectories: dict[str | None, list[dict[str, Any]]] | None = None
    if args.trajectories:
        from trace_gym.rollout import read_records

        trajectories = {}
        for path in args.trajectories:
            for record in read_records(Path(path)):
                trajectories.setdefault(record.get("env_id"), []).append(record)
    compose(base_model(args.base), adapters, envs, Path(args.out), config, env_kwargs=knobs,
            trajectories=trajectories)
    print(Path(args.out))
    return 0
