"""Local multi-turn inference that does not re-read the conversation every turn.

An agent's prompt at turn t+1 is its prompt at turn t, its own completion and the env's
answer: re-reading all of it each turn makes an episode quadratic in its length. The engine
keeps, per conversation, a `Sequence`: the token ids whose keys and values it holds and the
cache itself. Given the next prompt, it compares token ids and prefills only from the first
token that differs (`extend`), so reuse is exact whatever the chat template does: a template
that renders earlier turns identically (this project's) reuses everything but the new
messages; one that does not (Qwen3's own drops earlier `<think>` blocks) reuses what is
still the same and re-prefills the rest.

`generate` decodes several sequences together, one forward per new token for the whole
batch: their caches are laid side by side, left-padded, with each row's own positions and
attention mask. It samples greedily or with temperature and top-p from seeded
`torch.Generator`s (one per row, so a row's draws do not depend on its batch mates) and
returns each row's token ids, text and, on request, log-probabilities. A `Sequence` can be
forked K ways after a shared prefix (`fork`): GRPO's K rollouts of one prompt prefill it once.

Caches are transformers `Cache` objects whose layers write into preallocated buffers (grown
by doubling) instead of concatenating at every token, which would copy the whole cache of
every layer per decoded token. Fresh memory is the other cost: the first write to a page
the process just got from the kernel costs a page fault, and on the virtual machines here
that runs at about 1 GB/s, against 40 GB/s for memory already in use. So buffers are made
with `empty` (only the positions written are ever touched, and only those are read), the
batch of `generate` lives in one arena per layer that the engine keeps from call to call,
and a batch whose rows finish is compacted in place instead of copied.
"""

from __future__ import annotations

from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicLayer


class KVLayer(DynamicLayer):
    """One layer's keys and values, `[batch, kv_heads, length, head_dim]`, kept in a buffer with
    spare room; `keys`/`values` are views of its first `length` positions."""

    def __init__(self) -> None:
        super().__init__()
        self.length = 0
        self._k: torch.Tensor | None = None
        self._v: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any):
        n = key_states.shape[-2]
        if self._k is None:
            self.lazy_initialization(key_states, value_states)
            self._reserve(key_states, max(n, 256))
        elif self.length + n > self._k.shape[-2]:
            self._reserve(key_states, max(2 * self._k.shape[-2], self.length + n))
        self._k[..., self.length: self.length + n, :] = key_states
        self._v[..., self.length: self.length + n, :] = value_states
        self.length += n
        self._views()
        return self.keys, self.values

    def _reserve(self, like: torch.Tensor, capacity: int) -> None:
        shape = (*like.shape[:-2], capacity, like.shape[-1])
        k, v = like.new_empty(shape), like.new_empty(shape)  # positions past `length` are never read
        if self._k is not None and self.length:
            k[..., : self.length, :] = self._k[..., : self.length, :]
            v[..., : self.length, :] = self._v[..., : self.length, :]
        self._k, self._v = k, v

    def _views(self) -> None:
        self.keys = self._k[..., : self.length, :]
        self.values = self._v[..., : self.length, :]

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last `|tokens_to_remove|` positions (transformers passes a negative count)."""
        self.truncate(self.length - abs(tokens_to_remove))

    def truncate(self, length: int) -> None:
        if self._k is not None:
            self.length = max(0, min(length, self.length))
            self._views()

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self._k is not None:
            self._k, self._v = self._k[indices], self._v[indices]
            self._views()

    def keep_rows(self, rows: list[int]) -> None:
        """Keep the batch rows `rows` (ascending), moved to the front in place: no new memory."""
        for j, i in enumerate(rows):
            if i != j:
                self._k[j].copy_(self._k[i])
                self._v[j].copy_(self._v[i])
        self._k, self._v = self._k[: len(rows)], self._v[: len(rows)]
        self._views()

    def clone(self, length: int | None = None) -> KVLayer:
        """A copy of the first `length` positions (all by default)."""
        other = KVLayer()
        if self._k is not None:
            length = self.length if length is None else min(length, self.length)
            other.lazy_initialization(self._k, self._v)
            other._k = self._k[..., :length, :].clone()
            other._v = self._v[..., :length, :].clone()
            other.length = length
            other._views()
        return other


def _cache(layers: list[KVLayer]) -> Cache:
    return Cache(layers=layers)


@dataclass
class Sequence:
    """One conversation's cached state."""

    ids: list[int] = field(default_factory=list)
    """The token ids whose keys and values `layers` hold, in order."""
    layers: list[KVLayer] = field(default_factory=list)
    next_logits: torch.Tensor | None = None
    """Logits for the token after `ids` (set by a prefill that ended at `ids[-1]`)."""

    def truncate(self, length: int) -> None:
        if length < len(self.ids):
            self.ids = self.ids[:length]
            for layer in self.layers:
                layer.truncate(length)
            self.next_logits = None

    def fork(self, k: int, length: int | None = None) -> list[Sequence]:
        """`k` independent copies of the first `length` tokens (all by default). The cache is
        copied, not shared: each copy then grows on its own."""
        length = len(self.ids) if length is None else min(length, len(self.ids))
        logits = self.next_logits if length == len(self.ids) and self.next_logits is not None else None
        return [Sequence(self.ids[:length], [layer.clone(length) for layer in self.layers],
                         None if logits is None else logits.clone()) for _ in range(k)]


