"""A policy served by an OpenAI-compatible endpoint (vLLM, or any /v1/chat/completions).

With `adapter` (a LoRA adapter directory the server can read), the policy plays that adapter
on the base model the server serves: it asks the server to load it (vLLM's runtime LoRA
loading, `VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora`) under a name
made from the directory's content hash, and sends its requests to that name, as the local
policy's `adapter` does on a local model. A name already loaded holds the same content (the
hash is in it), so a second policy, or a second process, loads nothing again.

Configuration comes from arguments or the usual environment variables: `OPENAI_BASE_URL`
(or the first of `VLLM_BASE_URLS`, comma-separated), `OPENAI_API_KEY` (default "EMPTY", as
vLLM expects), `TRACE_GYM_MODEL`. The server parses tool calls (vLLM: `vllm serve MODEL
--enable-auto-tool-choice --tool-call-parser hermes`; without the first flag it answers a
request that carries tools with a 400); text the server could not parse comes back as content and the env's
own parser turns it into a tool call or an error observation. Transient failures (connection
errors, timeouts, 429 and 5xx answers) are retried with exponential backoff a bounded number
of times; then, or on any other error, `EndpointError` says what happened.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import gymnasium as gym

from trace_gym.errors import InvalidConfig, TraceGymError
from trace_gym.messages import Message

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolUnionParam


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


class ServerRefused(TraceGymError):
    """The server answered a request with an error status (`status`, its whole `body`)."""

    def __init__(self, url: str, status: int, body: str) -> None:
        super().__init__(f"server {url} answered {status}: {body[:300]}")
        self.status, self.body = status, body


def post_json(url: str, body: dict[str, Any], *, timeout: float = 600.0, retries: int = 4,
              missing_ok: bool = False) -> Any:
    """POST `body` as JSON to `url` (a vLLM route); the answer as JSON, or its text. Retries
    connection errors, 429 and 5xx with backoff; ServerRefused on any other error status,
    except that `missing_ok` makes a 400 or 404 answer None (unloading what is not loaded);
    TraceGymError when the server cannot be reached."""
    data = json.dumps(body).encode()
    for attempt in range(retries + 1):
        request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                text = response.read()
            return json.loads(text) if text.strip().startswith((b"{", b"[")) else text.decode()
        except urllib.error.HTTPError as e:
            if missing_ok and e.code in (400, 404):
                return None
            if (e.code < 500 and e.code != 429) or attempt == retries:
                raise ServerRefused(url, e.code, e.read().decode(errors="replace")) from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
            if attempt == retries:
                raise TraceGymError(f"server {url} is unreachable: {e}") from None
        time.sleep(min(8.0, 0.5 * 2 ** attempt))
    raise TraceGymError(f"server {url}: the retry loop ended without an answer")


_LOADED: set[tuple[str, str]] = set()
_LOADING = threading.Lock()


def adapter_name(adapter: str | os.PathLike) -> str:
    """The name a server serves an adapter directory under: its folder name and a digest of
    its files (a changed adapter gets a new name)."""
    from trace_gym.provenance import dir_sha256

    path = Path(adapter)
    if not (path / "adapter_config.json").is_file():
        raise InvalidConfig(f"adapter={str(path)!r} is not a LoRA adapter directory (no adapter_config.json)")
    return f"{path.resolve().name}-{dir_sha256(path)[:12]}"


def serve_adapter(base_url: str, adapter: str | os.PathLike, timeout: float = 600.0) -> str:
    """Make the vLLM server at `base_url` serve the adapter directory (loaded at runtime
    under `adapter_name`, once per process and name); returns the name. The server must be
    able to read the directory's path."""
    name = adapter_name(adapter)
    with _LOADING:
        if (base_url, name) not in _LOADED:
            try:
                post_json(f"{base_url}/load_lora_adapter", {"lora_name": name, "lora_path": str(Path(adapter).resolve())},
                          timeout=timeout)
            except ServerRefused as error:
                # vLLM's 400 "... has already been loaded": the name holds the content's hash, so the same adapter
                if not (error.status == 400 and "already been loaded" in error.body):
                    raise
            _LOADED.add((base_url, name))
    return name


class EndpointPolicy:
    """The next turn from `client.chat.completions.create(messages=..., tools=...)`."""

    def __init__(self, base_url: str | None = None, model: str | None = None, api_key: str | None = None,
                 temperature: float = 1.0, top_p: float = 1.0, max_tokens: int = 1024,
                 timeout: float = 60.0, retries: int = 3, backoff: float = 0.5,
                 adapter: str | os.PathLike | None = None) -> None:
        from openai import OpenAI

        from trace_gym.agents.sampling import check_sampling

        check_sampling("endpoint policy", temperature, top_p, max_tokens)
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise InvalidConfig(f"endpoint policy: timeout={timeout!r} is invalid: must be seconds > 0")
        if not (type(retries) is int and retries >= 0):
            raise InvalidConfig(f"endpoint policy: retries={retries!r} is invalid: must be an integer >= 0")
        self.base_url = resolve_base_url(base_url)
        self.base_model = model or os.environ.get("TRACE_GYM_MODEL")
        if not self.base_model:
            raise InvalidConfig("policy 'endpoint' needs the model's name as the server serves it: --model NAME (or "
                                "$TRACE_GYM_MODEL); vLLM serves the name given to `vllm serve` (--served-model-name)")
        self.model = serve_adapter(self.base_url, adapter) if adapter else self.base_model
        """The name requests go to: the base model's, or the adapter's as the server serves it."""
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
                # the conversation and the tools are OpenAI chat messages and function schemas, as JSON
                response = self.client.chat.completions.create(
                    model=self.model, messages=cast("list[ChatCompletionMessageParam]", messages),
                    # the SDK sends None as null (as before), though its annotation admits no None
                    tools=cast("list[ChatCompletionToolUnionParam]", tools) or None,  # type: ignore[arg-type]
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
