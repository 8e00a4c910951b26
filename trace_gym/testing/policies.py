"""Episodes the kit plays: the oracle, perturbed oracles and degenerate policies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trace_gym.jsondata import sha256_json
from trace_gym.rng import Rng
from trace_gym.schema import sample_value
from trace_gym.testing.kitenv import PlayedEnv, checked_reward, toolset_of
from trace_gym.tools import ToolKind

Act = Callable[[PlayedEnv, list], Any]

REFUSAL = "I'm sorry, but I can't help with that request."


def play(env: PlayedEnv, seed: int, act: Act, hint: bool | None = None) -> tuple[float, list, dict]:
    """One episode, reset with `hint` (None: as the env decides, the kit's `KitEnv` by its
    plan); returns (final reward, final observation, final info). A final reward that is not
    a finite number raises PropertyFailed."""
    obs, info = env.reset(seed=seed, options=None if hint is None else {"hint": hint})
    reward, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(act(env, obs))
        done = terminated or truncated
    return checked_reward(reward, seed), obs, info


def oracle(env: PlayedEnv, obs: list) -> Any:
    """The env's oracle as a policy: its action for the observation."""
    return env.oracle_action(obs)


def oracle_actions(env: PlayedEnv, seed: int) -> tuple[list[Any], float]:
    """The oracle's actions over one episode of `seed`, and the reward they earned."""
    actions: list[Any] = []

    def record(e: PlayedEnv, obs: list) -> Any:
        action = e.oracle_action(obs)
        actions.append(action)
        return action

    reward, _, _ = play(env, seed, record)
    return actions, reward


def fingerprint(env: PlayedEnv, seed: int) -> list[Any]:
    """What must be identical for a seed everywhere: task, world, oracle transcript, reward."""
    env.reset(seed=seed)
    task = sha256_json(env.task.to_json())
    world = env.episode.initial_world.hash()
    reward, obs, _ = play(env, seed, oracle)
    return [task, world, sha256_json(obs), reward]


def replay(actions: list[Any]) -> Act:
    """Play recorded actions, then the oracle."""
    def act(env: PlayedEnv, obs: list) -> Any:
        turn = env.episode.turn
        return actions[turn] if turn < len(actions) else env.oracle_action(obs)
    return act


def perturb(value: Any) -> Any:
    """One change to an argument value, the smallest that is still well-typed."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "0"
    if isinstance(value, list):
        return value[:-1] if value else [None]
    if isinstance(value, dict) and value:
        key = next(iter(value))
        return {**value, key: perturb(value[key])}
    return "x"


def perturbed_oracles(env: PlayedEnv, seed: int) -> list[tuple[str, list[Any]]]:
    """(description, actions) for every single change of the oracle's write arguments; for an
    oracle that writes nothing, its final reply replaced by an empty acknowledgement."""
    actions, _ = oracle_actions(env, seed)
    toolset = toolset_of(env)
    out = []
    for i, action in enumerate(actions):
        if isinstance(action, dict) and "name" in action:
            tool = toolset.get(action["name"])
            if tool is None or tool.kind is not ToolKind.WRITE:
                continue
            for key, value in action["arguments"].items():
                changed = {"name": action["name"], "arguments": {**action["arguments"], key: perturb(value)}}
                out.append((f"turn {i}: {action['name']}.{key} changed", [*actions[:i], changed]))
    if not out:
        last = max(i for i, a in enumerate(actions) if isinstance(a, str))
        out.append((f"turn {last}: final reply replaced", [*actions[:last], "OK."]))
    return out


def degenerate_policies(seed: int = 0) -> dict[str, Act]:
    """Policies with no understanding of the task; a sound env scores them low."""
    rng = Rng.from_seed(seed)

    def random_policy(env: PlayedEnv, obs: list) -> Any:
        tools = toolset_of(env).schemas
        if rng.chance(0.3):
            return rng.choice(("Hello! How can I help?", "Done.", "Could you tell me more?"))
        fn = rng.choice(tools)["function"]
        return {"name": fn["name"], "arguments": sample_value(fn["parameters"], rng)}

    def always_refuse(env: PlayedEnv, obs: list) -> Any:
        return REFUSAL

    def first_write(env: PlayedEnv, obs: list) -> Any:
        toolset = toolset_of(env)
        writes = [t for t in toolset.values() if t.kind is ToolKind.WRITE]
        if not writes:
            return REFUSAL
        return {"name": writes[0].name, "arguments": sample_value(writes[0].parameters, rng)}

    return {"random": random_policy, "always_refuse": always_refuse, "first_write_sampled": first_write}
