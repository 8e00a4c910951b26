"""Rollouts from vLLM servers that hot-swap the adapter being trained.

Start each server with LoRA enabled and runtime updates allowed:

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora --max-lora-rank 16

and name them in `VLLM_BASE_URLS` (comma-separated, e.g. `http://gpu0:8000/v1,http://gpu1:8000/v1`).
Before each iteration's rollouts the trainer saves its adapter to a directory every server
can read (`adapter_dir`), unloads the previous iteration's adapter (`POST
/v1/unload_lora_adapter`) and loads the new one under a new name (`POST
/v1/load_lora_adapter`), so no server ever serves a stale copy under the current name.

Each agent turn is one `POST /v1/completions` whose prompt is the chat template's token ids
(the same ones the loss conditions on), with `return_token_ids` and `logprobs: 0`: the
response carries the sampled token ids and their log-probabilities, which become p_old.
Episodes are spread over the servers round-robin and run in threads (the servers batch
them); each request carries its own seed, derived from the episode's sampling seed and the
turn, so a rerun samples what the first run sampled on the same servers.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trace_gym.agents.episodes import Request, Rollout, Turn, checks_of, make_env, render_prompt, unhinted
from trace_gym.errors import InvalidConfig, TraceGymError


def base_urls(value: str | None = None) -> list[str]:
    """The servers of `VLLM_BASE_URLS` (or `value`), each ending in /v1."""
    text = value if value is not None else os.environ.get("VLLM_BASE_URLS", "")
    urls = [u.strip().rstrip("/") for u in text.split(",") if u.strip()]
    if not urls:
        raise InvalidConfig("the vllm backend needs VLLM_BASE_URLS: comma-separated server URLs such as "
                            "http://localhost:8000/v1")
    return [u if u.endswith("/v1") else u + "/v1" for u in urls]


class VLLMBackend:
    def __init__(self, urls: Sequence[str], tokenizer: Any, env_id: str, env_kwargs: dict[str, Any], *,
                 adapter_dir: Path, name: str = "trace-adapter", temperature: float = 1.0, top_p: float = 1.0,
                 max_new_tokens: int = 256, workers: int = 32, timeout: float = 600.0, retries: int = 4) -> None:
        self.urls = list(urls)
        self.tokenizer = tokenizer
        self.env_id, self.env_kwargs = env_id, dict(env_kwargs)
        self.adapter_dir, self.name = Path(adapter_dir), name
        self.temperature, self.top_p, self.max_new_tokens = temperature, top_p, max_new_tokens
        self.workers, self.timeout, self.retries = workers, timeout, retries
        self.stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.served: str | None = None

    @classmethod
    def from_env(cls, config: Any, tokenizer: Any, adapter_dir: Path, temperature: float | None = None,
                 name: str = "trace-adapter") -> VLLMBackend:
        return cls(base_urls(), tokenizer, config.env_id, config.env_kwargs, adapter_dir=adapter_dir, name=name,
                   temperature=config.temperature if temperature is None else temperature, top_p=config.top_p,
                   max_new_tokens=config.max_new_tokens, workers=config.batch_episodes)

    # -- the adapter --------------------------------------------------------------------------

    def sync(self, model: Any, iteration: int) -> None:
        name = f"{self.name}-it{iteration}"
        path = self.adapter_dir / name
        model.save_pretrained(path)
        for url in self.urls:
            if self.served is not None:
                self._post(url, "/unload_lora_adapter", {"lora_name": self.served}, missing_ok=True)
            self._post(url, "/load_lora_adapter", {"lora_name": name, "lora_path": str(path.resolve())})
        self.served = name

    # -- generation ---------------------------------------------------------------------------

    def _post(self, url: str, path: str, body: dict[str, Any], missing_ok: bool = False) -> Any:
        data = json.dumps(body).encode()
        for attempt in range(self.retries + 1):
            request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    text = response.read()
                return json.loads(text) if text.strip().startswith((b"{", b"[")) else text.decode()
            except urllib.error.HTTPError as e:
                if missing_ok and e.code in (400, 404):
                    return None
                if (e.code < 500 and e.code != 429) or attempt == self.retries:
                    detail = e.read().decode(errors="replace")[:300]
                    raise TraceGymError(f"vLLM server {url}{path} answered {e.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as e:
                if attempt == self.retries:
                    raise TraceGymError(f"vLLM server {url}{path} is unreachable: {e}") from None
            time.sleep(min(8.0, 0.5 * 2 ** attempt))
        raise AssertionError("unreachable")

    def complete(self, url: str, prompt: list[int], seed: int) -> tuple[list[int], list[float]]:
        if self.served is None:
            raise TraceGymError("the vllm backend has no adapter loaded yet: call sync(model, iteration) first")
        out = self._post(url, "/completions", {
            "model": self.served, "prompt": prompt, "max_tokens": self.max_new_tokens,
            "temperature": self.temperature, "top_p": self.top_p, "n": 1, "seed": seed,
            "stop_token_ids": [self.stop], "skip_special_tokens": False,
            "return_token_ids": True, "logprobs": 0})
        try:
            choice = out["choices"][0]
            tokens, logprobs = list(choice["token_ids"]), list(choice["logprobs"]["token_logprobs"])
        except (KeyError, IndexError, TypeError) as e:
            raise TraceGymError(f"vLLM server {url} sent a completion without token_ids and logprobs ({e!r}); "
                                "it needs a vLLM with return_token_ids") from None
        if len(tokens) != len(logprobs):
            raise TraceGymError(f"vLLM server {url} sent {len(tokens)} token ids but {len(logprobs)} logprobs")
        return tokens, [float(x) for x in logprobs]

    def _episode(self, index: int, r: Request) -> Rollout:
        url = self.urls[index % len(self.urls)]
        env = make_env(self.env_id, **self.env_kwargs)
        try:
            obs, info = env.reset(seed=r.seed, options={"hint": True} if r.hint else None)
            tools, system = info["tools"], info["system_prompt_unhinted"]
            turns: list[Turn] = []
            while True:
                prompt = render_prompt(self.tokenizer, obs, tools)
                tokens, logprobs = self.complete(url, prompt, (r.sampling_seed + 7919 * len(turns)) % 2**63)
                loss_prompt = prompt if not r.hint else render_prompt(self.tokenizer, unhinted(obs, system), tools)
                turns.append(Turn(prompt, loss_prompt, tokens, logprobs))
                body = tokens[:-1] if tokens and tokens[-1] == self.stop else tokens
                obs, reward, terminated, truncated, info = env.step(
                    self.tokenizer.decode(body, skip_special_tokens=False))
                if terminated or truncated:
                    return Rollout(r, float(reward), checks_of(info.get("verdict")), info.get("termination_reason"),
                                   turns, obs)
        finally:
            env.close()

    def play(self, requests: Sequence[Request]) -> list[Rollout]:
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(requests)))) as pool:
            return list(pool.map(self._episode, range(len(requests)), requests))
