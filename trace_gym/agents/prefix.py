"""Log-probabilities and their gradient over many sequences that share prefixes, each shared
prefix run through the model once.

A GRPO batch is many (prompt, completion) samples that share most of their tokens: the K
rollouts of a group start from the same prompt, and in a multi-turn episode each turn's
prompt is the previous turn's prompt, its completion and the env's answer. Running every
sample from its first token repeats that shared work once per sample.

Here the samples' token sequences go into a prefix tree (a radix tree: each node holds the
run of tokens that every sequence through it shares). Each node's tokens are run once, on
top of its parent's keys and values. The loss is a sum of per-token terms, so its gradient
is the sum of the nodes' gradients, and it is exact, not an approximation: a node's keys
and values enter its children as leaf tensors that require grad; after its children have
run (and back-propagated into those leaves), the node back-propagates its own terms together
with the gradient its children left on its keys and values, which flows on into its
parent's leaves. Only the graphs on the path from the root to the node in hand are alive at
once, never the whole batch's.

`per_sample` is the plain computation (every sample from its first token), the reference a
test compares the gradients with, and what a trainer without the tree pays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch
from transformers.cache_utils import Cache, DynamicLayer

TokenLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
"""`token_loss(logp (P,), index (P,)) -> scalar`: the loss of the completion tokens whose flat
indices are `index`, given their log-probabilities under the model being trained. The total
loss is the sum of its values over calls, so it must be a sum over tokens (normalisation
folded into per-token weights)."""


@dataclass
class Node:
    """A node of the prefix tree: the run of tokens every sequence through it shares, its
    children, and the loss terms its logits feed."""

    start: int
    """Position of the node's first token in every sequence through it."""
    tokens: list[int]
    children: list[Node] = field(default_factory=list)
    # loss terms: the logits at local position `at` predict `target`, flat completion index `index`
    at: list[int] = field(default_factory=list)
    target: list[int] = field(default_factory=list)
    index: list[int] = field(default_factory=list)


