"""Chapter 11 -- GPT.

Text generation: pick the next token from the model's logits, append it, repeat.

Sampling controls, applied in this order to the last position's logits:

* ``temperature`` divides the logits: below 1 sharpens the distribution, above 1 flattens it,
  and 0 means greedy decoding (always the most likely token);
* ``top_k`` keeps only the k most likely tokens;
* ``top_p`` (nucleus sampling) keeps the smallest set of most likely tokens whose probabilities
  add up to at least p.

With ``use_cache=True`` the model keeps each layer's keys and values (a KV cache), so a new token
needs one position of work instead of the whole window. The model was trained on windows of at
most ``block_size`` tokens with positions 0…block_size−1, so the context is always the last
``block_size`` tokens. Once a sequence is longer than that, every token's position shifts by one
at each step and cached keys no longer fit: the cache is emptied and refilled from the cropped
window (a "re-prefill"). Both ways produce the same tokens.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


class KVCache:
    """Keys and values of the tokens one attention layer has already seen (B, H, T, hd),
    allocated once for the whole context; ``length`` says how much is filled."""

    def __init__(self, batch_size, n_head, max_length, head_dim, device=None, dtype=None):
        shape = (batch_size, n_head, max_length, head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0

    def append(self, keys: torch.Tensor, values: torch.Tensor):
        """Store new keys and values; return all those seen so far."""
        end = self.length + keys.size(2)
        if end > self.keys.size(2):
            raise ValueError(f"KV cache holds {self.keys.size(2)} positions, asked for {end}")
        self.keys[:, :, self.length : end] = keys
        self.values[:, :, self.length : end] = values
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def reset(self):
        self.length = 0


def new_caches(model, batch_size: int) -> list[KVCache]:
    """Empty KV caches for a :class:`~mini_llm.gpt.GPT`, one per block, each holding a whole
    context window."""
    c, weight = model.config, model.token_embedding.weight
    shape = (batch_size, c.n_head, c.block_size, c.n_embd // c.n_head)
    return [KVCache(*shape, weight.device, weight.dtype) for _ in range(c.n_layer)]


def filter_logits(
    logits: torch.Tensor, top_k: int | None = None, top_p: float | None = None
) -> torch.Tensor:
    """Set to -inf the logits (B, V) of tokens that top-k or top-p sampling rules out."""
    if top_k is not None and top_k < logits.size(-1):
        kth_best = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        probs = F.softmax(sorted_logits, dim=-1)
        # Drop a token when the tokens ranked above it already reach top_p on their own;
        # the most likely token is always kept, even for top_p = 0.
        mass_before = probs.cumsum(dim=-1) - probs
        drop_sorted = mass_before >= top_p
        drop_sorted[:, 0] = False
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def next_token(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """One token id per row of ``logits`` (B, V), as a (B, 1) tensor."""
    if temperature == 0:
        return logits.argmax(dim=-1, keepdim=True)
    logits = filter_logits(logits.float() / temperature, top_k, top_p)
    return torch.multinomial(F.softmax(logits, dim=-1), 1, generator=generator)


def _check_settings(max_new_tokens, temperature, top_k, top_p):
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be ≥ 0, got {max_new_tokens}")
    if temperature < 0:
        raise ValueError(f"temperature must be ≥ 0 (0 = greedy), got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be ≥ 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")


@torch.no_grad()
def generate(
    model,
    idx: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool = True,
) -> torch.Tensor:
    """``idx`` (B, T) followed by ``max_new_tokens`` generated tokens: (B, T + max_new_tokens).

    ``generator`` (a seeded ``torch.Generator`` on the model's device) makes sampling
    repeatable; with the same seed, cached and uncached generation give the same text.
    """
    _check_settings(max_new_tokens, temperature, top_k, top_p)
    if idx.dim() != 2 or idx.size(1) == 0:
        raise ValueError(
            f"idx must be (batch, tokens) with at least one token, got {tuple(idx.shape)}"
        )
    was_training = model.training
    model.eval()
    try:
        return _generate(
            model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache
        )
    finally:  # also after an error: a model left in eval mode would train without dropout
        model.train(was_training)


def _generate(
    model,
    idx,
    max_new_tokens,
    temperature,
    top_k,
    top_p,
    generator,
    use_cache,
):
    window = model.config.block_size
    caches = new_caches(model, idx.size(0)) if use_cache else None
    for _ in range(max_new_tokens):
        if not use_cache:
            logits, _ = model(idx[:, -window:])
        elif caches[0].length in (0, window):  # start, or the window moved on: refill
            for cache in caches:
                cache.reset()
            logits, _ = model(idx[:, -window:], caches=caches)
        else:  # the cache holds every token but the newest one
            logits, _ = model(idx[:, -1:], caches=caches)
        token = next_token(logits[:, -1, :], temperature, top_k, top_p, generator)
        idx = torch.cat((idx, token), dim=1)
    return idx
