"""Local multi-turn inference with continuous batching: every conversation in flight shares one
decode loop, and keeps its keys and values from one turn to the next.

**Rows.** Each conversation holds a row of one arena per layer, `[rows, kv_heads, columns,
head_dim]`. All rows that generate end at the same column `end`, so that one forward a step
decodes them together: each writes its new token's keys and values at column `end`, and a
row shorter than the longest is masked on its left. A row whose turn ended stays in the
arena while its env steps; its next prompt is compared token by token with what the row
holds, only the tokens from the first difference on are prefilled (`reuse`), and the row is
moved to end at `end` again. A new conversation copies the longest prefix it shares with a
row in flight, or with a kept opening (a GRPO group's shared prompt, an env's system prompt),
and prefills the rest. Rows that are not generating are swapped behind the ones that are, so
a step computes only rows that generate.

**Sampling** is one call for the batch: argmax at temperature 0; else the inverse of each
row's cumulative distribution (after temperature and top-p) at a uniform drawn from that
conversation's own counter-based stream (its seed, and how many tokens it has drawn), so a
conversation's tokens do not depend on which others share its batch.

**Memory.** Fresh pages cost a page fault on first write (about 1 GB/s on the virtual machines
here, against 40 GB/s for memory in use), so the arena is allocated once with spare room,
reused from call to call and grown by half when too small; rows are moved within it.
Columns a row does not hold are zeroed before a step reads them (masked weights are exactly
0, and 0 times a finite value is 0).
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch
from transformers.cache_utils import Cache, DynamicLayer

MASK64 = (1 << 64) - 1


# -- per-conversation random streams ---------------------------------------------------------

def _splitmix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over uint64 (wrapping arithmetic)."""
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & np.uint64(MASK64)
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & np.uint64(MASK64)
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & np.uint64(MASK64)
    return x ^ (x >> np.uint64(31))


def stream_uniforms(seeds: Seq[int], counters: Seq[int]) -> np.ndarray:
    """One uniform in (0, 1) per (stream seed, draw index): a counter-based generator, so a
    draw depends only on its stream and its index."""
    with np.errstate(over="ignore"):
        s = np.asarray([x & MASK64 for x in seeds], dtype=np.uint64)
        c = np.asarray(counters, dtype=np.uint64)
        bits = _splitmix(_splitmix(s) ^ (c * np.uint64(0xD1B54A32D192ED03) & np.uint64(MASK64)))
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def stream_seed(*parts: int) -> int:
    """A 64-bit stream seed from integers (a policy seed, an episode's sampling seed)."""
    value = np.uint64(0x243F6A8885A308D3)
    with np.errstate(over="ignore"):
        for part in parts:
            value = _splitmix(np.asarray([value ^ np.uint64(part & MASK64)], dtype=np.uint64))[0]
    return int(value)


def sample(logits: torch.Tensor, temperature: Seq[float], top_p: Seq[float], uniforms: np.ndarray) -> torch.Tensor:
    """Next tokens `(B,)` from logits `(B, V)`: argmax where the temperature is 0, else the
    token where softmax(logits / T), cut to the smallest set of tokens whose mass reaches
    top_p, first reaches `uniforms[i]` of its mass."""
    greedy = logits.argmax(-1)
    hot = [i for i, t in enumerate(temperature) if t > 0]
    if not hot:
        return greedy
    rows = torch.tensor(hot)
    temps = torch.tensor([temperature[i] for i in hot], dtype=torch.float32)[:, None]
    probs = torch.softmax(logits[rows].float() / temps, dim=-1)                        # (H, V)
    cut = torch.tensor([top_p[i] for i in hot], dtype=torch.float32)[:, None]
    if bool((cut < 1.0).any()):
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        outside = (sorted_probs.cumsum(-1) - sorted_probs > cut) & (cut < 1.0)   # mass before it already reaches top_p
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(outside, 0.0))
    cdf = probs.double().cumsum(-1)                                                     # (H, V)
    u = torch.from_numpy(uniforms[hot])[:, None] * cdf[:, -1:]
    drawn = torch.searchsorted(cdf, u).clamp_(max=logits.shape[-1] - 1)[:, 0]
    out = greedy.clone()
    out[rows] = drawn
    return out