def _shared(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def target_positions(sequences: Sequence[Sequence[int]], prompt_lengths: Sequence[int]) -> list[range]:
    """Per sequence, the positions of its completion tokens (after its prompt)."""
    out = []
    for seq, prompt in zip(sequences, prompt_lengths):
        if not 1 <= prompt <= len(seq):
            raise ValueError(f"a prompt of {prompt} tokens in a sequence of {len(seq)}: each sample needs a "
                             "prompt of at least one token")
        out.append(range(prompt, len(seq)))
    return out


def _targets(sequences: Sequence[Sequence[int]], prompt_lengths: Sequence[int] | None,
             positions: Sequence[Sequence[int]] | None) -> Sequence[Sequence[int]]:
    """`positions`, or else the completion positions after `prompt_lengths` (one of the two names them)."""
    if positions is not None:
        return positions
    if prompt_lengths is None:
        raise ValueError("the target tokens need prompt_lengths or positions: neither was given")
    return target_positions(sequences, prompt_lengths)


def build_tree(sequences: Sequence[Sequence[int]], positions: Sequence[Sequence[int]]) -> Node:
    """The prefix tree of `sequences` (a root with no tokens), with every target token
    (`sequences[i][p]` for p in `positions[i]`, each p >= 1) attached, in flat order, to the
    node holding the position that predicts it."""
    root = Node(0, [])
    for seq in sequences:
        node, pos = root, 0
        while pos < len(seq):
            child = next((c for c in node.children if c.tokens[0] == seq[pos]), None)
            if child is None:
                node.children.append(Node(pos, list(seq[pos:])))
                break
            n = _shared(child.tokens, seq[pos:])
            if n < len(child.tokens):  # split the child where this sequence leaves it
                tail = Node(child.start + n, child.tokens[n:], child.children)
                child.tokens, child.children = child.tokens[:n], [tail]
            node, pos = child, pos + n
    flat = 0
    for seq, targets in zip(sequences, positions):
        path, node, pos = [], root, 0
        while pos < len(seq):
            node = next(c for c in node.children if c.tokens[0] == seq[pos])
            path.append(node)
            pos += len(node.tokens)
        for target in targets:
            q = target - 1  # position q predicts the token at q + 1
            if not 0 <= q < len(seq) - 1:
                raise ValueError(f"target position {target} is outside a sequence of {len(seq)} tokens (or is its first)")
            owner = next(n for n in path if n.start <= q < n.start + len(n.tokens))
            owner.at.append(q - owner.start)
            owner.target.append(seq[q + 1])
            owner.index.append(flat)
            flat += 1
    return root


def count_tokens(root: Node) -> int:
    """Tokens the tree runs through the model (against sum(len(s)) for `per_sample`)."""
    return len(root.tokens) + sum(count_tokens(c) for c in root.children)


def _causal_lm(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def _token_logp(lm, hidden: torch.Tensor, at: list[int], target: list[int], temperature: float) -> torch.Tensor:
    logits = lm.lm_head(hidden[at]).float()                                   # (P, V)
    if temperature != 1.0:
        logits = logits / temperature
    target_ids = torch.tensor(target, device=logits.device)[:, None]
    return torch.log_softmax(logits, -1).gather(-1, target_ids)[:, 0]                      # (P,)


def _keys_values(layer: DynamicLayer) -> tuple[torch.Tensor, torch.Tensor]:
    """A cache layer's keys and values, which the forward that used it has set."""
    if layer.keys is None or layer.values is None:
        raise RuntimeError("the forward left a cache layer without keys and values")
    return layer.keys, layer.values


def _run(lm, node: Node, parent: list[tuple[torch.Tensor, torch.Tensor]] | None, token_loss: TokenLoss | None,
         temperature: float, out: torch.Tensor,
         first: int = 0) -> list[tuple[torch.Tensor | None, torch.Tensor | None]] | None:
    """Run `node` and its subtree; with `token_loss`, back-propagate them and return the
    gradient left on `parent`'s keys and values (of the layers from `first` on: below the
    first layer that trains, keys and values depend on no trainable weight, and their
    gradient is None)."""
    grad = token_loss is not None
    leaves = None
    if parent is not None:
        leaves = [(k.detach().requires_grad_(grad and i >= first), v.detach().requires_grad_(grad and i >= first))
                  for i, (k, v) in enumerate(parent)]
    layers = []
    for i in range(lm.config.num_hidden_layers):
        layer = DynamicLayer()
        if leaves is not None:
            layer.lazy_initialization(*leaves[i])
            layer.keys, layer.values = leaves[i]
        layers.append(layer)
    n = len(node.tokens)
    device = out.device
    hidden = lm.model(input_ids=torch.tensor([node.tokens], device=device),   # (1, n)
                      position_ids=torch.arange(node.start, node.start + n, device=device)[None],
                      # a new list: transformers annotates `layers` as a list of its layer union
                      cache=Cache(layers=list(layers)), use_cache=True).last_hidden_state[0]   # (n, H)
    kv = [_keys_values(layer) for layer in layers]                            # each (1, heads, start + n, D)
    loss = None
    if node.at:
        logp = _token_logp(lm, hidden, node.at, node.target, temperature)
        index = torch.tensor(node.index, device=device)
        out[index] = logp.detach()
        if token_loss is not None:
            loss = token_loss(logp, index)
    child_grads: list[torch.Tensor | None] = [None] * (2 * len(kv))
    for child in node.children:
        g = _run(lm, child, kv, token_loss, temperature, out, first)
        if g is not None:
            for j, (gk, gv) in enumerate(g):
                for slot, t in ((2 * j, gk), (2 * j + 1, gv)):
                    if t is not None:
                        held = child_grads[slot]
                        child_grads[slot] = t if held is None else held + t
    if not grad:
        return None
    tensors, grads = [], []
    if loss is not None and loss.requires_grad:
        tensors.append(loss)
        grads.append(torch.ones_like(loss))
    flat_kv = [t for pair in kv for t in pair]
    for tensor, tensor_grad in zip(flat_kv, child_grads):
        if tensor_grad is not None and tensor.requires_grad:
            tensors.append(tensor)
            grads.append(tensor_grad)
    if tensors:
        torch.autograd.backward(tensors, grads)
    if leaves is None:
        return None
    return [(k.grad, v.grad) for k, v in leaves]


def decoder_layers(model) -> torch.nn.ModuleList:
    """The decoder layers of a transformers causal LM of the Llama/Qwen/Mistral shape (the
    stack at `model.layers`, the output layer at `lm_head`), peft-wrapped or not: the shape
    the shared-prefix forward runs on, refused by name otherwise."""
    from trace_gym.errors import InvalidConfig

    lm = _causal_lm(model)
    layers = getattr(getattr(lm, "model", None), "layers", None)
    if layers is None or not hasattr(lm, "lm_head"):
        raise InvalidConfig(f"{type(lm).__name__} keeps no decoder layers at model.layers: only decoder-only "
                            "causal LMs of the Llama/Qwen/Mistral shape can be trained here")
    return layers


def first_trainable_layer(lm) -> int:
    """The index of the lowest decoder layer with a weight that trains (the number of
    layers when none does)."""
    layers = decoder_layers(lm)
    return next((i for i, layer in enumerate(layers) if any(p.requires_grad for p in layer.parameters())),
                len(layers))


def shared_prefix(model, sequences: Sequence[Sequence[int]], prompt_lengths: Sequence[int] | None = None,
                  token_loss: TokenLoss | None = None, temperature: float = 1.0,
                  positions: Sequence[Sequence[int]] | None = None) -> torch.Tensor:
    """The log-probability `(N,)` of every completion token (flat: sample by sample, token by
    token) under `model`, each shared prefix run once. With `token_loss`, the loss is also
    back-propagated into the model's parameters (their `.grad` accumulates). `positions`
    names the target tokens directly, instead of everything after `prompt_lengths`."""
    lm = _causal_lm(model)
    positions = _targets(sequences, prompt_lengths, positions)
    root = build_tree(sequences, positions)
    total = sum(len(p) for p in positions)
    out = torch.zeros(total, device=next(lm.parameters()).device)
    context = torch.enable_grad() if token_loss is not None else torch.no_grad()
    first = first_trainable_layer(lm) if token_loss is not None else 0
    with context:
        for child in root.children:
            _run(lm, child, None, token_loss, temperature, out, first)
    return out


def per_sample(model, sequences: Sequence[Sequence[int]], prompt_lengths: Sequence[int] | None = None,
               token_loss: TokenLoss | None = None, temperature: float = 1.0,
               positions: Sequence[Sequence[int]] | None = None) -> torch.Tensor:
    """The same as `shared_prefix`, running every sample from its first token."""
    lm = _causal_lm(model)
    device = next(lm.parameters()).device
    positions = _targets(sequences, prompt_lengths, positions)
    outs, flat = [], 0
    context = torch.enable_grad() if token_loss is not None else torch.no_grad()
    with context:
        for seq, targets in zip(sequences, positions):
            hidden = lm.model(input_ids=torch.tensor([list(seq)], device=device)).last_hidden_state[0]   # (T, H)
            at = [t - 1 for t in targets]
            logp = _token_logp(lm, hidden, at, [seq[t] for t in targets], temperature)
            index = torch.arange(flat, flat + len(at), device=device)
            if token_loss is not None:
                token_loss(logp, index).backward()
            outs.append(logp.detach())
            flat += len(at)
    return torch.cat(outs) if outs else torch.zeros(0, device=device)
