"""Rollouts from vLLM servers that hot-swap the adapter being trained.

Start each server with LoRA enabled and runtime updates allowed:

    VLLM_ALLOW_RUNTIME_LORA_UPDATING=True vllm serve BASE --enable-lora --max-lora-rank 16 \
        --logprobs-mode processed_logprobs

and name them in `VLLM_BASE_URLS` (comma-separated, e.g. `http://gpu0:8000/v1,http://gpu1:8000/v1`).
Before each iteration's rollouts the trainer saves its adapter to a directory every server
can read (`adapter_dir`), unloads the previous iteration's adapter (`POST
/v1/unload_lora_adapter`) and loads the new one under a new name (`POST
/v1/load_lora_adapter`), so no server ever serves a stale copy under the current name. A
name is the run's (a digest of its adapter directory) and the iteration's, so runs sharing
a server do not meet, and a resumed run unloads the name it is about to load first (the
killed run may have loaded it: vLLM answers 400 "already loaded").

**Log-probabilities.** The trainer's p_old is log_softmax(logits / T); vLLM reports
log_softmax(logits), before the temperature, unless it serves with `--logprobs-mode
processed_logprobs`. At T = 1 the two agree, so the mode would go unnoticed; after the first
adapter is loaded the backend probes every server at T = 0.5 (`PROBE_TEMPERATURE`) and
refuses one whose log-probabilities are nearer the raw ones than the processed ones.

Each agent turn is one `POST /v1/completions` whose prompt is the chat template's token ids
(the same ones the loss conditions on), with `return_token_ids` and `logprobs: 0`: the
response carries the sampled token ids and their log-probabilities, which become p_old.
The episode driver (`trace_gym.driver`) plays them, `workers` in flight: the backend is a
batched policy whose turns are requests posted in threads (the servers batch them), and
each episode's next turn is asked as soon as its last one is stepped. Episodes are spread
over the servers round-robin; each request carries its own seed, derived from the episode's
sampling seed and the turn, so a rerun samples what the first run sampled on the same
servers.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from trace_gym.agents.chat import render_prompt, unhinted
from trace_gym.agents.endpoint import post_json
from trace_gym.driver import EpisodeRequest, Live, PlayedEpisode, Reply, Turn, play_in_order
from trace_gym.errors import InvalidConfig, TraceGymError

PROBE_TEMPERATURE = 0.5
"""The temperature of the start-up probe of the servers' log-probability mode (any T != 1)."""


def base_urls(value: str | None = None) -> list[str]:
    """The servers of `VLLM_BASE_URLS` (or `value`), each ending in /v1."""
    text = value if value is not None else os.environ.get("VLLM_BASE_URLS", "")
    urls = [u.strip().rstrip("/") for u in text.split(",") if u.strip()]
    if not urls:
        raise InvalidConfig("the vllm backend needs VLLM_BASE_URLS: comma-separated server URLs such as "
                            "http://localhost:8000/v1")
    return [u if u.endswith("/v1") else u + "/v1" for u in urls]


