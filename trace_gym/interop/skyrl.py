"""trace-gym envs in SkyRL, through `skyrl_gym`'s text env interface (the `skyrl` extra).

SkyRL's generator makes one env per trajectory with `skyrl_gym.make(env_class,
env_config=..., extras=row)`, where `row` is the dataset row less its prompt, calls
`env.init(prompt)` for the opening conversation, then `env.step(text)` with each model turn
and appends the new messages it returns until `done`. `TraceTextEnv` plays a trace-gym env
that way: the row names the env, the seed and the knobs (`skyrl_rows` writes them); the
model's text is parsed as the env parses any action (a reply, or hermes `<tool_call>`
blocks); the reward is 0 on every turn but the last, which carries the env's own.

    from trace_gym.interop.skyrl import register, skyrl_rows

    rows = skyrl_rows("trace/precondition_verification-v0", range(64))  # the training dataset
    register()  # in SkyRL's entry point, where its examples register their own envs
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import gymnasium as gym
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput

__all__ = ["ENV_CLASS", "TraceTextEnv", "register", "skyrl_rows"]

ENV_CLASS = "trace"
"""The `env_class` trace-gym's envs register under in skyrl_gym."""


class TraceTextEnv(BaseTextEnv):
    """A trace-gym env as a SkyRL text env: `extras` holds `env_id`, `seed`, and optionally
    `knobs` (gym.make keywords, as JSON text or a dict) and `hint`; SkyRL's `max_turns` is
    the env's own step limit."""

    def __init__(self, env_config: Any = None, extras: dict[str, Any] | None = None) -> None:
        super().__init__()
        import trace_gym  # noqa: F401  (registers the envs)
        from trace_gym.errors import InvalidConfig

        extras = dict(extras or {})
        missing = [k for k in ("env_id", "seed") if k not in extras]
        if missing:
            raise InvalidConfig(f"a trace-gym SkyRL row needs {', '.join(missing)} (write rows with skyrl_rows)")
        self.env_id, self.seed = str(extras["env_id"]), int(extras["seed"])
        self.hint = bool(extras.get("hint", False))
        knobs = extras.get("knobs") or {}
        self.env = gym.make(self.env_id, **(json.loads(knobs) if isinstance(knobs, str) else dict(knobs)))
        self.max_turns = self.env.spec.max_episode_steps if self.env.spec else 1
        self.tools: list[dict[str, Any]] = []
        self.reward = 0.0
        self._seen = 0

    def init(self, prompt: Any = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """The episode's opening conversation, from the env (the row's prompt is the same,
        as `skyrl_rows` wrote it), and its tool schemas as metadata."""
        messages, info = self.env.reset(seed=self.seed, options={"hint": self.hint})
        self._seen, self.tools, self.turns = len(messages), info["tools"], 0
        return messages, {"tools": self.tools}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Play the model's turn; the messages after it (tool results, the customer's
        reply), the reward (the env's, on the last turn) and whether the episode is over."""
        messages, reward, terminated, truncated, info = self.env.step(action)
        self.turns += 1
        new = messages[self._seen + 1:]  # what follows the turn, which SkyRL's history already holds
        self._seen = len(messages)
        done = terminated or truncated
        self.reward = float(reward) if done else 0.0
        metadata = {"termination_reason": info.get("termination_reason"), "verdict": info.get("verdict")} \
            if done else {}
        return BaseTextEnvStepOutput(observations=new, reward=self.reward, done=done, metadata=metadata,
                                     postprocessed_action=None)

    def get_metrics(self) -> dict[str, Any]:
        """The episode's reward and turn count."""
        return {"reward": self.reward, "turns": self.turns}

    def close(self) -> None:
        """Close the env."""
        self.env.close()


def register(env_class: str = ENV_CLASS) -> None:
    """Register `TraceTextEnv` with skyrl_gym under `env_class` (idempotent)."""
    import skyrl_gym

    if env_class not in skyrl_gym.registry:
        skyrl_gym.register(id=env_class, entry_point="trace_gym.interop.skyrl:TraceTextEnv")


def skyrl_rows(env_id: str, seeds: Iterable[int], *, hint: bool = False, env_class: str = ENV_CLASS,
               **knobs: Any) -> list[dict[str, Any]]:
    """SkyRL dataset rows, one per seed: `prompt` (the opening conversation), `env_class`,
    and the extras `TraceTextEnv` reads (`env_id`, `seed`, `knobs` as JSON text, which a
    parquet file holds even when empty, and `hint`)."""
    from trace_gym.interop.tasks import task_rows

    return [{"prompt": row["prompt"], "env_class": env_class, "env_id": env_id, "seed": row["seed"],
             "knobs": json.dumps(knobs), "hint": hint} for row in task_rows(env_id, seeds, hint=hint, **knobs)]
