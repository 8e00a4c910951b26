"""`trace-gym compose`: the task router and the mixture of LoRA experts from trained adapters.

For each (adapter, env) pair, the adapter plays `episodes` train-split episodes of its env at
temperature 1.0 and its successful ones (reward 1) become gate data labelled with the
env's capability (or existing trajectory files are read instead). A fifth of each
capability's trajectories is held out. The gates are trained (`trace_gym.moe.gates`) and
written to `OUT/mixture/` (gates and the adapters they reference); `OUT/router.json` names
the adapters for the task router; `OUT/routing.json` holds the held-out routing accuracy per
capability and the expert load per layer, `OUT/routing.png` the heatmap of one held-out
trajectory, and `OUT/trajectories/` the gate data.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.jsondata import write_json_atomic
from trace_gym.moe.config import ComposeConfig
from trace_gym.moe.gates import Example, example, heatmap, routing, train_gates
from trace_gym.runconfig import embedded_knobs
from trace_gym.seeding import band

logger = logging.getLogger(__name__)


def capability_of(env_id: str) -> str:
    """The capability an env trains: its registered capability, else the env id's last part
    without `-v0`."""
    from trace_gym.registry import entry, known

    capability = entry(env_id).capability if known(env_id) else None
    if capability:
        return capability
    return env_id.split("/")[-1].removesuffix("-v0")


def play_successes(base: Path, adapter: Path, env_id: str, env_kwargs: dict[str, Any], config: ComposeConfig,
                   tokenizer: Any) -> list[dict[str, Any]]:
    """The adapter's reward-1 episodes of `env_id` on train seeds: messages and tools."""
    import torch
    from peft import PeftModel

    from trace_gym.agents.causal_lm import load_causal_lm
    from trace_gym.agents.episodes import EpisodeRequest, LocalBackend
    from trace_gym.driver import make_env

    model = PeftModel.from_pretrained(load_causal_lm(base, torch.float32),
                                      str(adapter)).eval()
    backend = LocalBackend(model, tokenizer, env_id, env_kwargs, temperature=1.0, top_p=1.0,
                           max_new_tokens=config.max_new_tokens, batch_episodes=config.batch_episodes)
    seeds = band("gate_data", config.episodes)  # any train seed may be gate data: test seeds never
    rollouts = backend.play([EpisodeRequest(seed, 0, False, seed) for seed in seeds])
    env = make_env(env_id, **env_kwargs)
    tools = env.reset(seed=seeds[0])[1]["tools"]
    env.close()
    return [{"env_id": env_id, "seed": r.seed, "reward": r.reward, "messages": r.messages, "tools": tools}
            for r in rollouts if r.passed]


def compose(base: str | Path, adapters: list[str | Path], envs: list[str], out: str | Path,
            config: ComposeConfig = ComposeConfig(), env_kwargs: dict[str, dict[str, Any]] | None = None,
            trajectories: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Build the mixture and the task router from trained adapters, one env per adapter (see
    the module docstring): gather each capability's successful trajectories, train the
    gates, and write the mixture, `router.json`, `routing.json` and the heatmap under `out`.
    Returns the routing report."""
    import torch
    from transformers import AutoTokenizer

    from trace_gym.agents.causal_lm import load_causal_lm
    from trace_gym.moe.mixture import Mixture

    if len(adapters) != len(envs) or not adapters:
        raise InvalidConfig(f"compose takes one env per adapter: {len(adapters)} adapters, {len(envs)} envs")
    names = [capability_of(e) for e in envs]
    if len(set(names)) != len(names):
        raise InvalidConfig(f"two adapters for one capability: {names}")
    for adapter in adapters:  # what the user named is checked before the base is looked for
        if not (Path(adapter) / "adapter_config.json").is_file():
            raise InvalidConfig(f"adapter {str(adapter)!r}: not a peft adapter directory (no adapter_config.json)")
    base, out = Path(base), Path(out)
    if not (base / "config.json").is_file():
        raise InvalidConfig(f"base {str(base)!r} is not a model directory (no config.json)")
    torch.set_num_threads(config.threads)
    tokenizer = AutoTokenizer.from_pretrained(base)
    # the mixture first: an adapter it cannot take is refused before any episode is played
    mixture = Mixture.from_dirs(load_causal_lm(base, torch.float32), [Path(a) for a in adapters], names)
    train, held = [], []
    for label, (adapter, env_id, name) in enumerate(zip(adapters, envs, names), 1):
        knobs = (env_kwargs or {}).get(env_id, embedded_knobs())
        path = out / "trajectories" / f"{name}.jsonl"
        if trajectories and env_id in trajectories:
            got = [_with_tools(t, env_id, knobs) for t in trajectories[env_id] if t.get("reward", 0) >= 1 - 1e-9]
        elif path.is_file():
            got = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        else:
            got = play_successes(base, Path(adapter), env_id, knobs, config, tokenizer)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(t) + "\n" for t in got))
        examples = [ex for ex in (_example(tokenizer, t, label, config) for t in got) if any(ex.assistant)]
        if len(examples) < 2:
            raise TraceGymError(f"{name}: {len(got)} successful trajectories of {env_id}, {len(examples)} with an "
                                f"assistant token within {config.gates.max_tokens} tokens; gate training needs at "
                                "least two per capability (more episodes, a better adapter, or compact prompts)")
        cut = max(1, round(config.held_out * len(examples)))
        train += examples[cut:]
        held += examples[:cut]
        logger.info(f"{name}: {len(got)} successful trajectories ({len(examples) - cut} for training, {cut} held out)")
    history = train_gates(mixture, train, config.gates)
    mixture.save_gates(out / "mixture")
    report = routing(mixture, held)
    report["losses"] = {"first": history[0], "last": history[-1]}
    write_json_atomic(out / "routing.json", report)
    write_json_atomic(out / "router.json", {"adapters": {n: str(Path(a).resolve()) for n, a in zip(names, adapters)},
                                            "envs": dict(zip(names, envs))})
    heatmap(mixture, held[0], out / "routing.png", title=f"expert per token and layer ({names[held[0].label - 1]})")
    for name, accuracy in report["accuracy"].items():
        logger.info(f"held-out routing accuracy, {name}: {accuracy:.3f}")
    return report


def _with_tools(record: dict[str, Any], env_id: str, knobs: dict[str, Any]) -> dict[str, Any]:
    """A trajectory record with the tools its episode offered (records do not store them)."""
    if "tools" in record:
        return record
    from trace_gym.driver import make_env

    env = make_env(env_id, **knobs)
    try:
        tools = env.reset(seed=record["seed"])[1]["tools"]
    finally:
        env.close()
    return {**record, "tools": tools}


def _example(tokenizer: Any, trajectory: dict[str, Any], label: int, config: ComposeConfig) -> Example:
    return example(tokenizer, trajectory["messages"], trajectory["tools"], label, config.gates.max_tokens)
