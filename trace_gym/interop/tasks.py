"""An env's tasks as data: one row per seed with what a trainer's dataset holds (the opening
conversation, the tool schemas, the seed, the task as JSON), for trainers that read a
dataset and call the env only to score (`trace-gym export`, `dataset`).

A row is valid under `trace_gym/schemas/task.schema.json` (`schema("task")`); trajectory
records under `trajectory.schema.json`. The row's `task` is the task's JSON as the env
describes it, answer included (what the verifier checks): a trainer gives the model the
`prompt` only.

    >>> from trace_gym.interop.tasks import task_rows
    >>> (row,) = task_rows("trace/precondition_verification-v0", [0])
    >>> row["seed"], [m["role"] for m in row["prompt"][:2]], len(row["tools"])
    (0, ['system', 'user'], 6)
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from trace_gym.driver import make_env
from trace_gym.seeding import split_of

__all__ = ["dataset", "schema", "task_rows", "validator", "write_tasks"]

SCHEMAS = ("task", "trajectory")
"""The JSON Schemas shipped in `trace_gym/schemas/`."""


def task_rows(env_id: str, seeds: Iterable[int], *, hint: bool = False, **knobs: Any) -> Iterator[dict[str, Any]]:
    """One row per (raw) seed: `env_id`, `seed`, `split`, `knobs`, `hint`, `prompt` (the
    opening messages), `tools` (their schemas), `task` (the task's JSON) and `env_sha256`."""
    from trace_gym.registry import env_sha256

    sha = env_sha256(env_id)
    env = make_env(env_id, **knobs)
    try:
        for seed in seeds:
            seed = int(seed)
            prompt, info = env.reset(seed=seed, options={"hint": hint})
            yield {"env_id": env_id, "seed": seed, "split": split_of(seed), "knobs": dict(knobs), "hint": hint,
                   "prompt": prompt, "tools": info["tools"], "task": env.unwrapped.task.to_json(),
                   "env_sha256": sha}
    finally:
        env.close()


def write_tasks(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Write `rows` to a JSON Lines file, replaced whole and atomically; the count."""
    from trace_gym.jsondata import write_jsonl_atomic

    rows = list(rows)
    write_jsonl_atomic(Path(path), rows)
    return len(rows)


def dataset(env_id: str, seeds: Iterable[int], *, hint: bool = False, **knobs: Any) -> Any:
    """A `datasets.Dataset` of the env's tasks, one row per seed: `prompt` (the opening
    messages, TRL's conversational form; Arrow gives every message every key, None where
    it has none), `tools` and `task` (JSON text: their shapes differ between envs and tasks,
    which Arrow columns do not take), `env_id`, `seed`, `split`."""
    from datasets import Dataset

    rows = [{"prompt": row["prompt"],
             "tools": json.dumps(row["tools"]), "task": json.dumps(row["task"]), "env_id": row["env_id"],
             "seed": row["seed"], "split": row["split"]}
            for row in task_rows(env_id, seeds, hint=hint, **knobs)]
    return Dataset.from_list(rows)


@cache
def schema(name: str) -> dict[str, Any]:
    """A shipped JSON Schema: "task" (a row of `task_rows`) or "trajectory" (a record)."""
    if name not in SCHEMAS:
        from trace_gym.errors import InvalidConfig

        raise InvalidConfig(f"unknown schema {name!r}; shipped: {', '.join(SCHEMAS)}")
    return json.loads(resources.files("trace_gym.schemas").joinpath(f"{name}.schema.json").read_text())


@cache
def validator(name: str) -> Any:
    """A compiled validator of `schema(name)` (fastjsonschema: raises on an invalid value)."""
    import fastjsonschema

    return fastjsonschema.compile(schema(name))
