"""trace-gym envs in verifiers (the `verifiers` extra): `load_environment(env_id)` returns a
verifiers multi-turn env, for verifiers' own rollout loop (`evaluate`, `generate`, `vf-eval`)
and the trainers that drive it.

A dataset row is one seed: its prompt is the episode's opening conversation, its `info` the
seed and the env's tools (as verifiers' tool definitions). A rollout makes the env, resets
it at the row's seed and plays each model turn as the env's action; the messages the env
adds after it (tool results, answering the turn's calls by the model's own ids:
`trace_gym.interop.turns`; the customer's reply) are verifiers' env response. The env ends
the episode, at its own step limit too: verifiers' turn limit is off, since it would stop
before the env played the last turn. The reward is the env's, paid at the end (verifiers'
`GymEnv` sums per-step rewards of text actions instead). An env that fails (a sandboxed env's
lost worker) fails its own rollout, as verifiers' infrastructure errors do, not the whole
run; the env is closed when the rollout ends, however it ends (a timeout that cancels it
while its env is being made included).

    import verifiers as vf
    from openai import AsyncOpenAI
    from trace_gym.interop.verifiers import load_environment

    env = load_environment("trace/precondition_verification-v0", num_eval_examples=8)
    client = vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url="http://localhost:8000/v1", api_key="-"))
    results = env.evaluate_sync(client, "served-model", rollouts_per_example=4)

Train rows are the first seeds of the train split, eval rows the first of the test split
(`trace_gym.seeding`), so a verifiers run never trains on what it evaluates.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import verifiers as vf

if getattr(vf, "MultiTurnEnv", None) is None:  # 0.4 replaced the classic stack with verifiers.v1
    raise ImportError(f"trace_gym.interop.verifiers needs verifiers 0.3 (its MultiTurnEnv); installed: "
                      f"{getattr(vf, '__version__', 'unknown')} (pip install 'trace-gym[verifiers]')")

from verifiers.utils.message_utils import normalize_messages

from trace_gym.errors import TraceGymError
from trace_gym.interop.aio import AsyncEnv
from trace_gym.interop.turns import answering

T = TypeVar("T")

__all__ = ["TraceMultiTurnEnv", "load_environment"]


def tool_defs(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI tool schemas as verifiers' provider-agnostic tool definitions."""
    return [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
             "parameters": t["function"].get("parameters", {"type": "object", "properties": {}})}
            for t in tools]


def _wire(turn: Any) -> dict[str, Any]:
    """A verifiers assistant message as the OpenAI wire dict an env takes as its action."""
    content = turn.content
    if isinstance(content, list):  # content parts: the text of the text parts
        content = "".join(p.get("text", "") if isinstance(p, dict) else getattr(p, "text", "") for p in content)
    calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
             for c in (turn.tool_calls or [])]
    return {"role": "assistant", "content": content, **({"tool_calls": calls} if calls else {})}


@dataclass
class EnvSlot:
    """A rollout's env. It is made in a thread, which runs on when a timeout cancels the
    rollout meanwhile; whichever of the maker (`fill`) and the rollout's cleanup (`empty`)
    comes second closes it, so no env outlives its rollout."""

    env: AsyncEnv | None = None
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fill(self, env: AsyncEnv) -> None:
        """Keep `env`; close it at once if the rollout was cleaned up meanwhile."""
        with self.lock:
            if not self.closed:
                self.env = env
                return
        env.env.close()

    def empty(self) -> AsyncEnv | None:
        """The env to close (None if not made yet: its maker will close it)."""
        with self.lock:
            self.closed = True
            env, self.env = self.env, None
            return env


async def _as_rollout_error(call: Awaitable[T]) -> T:
    """`call`, its trace-gym error raised as verifiers' infrastructure error: the rollout
    ends with it recorded (reward 0), the other rollouts go on."""
    try:
        return await call
    except TraceGymError as exc:
        raise vf.InfraError(f"{type(exc).__name__}: {exc}") from exc


async def env_reward(state: vf.State) -> float:
    """The env's reward for the episode (0 where it did not end: a model error, a timeout)."""
    return float(state.get("trace_reward", 0.0))