# -- caches -------------------------------------------------------------------------------

class ViewLayer(DynamicLayer):
    """One layer's keys and values in a fixed buffer (a view of an arena row, or a
    conversation's own): `update` writes after the first `length` positions."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor, length: int) -> None:
        super().__init__()
        self.lazy_initialization(k, v)
        self._k, self._v, self.length = k, v, length
        self.keys, self.values = k[..., :length, :], v[..., :length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        """Write the new keys and values after the first `length` positions and return the
        layer's keys and values so far (RuntimeError when the buffer is full)."""
        n = key_states.shape[-2]
        if self.length + n > self._k.shape[-2]:
            raise RuntimeError(f"a cache view of {self._k.shape[-2]} positions cannot take {self.length + n}")
        self._k[..., self.length: self.length + n, :] = key_states
        self._v[..., self.length: self.length + n, :] = value_states
        self.length += n
        self.keys, self.values = self._k[..., : self.length, :], self._v[..., : self.length, :]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        """The number of positions held."""
        return self.length


@dataclass
class Generation:
    """One turn's completion."""

    token_ids: list[int]
    """The sampled tokens, the stop token included when one ended the turn."""
    text: str
    """The completion's text, without the stop token."""
    stopped: bool
    """True when a stop token ended it, False when `max_new_tokens` did."""
    logprobs: list[float] | None = None
    """Per sampled token: its log-probability under the model's distribution at the sampling
    temperature (`log_softmax(logits / temperature)`, raw logits when greedy), before top-p."""


class TurnEngine(Protocol):
    """What a local policy asks of its generation engine (`Engine`, or another backend's
    stand-in such as TRL's vLLM: `trace_gym.interop.VLLMGenerationEngine`)."""

    def submit(self, key: Hashable, prompt: Seq[int], *, max_new_tokens: int, temperature: float = 0.0,
               top_p: float = 1.0, seed: int = 0, logprobs: bool = False) -> None:
        """Ask for `key`'s next turn, the completion of `prompt`."""

    def step(self) -> list[tuple[Hashable, Generation]]:
        """Work on; the turns that ended."""
        ...

    def close(self, key: Hashable) -> None:
        """Drop a conversation."""

    def forget(self) -> None:
        """Drop what was kept of earlier turns (the weights changed)."""


@dataclass
class EngineStats:
    """Token counts of an engine's work, for benchmarks and logs."""

    prefilled: int = 0
    """Prompt tokens run through the model (what reuse saves)."""
    decoded: int = 0
    """Sampled tokens fed back through the model."""
    reused: int = 0
    """Prompt tokens whose keys and values were already held (a row's own, or copied)."""
    steps: int = 0
    """Decode forwards."""


@dataclass
class _Row:
    key: Hashable
    ids: list[int] = field(default_factory=list)
    """The tokens whose keys and values the row holds, ending at column `end`."""
    end: int = 0
    prompt: list[int] | None = None
    """The prompt to reach before generating (set by `submit`, cleared by the prefill)."""
    logits: torch.Tensor | None = None
    """Logits of the token after `ids`, while the row generates."""
    generating: bool = False
    tokens: list[int] = field(default_factory=list)
    scores: list[float] = field(default_factory=list)
    budget: int = 0
    temperature: float = 0.0
    top_p: float = 1.0
    logprobs: bool = False
    seed: int = 0
    draws: int = 0
    next_token: int = 0
    """The token sampled last, fed at the next decode step."""

    @property
    def start(self) -> int:
        return self.end - len(self.ids)

    def next_logits(self) -> torch.Tensor:
        """`logits`, which a generating row has from its prefill on."""
        if self.logits is None:
            raise RuntimeError(f"conversation {self.key!r} generates without the logits of its next token")
        return self.logits


@dataclass
class _Opening:
    """A kept prompt's keys and values (per layer, `[1, heads, length, dim]`)."""

    ids: list[int]
    kv: list[tuple[torch.Tensor, torch.Tensor]]


