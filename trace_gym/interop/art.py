"""trace-gym envs in OpenPipe ART (the `art` extra): a rollout function that plays one
episode through an OpenAI-compatible client (an `art.Model`'s, or any `AsyncOpenAI`) and
returns an `art.Trajectory` with the env's reward.

ART trains on the `Choice` objects of a trajectory's assistant turns (their log-probabilities
included) and reads the other messages as context, so the trajectory holds the opening
conversation, each turn's `Choice` as the client returned it, and after it the messages the
env added (tool results, answering the `Choice`'s tool-call ids, user turns where the calls
came as text: `trace_gym.interop.turns`; and the customer's reply).
The tools are the env's schemas.

    import art
    from trace_gym.interop.art import rollout

    groups = [art.TrajectoryGroup(rollout(model, "trace/retail-v0", seed) for _ in range(8))
              for seed in range(16)]  # group by seed: the rollouts of a group share it
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from trace_gym.interop.aio import AsyncEnv
from trace_gym.interop.turns import answering


def _import_art() -> Any:
    """`art`, imported without its patch of transformers: ART 0.5's import replaces
    `transformers.masking_utils._preprocess_mask_arguments` with a function of another
    signature, which breaks every model forward of transformers 5.x in the process (a
    trainer's, a local policy's). The function transformers had is put back."""
    try:
        from transformers import masking_utils
    except ImportError:
        import art as imported

        return imported
    kept = masking_utils._preprocess_mask_arguments
    import art as imported

    masking_utils._preprocess_mask_arguments = kept
    return imported


if TYPE_CHECKING:
    import art
else:
    art = _import_art()

__all__ = ["rollout"]


async def rollout(model: Any, env_id: str, seed: int, *, model_name: str | None = None, hint: bool = False,
                  temperature: float = 1.0, **knobs: Any) -> art.Trajectory:
    """One episode of `env_id` at `seed`, the agent's turns sampled through `model` (an
    `art.Model`, whose client and inference name are used, or an `AsyncOpenAI` client with
    `model_name`); the trajectory's reward is the env's, its metadata the env id and seed."""
    if hasattr(model, "openai_client"):
        client, name = model.openai_client(), model_name or model.get_inference_name()
    else:
        client, name = model, model_name
    if name is None:
        from trace_gym.errors import InvalidConfig

        raise InvalidConfig("rollout with an OpenAI client needs model_name (the served model's name)")
    async with AsyncEnv(env_id, **knobs) as env:
        messages, info = await env.areset(seed=seed, options={"hint": hint})
        trajectory = art.Trajectory(messages_and_choices=list(messages), tools=info["tools"], reward=0.0,
                                    metadata={"env_id": env_id, "seed": seed})
        done, reward = False, 0.0
        while not done:
            completion = await client.chat.completions.create(model=name, messages=messages, tools=info["tools"],
                                                              temperature=temperature, logprobs=True)
            choice = completion.choices[0]
            trajectory.messages_and_choices.append(choice)
            before = len(messages)
            messages, reward, terminated, truncated, info = await env.astep(
                choice.message.model_dump(exclude_none=True))
            # the env's messages are OpenAI wire dicts: what ART's message TypedDicts describe
            their_ids = [call.id for call in (choice.message.tool_calls or [])]
            added = cast(list[Any], answering(their_ids, messages[before], messages[before + 1:]))
            trajectory.messages_and_choices.extend(added)
            done = terminated or truncated
        trajectory.reward = float(reward)
        trajectory.metrics.update({"turns": info["turn"], "truncated": bool(truncated)})
        return trajectory.finish()