class TraceMultiTurnEnv(vf.MultiTurnEnv):
    """A trace-gym env (`gym_env_id`, made with `knobs`) as a verifiers multi-turn env over
    the given train and eval seeds."""

    def __init__(self, gym_env_id: str, train_seeds: Iterable[int], eval_seeds: Iterable[int], *,
                 hint: bool = False, knobs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        from trace_gym.driver import make_env

        self.gym_env_id, self.knobs, self.hint = gym_env_id, dict(knobs or {}), hint
        make_env(gym_env_id, **self.knobs).close()  # an unknown id or knob is refused here, not in a rollout
        train, evals = list(train_seeds), list(eval_seeds)
        super().__init__(dataset=(lambda: self.rows(train)) if train else None,
                         eval_dataset=(lambda: self.rows(evals)) if evals else None,
                         rubric=vf.Rubric(funcs=[env_reward]), max_turns=-1,
                         env_id=gym_env_id, env_args=self.knobs, **kwargs)

    def rows(self, seeds: Iterable[int]) -> Any:
        """The dataset of `seeds`: `prompt` (the opening conversation) and `info` (JSON text
        of the seed, the split and the tool definitions: tools differ in shape, which Arrow
        columns do not take; verifiers reads JSON text there)."""
        from datasets import Dataset

        from trace_gym.interop.tasks import task_rows

        return Dataset.from_list([
            {"prompt": row["prompt"],
             "info": json.dumps({"seed": row["seed"], "split": row["split"], "tool_defs": tool_defs(row["tools"])})}
            for row in task_rows(self.gym_env_id, seeds, hint=self.hint, **self.knobs)])

    async def setup_state(self, state: vf.State, **kwargs: Any) -> vf.State:
        """Make the env (off the event loop: a sandboxed env starts a worker) and reset it at
        the row's seed."""
        slot = state["trace_slot"] = EnvSlot()
        state["trace_reward"] = 0.0

        def make() -> AsyncEnv:
            env = AsyncEnv(self.gym_env_id, **self.knobs)
            slot.fill(env)
            return env

        env = await _as_rollout_error(asyncio.to_thread(make))
        messages, _ = await _as_rollout_error(env.areset(seed=int(state["info"]["seed"]),
                                                         options={"hint": self.hint}))
        state["trace_seen"] = len(messages)
        return state

    async def env_response(self, messages: vf.Messages, state: vf.State, **kwargs: Any) -> vf.Messages:
        """Play the model's last turn; the env's messages after it. When the episode ends they
        are the final response, and the env's reward is kept for the rubric."""
        action, before = _wire(messages[-1]), state["trace_seen"]
        conversation, reward, terminated, truncated, _ = await _as_rollout_error(state["trace_slot"].env.astep(action))
        their_ids = [call["id"] for call in action.get("tool_calls", [])]
        added = normalize_messages(answering(their_ids, conversation[before], conversation[before + 1:]),
                                   field_name="env_response")
        state["trace_seen"] = len(conversation)
        if terminated or truncated:
            state["trace_reward"] = float(reward)
            state["final_env_response"] = added
        return added

    @vf.cleanup
    async def close_trace_env(self, state: vf.State) -> None:
        """Close the rollout's env (the state keeps no live env after the rollout); after a
        call cancelled by a timeout, the close waits for that call's thread to finish."""
        slot = state.pop("trace_slot", None)
        env = slot.empty() if slot is not None else None
        if env is not None:
            await env.aclose()


def load_environment(env_id: str, *, num_train_examples: int = 1000, num_eval_examples: int = 100,
                     hint: bool = False, **knobs: Any) -> TraceMultiTurnEnv:
    """`env_id` as a verifiers env: `num_train_examples` rows of the train split's first
    seeds, `num_eval_examples` of the test split's; `knobs` are `gym.make` keywords (what
    verifiers' `env_args` pass)."""
    from trace_gym.seeding import seeds

    return TraceMultiTurnEnv(env_id, seeds("train", 0, num_train_examples), seeds("test", 0, num_eval_examples),
                             hint=hint, knobs=knobs)