def common_prefix(a: Seq[int], b: Seq[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x = torch.as_tensor(a[:n])
    y = torch.as_tensor(b[:n])
    differ = (x != y).nonzero()
    return int(differ[0, 0]) if len(differ) else n


class Engine:
    """Continuous batching over per-conversation rows.

    `submit(key, prompt, ...)` asks for a conversation's next turn; `step()` prefills what
    was submitted, runs one decode forward for every row that generates, and returns the
    turns that ended; `close(key)` drops a conversation. `generate(prompts)` does all three
    for a batch. `reuse=False` re-prefills every prompt from its first token (the baseline
    reuse is measured against; outputs are the same)."""

    def __init__(self, model: Any, tokenizer: Any, stop_ids: Seq[int] | None = None, reuse: bool = True,
                 openings: int = 4) -> None:
        self.model = model
        self.tokenizer = tokenizer
        if stop_ids is None:
            stop_ids = [tokenizer.convert_tokens_to_ids(tokenizer.eos_token)]
        self.stop_ids = set(stop_ids)
        self.reuse = reuse
        self.stats = EngineStats()
        self.n_layers = model.config.num_hidden_layers
        self.device = next(model.parameters()).device
        self.rows: list[_Row] = []
        self.index: dict[Hashable, int] = {}
        self.end = 0
        self.k: list[torch.Tensor] = []
        self.v: list[torch.Tensor] = []
        self.openings: list[_Opening] = []
        self.zeroed: dict[int, tuple[int, int]] = {}
        """Per arena row, columns known to hold finite values (written once; writes only add
        finite values, and swaps move only what rows hold)."""
        self.keep_openings = openings if reuse else 0

    # -- the arena --------------------------------------------------------------------------

    @property
    def capacity(self) -> tuple[int, int]:
        """(rows, columns) the arena has room for."""
        return (self.k[0].shape[0], self.k[0].shape[2]) if self.k else (0, 0)

    def _layout(self, like: torch.Tensor, rows: int, end: int, columns: int) -> None:
        """Make room for `rows` rows and `columns` columns, rows ending at column `end`: grow
        the arena (by half at least) when too small, then move every row into place."""
        have_rows, have_cols = self.capacity
        if rows > have_rows or columns > have_cols:
            shape = (have_rows if rows <= have_rows else max(rows, have_rows + have_rows // 2), like.shape[1],
                     have_cols if columns <= have_cols else max(columns, have_cols + have_cols // 2), like.shape[-1])
            new_k = [like.new_empty(shape) for _ in range(self.n_layers)]
            new_v = [like.new_empty(shape) for _ in range(self.n_layers)]
            for i, row in enumerate(self.rows):
                n = len(row.ids)
                for layer in range(self.n_layers):
                    new_k[layer][i, :, end - n: end] = self.k[layer][i, :, row.start: row.end]
                    new_v[layer][i, :, end - n: end] = self.v[layer][i, :, row.start: row.end]
                row.end = end
            self.k, self.v = new_k, new_v
            self.zeroed = {}
        else:
            for i, row in enumerate(self.rows):
                self._move(i, end)
        self.end = end

    def _move(self, i: int, end: int, keep: int | None = None) -> None:
        """Move row i's first `keep` tokens (all by default) so that they start where a row of
        its length ending at `end` starts (chunks small enough never to overlap)."""
        row = self.rows[i]
        n = len(row.ids) if keep is None else keep
        src, dst = row.start, end - len(row.ids)
        if keep is not None:
            dst = end - keep
        if src != dst and n:
            step = max(1, min(abs(dst - src), 256))
            chunks = range(0, n, step) if dst < src else reversed(range(0, n, step))
            for a in chunks:
                b = min(a + step, n)
                for t in (self.k, self.v):
                    for layer in t:
                        layer[i, :, dst + a: dst + b] = layer[i, :, src + a: src + b]
        row.ids = row.ids[:n]
        row.end = dst + n

    def _swap(self, i: int, j: int) -> None:
        """Exchange rows i and j (what each holds, and their places)."""
        if i == j:
            return
        a, b = self.rows[i], self.rows[j]
        for t in (self.k, self.v):  # only what each holds: columns outside stay as they were
            for layer in t:
                held = layer[i, :, a.start: a.end].clone()
                layer[i, :, b.start: b.end] = layer[j, :, b.start: b.end]
                layer[j, :, a.start: a.end] = held
        self.rows[i], self.rows[j] = b, a
        self.index[a.key], self.index[b.key] = j, i

    # -- conversations ----------------------------------------------------------------------

    def submit(self, key: Hashable, prompt: Seq[int], *, max_new_tokens: int, temperature: float = 0.0,
               top_p: float = 1.0, seed: int = 0, logprobs: bool = False) -> None:
        """Ask for `key`'s next turn: the completion of `prompt` (which must start with the
        conversation so far to reuse it). `seed` names the conversation's random stream; its
        draws continue from one turn to the next."""
        prompt = list(prompt)
        if not prompt:
            raise ValueError("submit: the prompt is empty")
        if max_new_tokens < 1:
            raise ValueError(f"submit: max_new_tokens={max_new_tokens} must be >= 1")
        i = self.index.get(key)
        if i is None:
            self.index[key] = i = len(self.rows)
            self.rows.append(_Row(key, seed=seed, end=self.end))
        row = self.rows[i]
        if row.generating or row.prompt is not None:
            raise ValueError(f"submit: conversation {key!r} already has a turn in progress")
        row.prompt, row.budget = prompt, max_new_tokens
        row.temperature, row.top_p, row.logprobs = temperature, top_p, logprobs
        row.tokens, row.scores = [], []

    def forget(self) -> None:
        """Drop the kept openings: call it when the model's weights change (a training step),
        since keys and values computed under the old weights are no longer the model's."""
        self.openings.clear()

    @torch.inference_mode()
    def close(self, key: Hashable) -> None:
        """Drop a conversation (its row goes to the end and is freed)."""
        i = self.index.pop(key, None)
        if i is None:
            return
        last = len(self.rows) - 1
        if i != last:
            self._swap(i, last)
            self.index.pop(key, None)
        self.rows.pop()
        if not self.rows:
            self.end = 0

    @torch.inference_mode()
    def step(self) -> list[tuple[Hashable, Generation]]:
        """Prefill what was submitted, decode one token for every generating row, and return
        the turns that ended (their rows stay, for the next turn)."""
        self._prefill_submitted()
        active = [i for i, r in enumerate(self.rows) if r.generating]
        if not active:
            return []
        finished = self._sample(active)
        # rows that go on are fed their token; rows that ended keep it unfed
        going = [i for i in active if i not in finished]
        out = [(self.rows[i].key, self._result(self.rows[i])) for i in finished]
        for i in finished:
            self.rows[i].generating = False
            self.rows[i].logits = None
        if going:
            self._decode(going)
        return out

    def generate(self, prompts: Seq[Seq[int]], *, max_new_tokens: int, temperature: float = 0.0,
                 top_p: float = 1.0, seeds: Seq[int] | None = None, logprobs: bool = False) -> list[Generation]:
        """Complete every prompt as one batch of new conversations (closed afterwards)."""
        keys = [("generate", n) for n in range(len(prompts))]
        for n, (key, prompt) in enumerate(zip(keys, prompts)):
            self.submit(key, prompt, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                        seed=seeds[n] if seeds is not None else n, logprobs=logprobs)
        done: dict[Hashable, Generation] = {}
        try:
            while len(done) < len(keys):
                done.update(self.step())
        finally:
            for key in keys:
                self.close(key)
        return [done[key] for key in keys]

    # -- prefill ----------------------------------------------------------------------------

    def _donor(self, i: int, prompt: list[int]) -> tuple[int, Any]:
        """The longest prefix of `prompt` held elsewhere: (length, row index or opening)."""
        best: tuple[int, Any] = (0, None)
        if not self.reuse:
            return best
        for j, other in enumerate(self.rows):
            if j != i:
                n = common_prefix(other.ids, prompt)
                if n > best[0]:
                    best = (n, j)
        for opening in self.openings:
            n = common_prefix(opening.ids, prompt)
            if n > best[0]:
                best = (n, opening)
        return best

    def _prefill_submitted(self) -> None:
        waiting = {i: r.prompt for i, r in enumerate(self.rows) if r.prompt is not None}
        if not waiting:
            return
        if not self.k:
            first = next(iter(waiting))
            self._first_arena(waiting[first], self.rows[first])
        # every row generating after this step ends at `end`: room on the left for the
        # longest prompt, on the right for the longest turn
        longest = max(len(prompt) for prompt in waiting.values())
        room = max(r.budget for r in self.rows if r.prompt is not None or r.generating) + 1
        end = self.end if longest <= self.end else longest + 64
        if end != self.end or end + room > self.capacity[1] or len(self.rows) > self.capacity[0]:
            self._layout(self.k[0], len(self.rows), end, end + room + 64)
        for i, prompt in waiting.items():
            self._prefill(i, prompt)

    def _prefill(self, i: int, prompt: list[int]) -> None:
        """Prefill row i with `prompt`, the one submitted for it, reusing what it or a donor holds."""
        row = self.rows[i]
        keep = common_prefix(row.ids, prompt) if self.reuse else 0
        copied = 0
        if keep < len(prompt) - 1 and keep < 16:  # a new conversation (or one that changed early)
            copied, donor = self._donor(i, prompt)
            copied = min(copied, len(prompt) - 1)
            if copied <= keep:
                copied = 0
        keep = min(keep, len(prompt) - 1)  # at least one token goes through, for its logits
        end = self.end
        start = end - len(prompt)
        if copied:
            self._copy_in(i, donor, copied, start)
            have = copied
        else:
            self._move(i, end - len(prompt) + keep, keep=keep)
            have = keep
        row.ids = prompt[:have]
        row.end = start + have
        cache = Cache(layers=[ViewLayer(self.k[l][i: i + 1, :, start: end], self.v[l][i: i + 1, :, start: end], have)
                              for l in range(self.n_layers)])
        new = prompt[have:]
        out = self.model(input_ids=torch.tensor([new], device=self.device),
                         position_ids=torch.arange(have, len(prompt), device=self.device)[None],
                         cache=cache, use_cache=True, logits_to_keep=1)
        row.ids, row.end = prompt, end
        row.logits = out.logits[0, -1].float().cpu()
        row.prompt, row.generating = None, True
        self.stats.prefilled += len(new)
        self.stats.reused += have
        if have == 0 and self.keep_openings:
            self._keep_opening(i, start, prompt)

    def _first_arena(self, prompt: list[int], row: _Row) -> None:
        """Allocate the arena from the model's first keys (their dtype and head shape)."""
        probe = [DynamicLayer() for _ in range(self.n_layers)]
        self.model(input_ids=torch.tensor([prompt[:1]], device=self.device),
                   position_ids=torch.zeros((1, 1), dtype=torch.long, device=self.device),
                   # a new list: transformers annotates `layers` as a list of its layer union
                   cache=Cache(layers=list(probe)), use_cache=True, logits_to_keep=1)
        like = probe[0].keys
        if like is None:
            raise RuntimeError(f"{type(self.model).__name__}'s first forward left no keys in the cache")
        rows = max(8, len(self.rows))
        columns = max(1024, len(prompt) + 64 + row.budget + 64)
        shape = (rows, like.shape[1], columns, like.shape[-1])
        self.k = [like.new_empty(shape) for _ in range(self.n_layers)]
        self.v = [like.new_empty(shape) for _ in range(self.n_layers)]
        self.end = len(prompt) + 64
        for r in self.rows:
            r.end = self.end

    def _copy_in(self, i: int, donor: Any, n: int, start: int) -> None:
        for layer in range(self.n_layers):
            if isinstance(donor, _Opening):
                k, v = donor.kv[layer]
                self.k[layer][i, :, start: start + n] = k[0, :, :n]
                self.v[layer][i, :, start: start + n] = v[0, :, :n]
            else:
                d = self.rows[donor]
                self.k[layer][i, :, start: start + n] = self.k[layer][donor, :, d.start: d.start + n]
                self.v[layer][i, :, start: start + n] = self.v[layer][donor, :, d.start: d.start + n]

    def _keep_opening(self, i: int, start: int, prompt: list[int]) -> None:
        """Keep a freshly prefilled prompt's keys and values, for the conversations that open
        the same way later (the oldest kept one is dropped)."""
        n = len(prompt)
        kv = [(self.k[l][i: i + 1, :, start: start + n].clone(), self.v[l][i: i + 1, :, start: start + n].clone())
              for l in range(self.n_layers)]
        self.openings.insert(0, _Opening(list(prompt), kv))
        del self.openings[self.keep_openings:]

    # -- decode -----------------------------------------------------------------------------

    def _sample(self, active: list[int]) -> list[int]:
        """Draw every active row's next token; return the rows whose turn ended."""
        rows = [self.rows[i] for i in active]
        logits = torch.stack([r.next_logits() for r in rows])                            # (A, V)
        u = stream_uniforms([r.seed for r in rows], [r.draws for r in rows])
        chosen = sample(logits, [r.temperature for r in rows], [r.top_p for r in rows], u).tolist()
        want = [n for n, r in enumerate(rows) if r.logprobs]
        picked: dict[int, float] = {}
        if want:
            sub = logits[want].float()
            temps = torch.tensor([rows[n].temperature or 1.0 for n in want])[:, None]
            logp = torch.log_softmax(sub / temps, -1)
            values = logp.gather(-1, torch.tensor([chosen[n] for n in want])[:, None])[:, 0].tolist()
            picked = dict(zip(want, values))
        finished = []
        for n, (i, r) in enumerate(zip(active, rows)):
            token = chosen[n]
            r.tokens.append(token)
            r.draws += 1
            if r.logprobs:
                r.scores.append(picked[n])
            if token in self.stop_ids or len(r.tokens) >= r.budget:
                finished.append(i)
            else:
                r.next_token = token
        return finished

    def _decode(self, going: list[int]) -> None:
        """Feed every going row its new token: one forward over rows 0..A-1 after swapping
        the going rows to the front; each writes at column `end`."""
        for slot, i in enumerate(sorted(going)):
            if i != slot:
                self._swap(slot, i)
        A = len(going)
        rows = self.rows[:A]
        if self.end + 1 > self.capacity[1]:  # move every row left when there is room there, else grow
            end = max(len(r.ids) for r in self.rows) + 64
            columns = self.capacity[1] if end + 256 <= self.capacity[1] else end + max(256, end // 2)
            self._layout(self.k[0], len(self.rows), end, columns)
        lo = min(r.start for r in rows)
        end = self.end
        starts = torch.tensor([r.start - lo for r in rows])[:, None]
        mask = (torch.arange(end + 1 - lo)[None, :] >= starts).long()                        # (A, W + 1)
        for n, r in enumerate(rows):  # columns a row does not hold are masked; make them finite
            z_lo, z_hi = self.zeroed.get(n, (0, 0))
            if r.start > lo and not (z_lo <= lo and z_hi >= r.start):
                for t in (self.k, self.v):
                    for layer in t:
                        layer[n, :, lo: r.start] = 0
                self.zeroed[n] = (lo, r.start)
        cache = Cache(layers=[ViewLayer(self.k[l][:A, :, lo:], self.v[l][:A, :, lo:], end - lo)
                              for l in range(self.n_layers)])
        tokens = torch.tensor([[r.next_token] for r in rows], device=self.device)               # (A, 1)
        positions = torch.tensor([[len(r.ids)] for r in rows], device=self.device)             # (A, 1)
        out = self.model(input_ids=tokens, position_ids=positions, attention_mask=mask.to(self.device),
                         cache=cache, use_cache=True)
        logits = out.logits[:, -1].float().cpu()                                               # (A, V)
        self.end = end + 1
        for n, r in enumerate(rows):
            r.ids.append(r.next_token)
            r.end = end + 1
            r.logits = logits[n]
        self.stats.decoded += A
        self.stats.steps += 1

    def _result(self, row: _Row) -> Generation:
        ids = row.tokens
        stopped = bool(ids) and ids[-1] in self.stop_ids
        body = ids[:-1] if stopped else ids
        return Generation(list(ids), self.tokenizer.decode(body, skip_special_tokens=False), stopped,
                          list(row.scores) if row.logprobs else None)