@dataclass
class Generation:
    """One row's completion."""

    token_ids: list[int]
    """The sampled tokens, the stop token included when one ended the row."""
    text: str
    """The completion's text, without the stop token."""
    stopped: bool
    """True when a stop token ended it, False when `max_new_tokens` did."""
    logprobs: list[float] | None = None
    """Per sampled token: its log-probability under the model's distribution at the sampling
    temperature (`log_softmax(logits / temperature)`, raw logits when greedy), before top-p."""


@dataclass
class EngineStats:
    prefilled: int = 0
    """Prompt tokens run through the model (what reuse saves)."""
    decoded: int = 0
    """Sampled tokens fed back through the model."""
    reused: int = 0
    """Prompt tokens whose keys and values were already cached."""


def common_prefix(a: Seq[int], b: Seq[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    x = torch.as_tensor(a[:n])
    y = torch.as_tensor(b[:n])
    differ = (x != y).nonzero()
    return int(differ[0, 0]) if len(differ) else n


def sample(logits: torch.Tensor, temperature: float, top_p: float,
           generators: Seq[torch.Generator | None]) -> torch.Tensor:
    """Next tokens `(B,)` from logits `(B, V)`: argmax at temperature 0, else softmax(logits / T)
    restricted to the smallest set of tokens whose mass reaches top_p; row i draws from
    `generators[i]`."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)            # (B, V)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs > top_p          # mass before the token already reaches top_p
        sorted_probs = sorted_probs.masked_fill(outside, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.cat([torch.multinomial(probs[i], 1, generator=g) for i, g in enumerate(generators)])


class Engine:
    """Prefill, fork and batched decoding over per-conversation caches.

    `reuse=False` re-prefills every prompt from its first token (the baseline that reuse is
    measured against; outputs are the same)."""

    def __init__(self, model: Any, tokenizer: Any, stop_ids: Seq[int] | None = None, reuse: bool = True) -> None:
        self.model = model
        self.tokenizer = tokenizer
        if stop_ids is None:
            stop_ids = [tokenizer.convert_tokens_to_ids(tokenizer.eos_token)]
        self.stop_ids = set(stop_ids)
        self.reuse = reuse
        self.stats = EngineStats()
        config = model.config
        self.n_layers = config.num_hidden_layers
        self.device = next(model.parameters()).device
        self._arena: list[tuple[torch.Tensor, torch.Tensor]] = []
        """Per layer, the keys and values `generate` lays its batch out in, kept between calls."""

    def _batch_buffers(self, like: torch.Tensor, rows: int, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, `(rows, heads, length, head_dim)` views of the arena, grown when too small
        (with room for a quarter more, so that a growing conversation does not regrow it every turn)."""
        shape = (rows, like.shape[1], length, like.shape[-1])
        have = self._arena[0][0].shape if self._arena else None
        if have is None or have[0] < rows or have[2] < length or have[1:2] + have[3:] != shape[1:2] + shape[3:] \
                or self._arena[0][0].dtype != like.dtype:
            big = (max(rows, have[0] if have else 0), shape[1], max(length * 5 // 4, length + 256, have[2] if have else 0), shape[3])
            self._arena = [(like.new_empty(big), like.new_empty(big)) for _ in range(self.n_layers)]
        return [(k[:rows, :, :length], v[:rows, :, :length]) for k, v in self._arena]

    def new_sequence(self) -> Sequence:
        return Sequence(layers=[KVLayer() for _ in range(self.n_layers)])

    @torch.inference_mode()
    def extend(self, seq: Sequence, prompt: Seq[int]) -> int:
        """Make `seq` hold exactly `prompt`, with the logits of the token after it: keep the
        cached prefix it shares with `prompt` and prefill the rest. Returns the number of
        tokens prefilled."""
        prompt = list(prompt)
        if not prompt:
            raise ValueError("extend: the prompt is empty")
        keep = common_prefix(seq.ids, prompt) if self.reuse else 0
        if keep == len(prompt) == len(seq.ids) and seq.next_logits is not None:
            self.stats.reused += keep
            return 0
        keep = min(keep, len(prompt) - 1)  # at least one token goes through, for its logits
        seq.truncate(keep)
        new = prompt[keep:]
        out = self.model(input_ids=torch.tensor([new], device=self.device),
                         position_ids=torch.arange(keep, len(prompt), device=self.device)[None],
                         cache=_cache(seq.layers), use_cache=True, logits_to_keep=1)
        seq.ids = prompt
        seq.next_logits = out.logits[0, -1].float().cpu()                    # (V,), sampled on the CPU
        self.stats.prefilled += len(new)
        self.stats.reused += keep
        return len(new)

    @torch.inference_mode()
    def generate(self, seqs: list[Sequence], prompts: list[Seq[int]] | None = None, *, max_new_tokens: int,
                 temperature: float = 0.0, top_p: float = 1.0,
                 generators: torch.Generator | Seq[torch.Generator | None] | None = None,
                 logprobs: bool = False) -> list[Generation]:
        """Complete every sequence (after extending it to its prompt, when prompts are given),
        decoding the batch together. Each sequence then holds its prompt and every sampled
        token but the last (which was never fed back)."""
        if prompts is not None:
            if len(prompts) != len(seqs):
                raise ValueError(f"generate: {len(seqs)} sequences but {len(prompts)} prompts")
            for seq, prompt in zip(seqs, prompts):
                self.extend(seq, prompt)
        missing = [i for i, s in enumerate(seqs) if s.next_logits is None]
        if missing:
            raise ValueError(f"generate: sequence(s) {missing} have no prompt prefilled (extend them first)")
        if generators is None or isinstance(generators, torch.Generator):
            generators = [generators] * len(seqs)
        B = len(seqs)
        lengths = [len(s.ids) for s in seqs]
        width = max(lengths)
        # The batch cache: every row's cache right-aligned at `width`, room for the new tokens.
        # The padding on the left is masked, and zeroed so that it holds finite values (a
        # masked position's weight is exactly 0, and 0 times a finite value is 0).
        batch_layers = []
        buffers = self._batch_buffers(seqs[0].layers[0].keys, B, width + max_new_tokens)
        for layer_index in range(self.n_layers):
            first = seqs[0].layers[layer_index].keys                        # (1, H, L0, D)
            layer = KVLayer()
            layer.lazy_initialization(first, first)
            layer._k, layer._v = buffers[layer_index]                        # (B, H, W + N, D)
            for row, seq in enumerate(seqs):
                source = seq.layers[layer_index]
                pad = width - lengths[row]
                layer._k[row, :, :pad] = 0
                layer._v[row, :, :pad] = 0
                layer._k[row, :, pad: width] = source.keys[0]
                layer._v[row, :, pad: width] = source.values[0]
            layer.length = width
            layer._views()
            batch_layers.append(layer)
        cache = _cache(batch_layers)
        mask = torch.zeros((B, width + max_new_tokens), dtype=torch.long, device=self.device)   # (B, W + N)
        for row, n in enumerate(lengths):
            mask[row, width - n: width] = 1
        tokens: list[list[int]] = [[] for _ in range(B)]
        scores: list[list[float]] = [[] for _ in range(B)]
        stopped = [False] * B
        active = list(range(B))                                             # batch row -> sequence index
        logits = torch.stack([s.next_logits for s in seqs])                  # (B, V)
        for step in range(max_new_tokens):
            chosen = sample(logits, temperature, top_p, [generators[i] for i in active])   # (A,)
            if logprobs:
                logp = torch.log_softmax(logits.float() / (temperature or 1.0), -1)
                picked = logp.gather(-1, chosen[:, None])[:, 0].tolist()
            keep_rows = []
            for row, index in enumerate(active):
                token = int(chosen[row])
                tokens[index].append(token)
                if logprobs:
                    scores[index].append(picked[row])
                if token in self.stop_ids:
                    stopped[index] = True
                elif step + 1 < max_new_tokens:
                    keep_rows.append(row)
            for row, index in enumerate(active):
                if row not in keep_rows:  # its last token is never fed: `step` tokens were
                    self._finish(seqs[index], tokens[index][:step], batch_layers, row, width)
            if not keep_rows:
                break
            if len(keep_rows) < len(active):
                select = torch.tensor(keep_rows)
                for layer in batch_layers:
                    layer.keep_rows(keep_rows)
                mask = mask[select.to(self.device)]
                chosen = chosen[select]
                active = [active[row] for row in keep_rows]
            mask[:, width + step] = 1
            positions = torch.tensor([[lengths[i] + step] for i in active], device=self.device)  # (A, 1)
            out = self.model(input_ids=chosen[:, None].to(self.device), position_ids=positions,
                             attention_mask=mask[:, : width + step + 1], cache=cache, use_cache=True)
            logits = out.logits[:, -1].float().cpu()                         # (A, V)
            self.stats.decoded += len(active)
        results = []
        for index, seq in enumerate(seqs):
            ids = tokens[index]
            body = ids[:-1] if stopped[index] else ids
            results.append(Generation(ids, self.tokenizer.decode(body, skip_special_tokens=False), stopped[index],
                                      scores[index] if logprobs else None))
        return results

    @staticmethod
    def _finish(seq: Sequence, fed: list[int], batch_layers: list[KVLayer], row: int, width: int) -> None:
        """Append a batch row's decoded positions (the tokens `fed` back) to its sequence."""
        if fed:
            for source, target in zip(batch_layers, seq.layers):
                target.update(source._k[row: row + 1, :, width: width + len(fed)],
                              source._v[row: row + 1, :, width: width + len(fed)])
        seq.ids = seq.ids + fed
        seq.next_logits = None
