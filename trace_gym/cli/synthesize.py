"""`trace-gym synthesize`, step 2: write, audit and install an env per selected capability."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from trace_gym.cli.common import COUNT, add_band_flags, add_policy_flags, bands, policy_factory

NAME = "synthesize"
HELP = "step 2: write, audit and install an env per selected capability"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The command's flags."""
    p.add_argument("selected", help="selected_capabilities.json (its statuses are updated)")
    p.add_argument("--base-url", help="synthesis agent endpoint (default: $OPENAI_BASE_URL or $VLLM_BASE_URLS)")
    p.add_argument("--model", help="synthesis agent model (default: $TRACE_GYM_MODEL)")
    p.add_argument("--api-key", help="endpoint key (default: $OPENAI_API_KEY, else EMPTY)")
    p.add_argument("--trajectories", nargs="*", help="the analysed trajectories (examples and the target's tools)")
    p.add_argument("--envs-dir", help="where envs are installed (default: generated_envs/ in a checkout)")
    p.add_argument("--run-dir", default="runs/synthesis", help="every attempt's prompt, reply, module, report")
    p.add_argument("--attempts", type=COUNT, default=5, help="attempts per capability")
    p.add_argument("--replace", action="store_true", help="regenerate envs that are already installed")
    p.add_argument("--llm-temperature", type=float, default=0.7, help="the synthesis agent's sampling temperature")
    p.add_argument("--max-tokens", type=COUNT, default=8192, help="tokens per synthesis reply at most")
    p.add_argument("--request-timeout", type=float, default=600, help="seconds per synthesis request")
    # The base policy to calibrate with (none: no calibration); an endpoint policy is
    # served by the synthesis agent's endpoint (--base-url, --model, --api-key above).
    add_policy_flags(p, "calibration (with a base policy)", default=None, temperature_flag="--policy-temperature",
                     temperature=1.0, endpoint=False)
    g = p.add_argument_group("calibration sizes")
    g.add_argument("--calibration-seeds", type=COUNT, default=100, help="seeds the base policy plays")
    g.add_argument("--calibration-samples", type=COUNT, default=16, help="episodes per seed")
    add_band_flags(p)


def run(args: argparse.Namespace) -> int:
    """Synthesize; exit 1 unless every capability's env is READY."""
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
                                  samples=args.calibration_samples, bands=bands(args))
    results = synthesize(Path(args.selected), complete, records=records,
                         envs_dir=Path(args.envs_dir) if args.envs_dir else None,
                         run_dir=Path(args.run_dir), attempts=args.attempts, replace=args.replace,
                         calibration=calibration)
    for r in results:
        print(f"{r.capability}: {r.status} after {r.attempts} attempt(s)" + (f" -> {r.env_id} ({r.path})" if r.env_id else ""))
    return 0 if all(r.status == "READY" for r in results) else 1
