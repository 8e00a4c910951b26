"""Asking an LLM for JSON: validated against a schema, asked again with the error when the
answer does not fit, cached on disk by request hash (a resumed analysis pays nothing twice),
with token usage counted and a cap on requests."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import fastjsonschema

from trace_gym.errors import TraceGymError
from trace_gym.jsondata import write_json_atomic

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class AnalystError(TraceGymError):
    """The analyst's answers never fitted, or the request cap was reached."""


def extract_json(text: str) -> Any:
    """The JSON value in a reply: a fenced block, or the outermost object."""
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.DOTALL)
    match = _FENCE.search(text)
    candidate = match.group(1) if match else text[text.find("{"): text.rfind("}") + 1]
    return json.loads(candidate)


@dataclass
class Analyst:
    """A chat endpoint used for JSON answers."""

    client: Any
    model: str
    cache_dir: Path | None = None
    max_requests: int | None = None
    temperature: float = 0.0
    seed: int | None = None
    """Sent with each request (a server that supports it samples reproducibly) and part of
    the cache key."""
    retries: int = 3
    requests: int = 0
    usage: dict[str, int] = field(default_factory=lambda: {"prompt_tokens": 0, "completion_tokens": 0})

    def _cached(self, key: str) -> str | None:
        if self.cache_dir is None:
            return None
        path = self.cache_dir / f"{key}.json"
        return json.loads(path.read_text())["content"] if path.is_file() else None

    def _store(self, key: str, content: str) -> None:
        if self.cache_dir is None:
            return
        write_json_atomic(self.cache_dir / f"{key}.json", {"content": content})

    def complete(self, messages: list[dict[str, str]]) -> str:
        """The model's answer to `messages`: from the disk cache when asked before, else asked
        (with retries) within `max_requests`, counting the tokens used."""
        key = hashlib.sha256(json.dumps([self.model, self.temperature, self.seed, messages],
                                        sort_keys=True).encode()).hexdigest()
        cached = self._cached(key)
        if cached is not None:
            return cached
        if self.max_requests is not None and self.requests >= self.max_requests:
            raise AnalystError(f"the request cap ({self.max_requests}) is reached; rerun to continue from the cache")
        self.requests += 1
        extra = {} if self.seed is None else {"seed": self.seed}  # servers that support it sample reproducibly
        response = self.client.chat.completions.create(model=self.model, messages=messages,
                                                       temperature=self.temperature, **extra)
        if response.usage is not None:
            self.usage["prompt_tokens"] += response.usage.prompt_tokens or 0
            self.usage["completion_tokens"] += response.usage.completion_tokens or 0
        content = response.choices[0].message.content or ""
        self._store(key, content)
        return content

    def ask_json(self, messages: list[dict[str, str]], schema: dict[str, Any],
                 check: Callable[[Any], str | None] | None = None, what: str = "answer") -> Any:
        """A reply that parses as JSON, fits `schema` and passes `check` (which returns a
        problem or None); otherwise the problem is sent back, up to `retries` times."""
        validate = fastjsonschema.compile(schema)
        history = list(messages)
        problem: str | None = ""
        for _ in range(self.retries + 1):
            content = self.complete(history)
            try:
                value = extract_json(content)
                validate(value)
                problem = check(value) if check else None
            except ValueError as exc:  # JSONDecodeError is a ValueError
                problem = f"the reply is not valid JSON ({exc})"
            except fastjsonschema.JsonSchemaValueException as exc:
                problem = f"the JSON does not fit the required format: {exc.message}"
            if not problem:
                return value
            history = [*history, {"role": "assistant", "content": content},
                       {"role": "user", "content": f"That {what} cannot be used: {problem}. Reply again with the "
                                                    "complete corrected JSON only."}]
        raise AnalystError(f"no usable {what} after {self.retries + 1} attempts; last problem: {problem}")