class VLLMBackend:
    """The trainer's rollout backend (`sync`, `play`) on vLLM servers: turns are completion
    requests posted in threads, episodes spread over the servers round-robin."""

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
        self.probed = False
        import hashlib

        # the run's tag: its adapter directory, so that two runs on one server never share a name
        self.tag = hashlib.sha256(str(self.adapter_dir.resolve()).encode()).hexdigest()[:8]

    @classmethod
    def from_env(cls, config: Any, tokenizer: Any, adapter_dir: Path, temperature: float | None = None,
                 name: str = "trace-adapter") -> VLLMBackend:
        """A backend on the servers of `VLLM_BASE_URLS`, with the config's env and sampling
        settings (`temperature` overrides the config's)."""
        return cls(base_urls(), tokenizer, config.env_id, config.env_kwargs, adapter_dir=adapter_dir, name=name,
                   temperature=config.temperature if temperature is None else temperature, top_p=config.top_p,
                   max_new_tokens=config.max_new_tokens, workers=config.batch_episodes)

    # -- the adapter --------------------------------------------------------------------------

    def sync(self, model: Any, iteration: int) -> None:
        """Save the model's adapter and make every server serve it under this iteration's
        name (unloading the previous one), keep only that copy on disk, and probe each
        server's log-probability mode the first time."""
        name = f"{self.name}-{self.tag}-it{iteration}"
        path = self.adapter_dir / name
        model.save_pretrained(path)
        for url in self.urls:
            if self.served is not None:
                self._post(url, "/unload_lora_adapter", {"lora_name": self.served}, missing_ok=True)
            elif not self.probed:  # a resumed run: the killed one may have loaded this very name
                self._post(url, "/unload_lora_adapter", {"lora_name": name}, missing_ok=True)
            self._post(url, "/load_lora_adapter", {"lora_name": name, "lora_path": str(path.resolve())})
        self.served = name
        # only the adapter being served is kept (a killed run's leftovers too): at model scale
        # every iteration's copy would fill the disk
        for old in self.adapter_dir.glob(f"{self.name}-{self.tag}-it*"):
            if old != path:
                shutil.rmtree(old, ignore_errors=True)
        if not self.probed:
            for url in self.urls:
                self.check_logprobs_mode(model, url)
            self.probed = True

    def check_logprobs_mode(self, model: Any, url: str) -> None:
        """Refuse a server whose log-probabilities at T = `PROBE_TEMPERATURE` are nearer
        log_softmax(logits) than log_softmax(logits / T), the trainer's (see above)."""
        import torch

        prompt = render_prompt(self.tokenizer, [{"role": "user", "content": "Hello! Can you help me?"}], [])
        out = self._post(url, "/completions", {
            "model": self.served, "prompt": prompt, "max_tokens": 8, "temperature": PROBE_TEMPERATURE,
            "top_p": 1.0, "n": 1, "seed": 0, "skip_special_tokens": False, "return_token_ids": True, "logprobs": 0})
        choice = out["choices"][0]
        tokens, served = list(choice["token_ids"]), [float(x) for x in choice["logprobs"]["token_logprobs"]]
        if not tokens:
            return
        device = next(model.parameters()).device
        with torch.no_grad():
            logits = model(torch.tensor([prompt + tokens], device=device)).logits[0, len(prompt) - 1:-1].float()
        index = torch.tensor(tokens, device=device)[:, None]
        processed = torch.log_softmax(logits / PROBE_TEMPERATURE, -1).gather(1, index)[:, 0].tolist()
        raw = torch.log_softmax(logits, -1).gather(1, index)[:, 0].tolist()
        to_processed = sum(abs(a - b) for a, b in zip(served, processed)) / len(tokens)
        to_raw = sum(abs(a - b) for a, b in zip(served, raw)) / len(tokens)
        if to_raw < to_processed:
            raise TraceGymError(
                f"vLLM server {url} reports log-probabilities before the temperature (at T = {PROBE_TEMPERATURE} "
                f"they are {to_raw:.4f} nats from log_softmax(logits) and {to_processed:.4f} from "
                "log_softmax(logits / T), the trainer's): start it with --logprobs-mode processed_logprobs")

    # -- generation ---------------------------------------------------------------------------

    def _post(self, url: str, path: str, body: dict[str, Any], missing_ok: bool = False) -> Any:
        return post_json(url + path, body, timeout=self.timeout, retries=self.retries, missing_ok=missing_ok)

    def complete(self, url: str, prompt: list[int], seed: int) -> tuple[list[int], list[float]]:
        """One turn from the server at `url`: the sampled token ids and their
        log-probabilities (TraceGymError before the first `sync`, or when the answer lacks
        them)."""
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

    def play(self, requests: Sequence[EpisodeRequest]) -> list[PlayedEpisode]:
        """Every request (seed, sample, hint, sampling_seed) played through the episode driver,
        `workers` at a time; the episodes in request order."""
        if self.served is None:
            raise TraceGymError("the vllm backend has no adapter loaded yet: call sync(model, iteration) first")
        threads = max(1, min(self.workers, len(requests)))
        with _Completions(self, threads) as policy:
            return play_in_order(requests, policy, env_id=self.env_id, env_kwargs=self.env_kwargs, in_flight=threads)


class _Completions:
    """The backend as a batched policy of the episode driver: each turn an episode asks for is
    one `/completions` request, posted in a pool of threads (the servers batch what arrives
    together); `collect` returns the turns whose answers are in. Episodes are given to the
    servers round-robin, in the order they start."""

    def __init__(self, backend: VLLMBackend, threads: int) -> None:
        self.backend = backend
        self.name = f"vllm:{backend.served}"
        self.pool = ThreadPoolExecutor(max_workers=threads)
        self.pending: dict[Future, tuple[Live, list[int], list[int]]] = {}
        self.url: dict[int, str] = {}
        self.started = 0

    def __enter__(self) -> _Completions:
        return self

    def __exit__(self, *exc: object) -> None:
        for future in self.pending:
            future.cancel()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def submit(self, live: Live) -> None:
        backend = self.backend
        if live.key not in self.url:
            self.url[live.key] = backend.urls[self.started % len(backend.urls)]
            self.started += 1
        prompt = render_prompt(backend.tokenizer, live.messages, live.tools)
        loss_prompt = prompt
        if live.episode.hint and live.system_prompt_unhinted is not None:
            loss_prompt = render_prompt(backend.tokenizer, unhinted(live.messages, live.system_prompt_unhinted),
                                        live.tools)
        # each turn its own seed, from the episode's and the turn's index: a rerun samples the same
        seed = (live.episode.stream() + 7919 * len(live.turns)) % 2**63
        future = self.pool.submit(backend.complete, self.url[live.key], prompt, seed)
        self.pending[future] = (live, prompt, loss_prompt)

    def collect(self) -> list[tuple[Live, Reply]]:
        if not self.pending:
            return []
        done, _ = wait(list(self.pending), return_when=FIRST_COMPLETED)
        return [self._reply(future) for future in done]

    def _reply(self, future: Future) -> tuple[Live, Reply]:
        live, prompt, loss_prompt = self.pending.pop(future)
        tokens, logprobs = future.result()  # a server's error stops the run
        stop = self.backend.stop
        body = tokens[:-1] if tokens and tokens[-1] == stop else tokens
        text = self.backend.tokenizer.decode(body, skip_special_tokens=False)
        return live, Reply(text, Turn(prompt, loss_prompt, tokens, logprobs))

    def release(self, live: Live) -> None:
        self.url.pop(live.key, None)
        for future, (waiting, _, _) in list(self.pending.items()):
            if waiting is live:
                future.cancel()
                del self.pending[future]
