"""A policy served by an OpenAI-compatible endpoint (vLLM, or any /v1/chat/completions).

Configuration comes from arguments or the usual environment variables: `OPENAI_BASE_URL`
(or the first of `VLLM_BASE_URLS`, comma-separated), `OPENAI_API_KEY` (default "EMPTY", as
vLLM expects), `TRACE_GYM_MODEL`. The server parses tool calls (vLLM: `--tool-call-parser
hermes` or `qwen3`); text the server could not parse comes back as content and the env's
own parser turns it into a tool call or an error observation. Transient failures (connection
errors, timeouts, 429 and 5xx answers) are retried with exponential backoff a bounded number
of times; then, or on any other error, `EndpointError` says what happened.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import gymnasium as gym

from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.messages import Message


class EndpointError(TraceGymError):
    """The endpoint did not answer usefully (after the retries, when retrying made sense)."""


def resolve_base_url(base_url: str | None) -> str:
    """The endpoint's base URL: `base_url`, else `OPENAI_BASE_URL`, else the first of
    `VLLM_BASE_URLS`; InvalidConfig when none is set."""
    url = base_url or os.environ.get("OPENAI_BASE_URL")
    if not url and os.environ.get("VLLM_BASE_URLS"):
        url = os.environ["VLLM_BASE_URLS"].split(",")[0].strip()
    if not url:
        raise InvalidConfig("no endpoint: pass --base-url, or set OPENAI_BASE_URL or VLLM_BASE_URLS")
    return url.rstrip("/")


class EndpointPolicy:
    """The next turn from `client.chat.completions.create(messages=..., tools=...)`."""

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 temperature: float = 1.0, top_p: float = 1.0, max_tokens: int = 1024,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 0.5) -> None:
        from openai import OpenAI

        from trace_gym.agents.sampling import check_sampling

        check_sampling("endpoint policy", temperature, top_p, max_tokens)
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise InvalidConfig(f"endpoint policy: timeout={timeout!r} is invalid: must be seconds > 0")
        if not (type(retries) is int and retries >= 0):
            raise InvalidConfig(f"endpoint policy: retries={retries!r} is invalid: must be an integer >= 0")
        self.base_url = resolve_base_url(base_url)
        self.model = model or os.environ.get("TRACE_GYM_MODEL") or "default"
        self.name = f"endpoint:{self.model}"
        self.temperature, self.top_p, self.max_tokens = temperature, top_p, max_tokens
        self.retries, self.backoff = retries, backoff
        self._rng = random.Random(0)  # jitter only; never reaches an episode
        self.client = OpenAI(base_url=self.base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY",
                             timeout=timeout, max_retries=0)
        self._seed = 0

    def bind(self, env: gym.Env, seed: int = 0, sample: int = 0) -> None:
        """Derive the request seed from the episode's seed and sample (servers that support
        it sample reproducibly)."""
        self._seed = (seed * 1_000_003 + sample) % 2**31  # servers that support it sample reproducibly

    def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The server's assistant message for this conversation, transient failures retried
        with backoff; EndpointError when it does not answer usefully."""
        import openai

        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                response = self.client.chat.completions.create(
                    model=self.model, messages=messages, tools=tools or None,
                    temperature=self.temperature, top_p=self.top_p, max_tokens=self.max_tokens, seed=self._seed)
            except (openai.APIConnectionError, openai.APITimeoutError, openai.RateLimitError,
                    openai.InternalServerError) as exc:
                last = exc
                if attempt < self.retries:
                    time.sleep(self.backoff * 2**attempt * (1 + self._rng.random()))
                continue
            except openai.APIStatusError as exc:
                raise EndpointError(f"{self.base_url} refused the request: HTTP {exc.status_code}: "
                                    f"{str(exc)[:300]}") from None
            if not response.choices:
                raise EndpointError(f"{self.base_url} answered with no choices")
            message = response.choices[0].message.model_dump(exclude_none=True)
            message["role"] = "assistant"
            return message
        raise EndpointError(f"{self.base_url} failed {self.retries + 1} times; last error: "
                            f"{type(last).__name__}: {str(last)[:300]}")
