"""`trace-gym train`, step 3: one LoRA adapter on one env with group-by-seed GRPO.

Every `GRPOConfig` field a flag can carry is a flag (its docstring the help); the
configuration's `[train]` table sits under the flags, the dataclass's defaults under both.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from trace_gym.cli.common import base_model
from trace_gym.cli.flags import add_config_flags, config_values

NAME = "train"
HELP = "step 3: train one LoRA adapter on an env with group-by-seed GRPO"
FROM_ELSEWHERE = ("env_id", "env_kwargs")
"""`GRPOConfig` fields that are not flags of their own name: --env, and the env knobs (from
--config's env_knobs)."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags: the run's own, then `GRPOConfig`'s."""
    from trace_gym.trainer import GRPOConfig

    p.add_argument("--env", required=True, help="env id (any registered env, a target included)")
    p.add_argument("--base", help="base model directory (default: the embedded base agent)")
    p.add_argument("--out", required=True, help="run directory (metrics, checkpoints, adapter/)")
    p.add_argument("--config", help="run configuration (a path, or a shipped one by name: embedded): its [train] "
                   "table and the env's env_knobs")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--allow-unaudited", action="store_true",
                   help="train on a generated env that has no passing audit record")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    add_config_flags(p.add_argument_group("GRPO (trace_gym.trainer.GRPOConfig)"), GRPOConfig, skip=FROM_ELSEWHERE)


def run(args: argparse.Namespace) -> int:
    """Train; print the adapter's directory."""
    from trace_gym.trainer import GRPOConfig, train
    from trace_gym.trainer.distributed import world
    from trace_gym.trainer.training import check_env_allowed

    check_env_allowed(args.env, args.allow_unaudited)  # a bad env id is named before a missing base
    config = GRPOConfig.for_env(args.env, args.config, **config_values(args, GRPOConfig, skip=FROM_ELSEWHERE))
    train(config, base_model(args.base, must_exist=True), Path(args.out), resume=args.resume,
          allow_unaudited=args.allow_unaudited)
    if world()[0] == 0:  # under torchrun, one line for the run
        print(Path(args.out) / "adapter")
    return 0
