"""A decoder-only transformer (GPT), read top to bottom: config, attention, MLP, block, model.

The model predicts the next token at every position of a sequence. Each block lets a position
look at the positions before it (causal self-attention), then transforms what it gathered
(a two-layer MLP); LayerNorm comes *before* each of the two (pre-LN), which keeps training stable
without a careful warm-up. The output head reuses the token embedding matrix (weight tying).

Attention has two paths that compute the same thing:

* ``explicit`` -- softmax(Q Kᵀ / √d_k) V with the causal mask, by chapter 8's functions
  (:mod:`mini_llm.self_attention`), for reading and tests;
* ``fused``    -- ``torch.nn.functional.scaled_dot_product_attention``, PyTorch's fused kernel,
  which never materialises the T×T weight matrix and is the fast default.

Generation (``mini_llm.generate``) can keep the keys and values of tokens already seen in a
:class:`KVCache`, so that each new token costs one position of work instead of the whole window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# Chapters 8 and 9's functions are looked up through their modules when called, not bound here,
# so that mini_llm.learner can swap a learner's own versions in (``mini-llm train --learner``).
from mini_llm import self_attention, transformer
from mini_llm.engine.cpu_linear import Linear  # nn.Linear, with faster products on some CPUs

ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),  # exact: x·Φ(x)
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": torch.relu,  # the MLP is then chapter 9's feed_forward (the Transformer paper's)
}


@dataclass
class GPTConfig:
    """The shape of a GPT. ``vocab_size`` comes from the tokenizer, the rest is a choice."""

    vocab_size: int = 65
    block_size: int = 64  # context length: the most tokens the model sees at once
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    dropout: float = 0.0
    bias: bool = True  # biases in Linear layers and LayerNorms (GPT-2 has them)
    # "gelu" (exact, x·Φ(x)), "gelu_tanh" (GPT-2's approximation; slower on CPU in PyTorch) or
    # "relu" (chapter 9's feed_forward, which mini-llm train --learner swaps for the learner's)
    activation: str = "gelu"
    layer_norm_eps: float = 1e-5
    attention: str = "fused"  # "fused" (fast) or "explicit" (the formula written out)

    def __post_init__(self):
        if self.n_embd % self.n_head:
            raise ValueError(
                f"n_embd={self.n_embd} must be divisible by n_head={self.n_head}: "
                "each head gets n_embd // n_head dimensions"
            )
        if self.activation not in ACTIVATIONS:
            raise ValueError(
                f"activation must be one of {sorted(ACTIVATIONS)}, got {self.activation!r}"
            )
        if self.attention not in ("fused", "explicit"):
            raise ValueError(f"attention must be 'fused' or 'explicit', got {self.attention!r}")

    def parameter_count(self) -> int:
        """Exact number of trainable parameters, from the shape alone (:func:`parameter_count`)."""
        return parameter_count(
            self.vocab_size, self.block_size, self.n_layer, self.n_embd, self.bias
        )


def parameter_count(
    vocab_size: int, block_size: int, n_layer: int, n_embd: int, bias: bool = True
) -> int:
    """Trainable parameters of a GPT of this shape; the number of heads does not matter.

    With V = vocab_size, T = block_size, d = n_embd, L = n_layer and biases on:

        V·d  +  T·d  +  L·(12·d² + 13·d)  +  2·d

    * token embedding V·d (shared with the output head, so counted once) and positions T·d;
    * per block: Q, K, V and output projections 4·d² + 4·d, MLP d→4d→d 8·d² + 5·d,
      two LayerNorms 4·d  →  12·d² + 13·d;
    * the final LayerNorm 2·d.

    Without biases each block loses its 9·d Linear biases and 2·d LayerNorm biases, and the
    final LayerNorm its d bias: V·d + T·d + L·(12·d² + 2·d) + d.
    """
    V, T, L, d = vocab_size, block_size, n_layer, n_embd
    if bias:
        return V * d + T * d + L * (12 * d * d + 13 * d) + 2 * d
    return V * d + T * d + L * (12 * d * d + 2 * d) + d


class KVCache:
    """Keys and values of the tokens one attention layer has already seen.

    Buffers are allocated once for the whole context; ``length`` says how much is filled.
    """

    def __init__(self, batch_size, n_head, max_length, head_dim, device=None, dtype=None):
        shape = (batch_size, n_head, max_length, head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0

    def append(self, keys: torch.Tensor, values: torch.Tensor):
        """Store new keys/values (B, H, T, hd); return all keys and values seen so far."""
        end = self.length + keys.size(2)
        if end > self.keys.size(2):
            raise ValueError(f"KV cache holds {self.keys.size(2)} positions, asked for {end}")
        self.keys[:, :, self.length : end] = keys
        self.values[:, :, self.length : end] = values
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def reset(self):
        self.length = 0


def cached_causal_mask(queries: int, keys: int, device=None) -> torch.Tensor:
    """(queries, keys) bool, True = may attend: chapter 8's causal mask when the last ``queries``
    of ``keys`` positions are new and the earlier ones sit in a KV cache. Each new token sees
    every cached key and the new tokens up to itself: the last rows of the causal mask over all
    ``keys`` positions."""
    return self_attention.causal_mask(keys)[keys - queries :].to(device)


def causal_attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    offset: int = 0,
) -> torch.Tensor:
    """softmax(Q Kᵀ / √d_k) over the keys each query may see: weights (B, H, Tq, Tk).

    q is (B, H, Tq, d_k), k (B, H, Tk, d_k). Query i stands at position ``offset + i`` (offset:
    the tokens already in a KV cache, so Tk = offset + Tq) and sees keys 0 … offset + i.
    """
    if k.size(-2) != offset + q.size(-2):
        raise ValueError(
            f"{k.size(-2)} keys, but offset {offset} + {q.size(-2)} queries need "
            f"{offset + q.size(-2)}: the cached tokens' keys, then the new ones"
        )
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    seen = cached_causal_mask(q.size(-2), k.size(-2), q.device)
    return torch.softmax(scores.masked_fill(~seen, float("-inf")), dim=-1)


def explicit_attention(q, k, v, dropout_p: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_k) V with the causal mask, written out by chapter 8's
    :func:`~mini_llm.self_attention.scaled_dot_product_attention`: (output, weights).

    q is (B, H, T, d_k); k and v are (B, H, S, ·) with S ≥ T (the first S − T from a KV
    cache). Each row of the weights (B, H, T, S) sums to 1; dropout, when training, drops
    weights before they mix the values.
    """
    mask = cached_causal_mask(q.size(-2), k.size(-2), q.device)
    output, weights = self_attention.scaled_dot_product_attention(q, k, v, mask)
    if dropout_p > 0.0:
        output = F.dropout(weights, p=dropout_p) @ v
    return output, weights


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each position sees only itself and the past."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head = config.n_head
        self.dropout = config.dropout
        self.fused = config.attention == "fused"
        # One Linear makes Q, K and V together: one matrix multiply instead of three.
        self.qkv = Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.proj = Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def heads(self, x: torch.Tensor):
        """Queries, keys and values of ``x`` (B, T, C), each (B, H, T, C/H): one set per head."""
        return [
            self_attention.split_heads(part, self.n_head) for part in self.qkv(x).chunk(3, dim=-1)
        ]

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        q, k, v = self.heads(x)
        if cache is not None:
            k, v = cache.append(k, v)
        dropout_p = self.dropout if self.training else 0.0
        if self.fused:
            y = self._fused(q, k, v, dropout_p)
        else:
            y, _ = explicit_attention(q, k, v, dropout_p)
        y = self_attention.combine_heads(y)  # heads side by side again
        return self.resid_dropout(self.proj(y))

    @staticmethod
    def _fused(q, k, v, dropout_p):
        T, S = q.size(-2), k.size(-2)
        if T == S:  # no cache, or a cache being filled from empty: the usual triangle
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        if T == 1:  # one new token: it may see every cached key
            return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
        # Several new tokens after a cached prefix: the triangle is shifted right by S - T.
        allowed = cached_causal_mask(T, S, q.device)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)


class MLP(nn.Module):
    """Position-wise feed-forward network: widen to 4·d, apply GELU, project back to d."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.activation = ACTIVATIONS[config.activation]
        self.proj = Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)
        self.chapter_9 = config.activation == "relu"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.chapter_9:
            b1, b2 = (_bias_of(layer) for layer in (self.fc, self.proj))
            return self.dropout(
                transformer.feed_forward(x, self.fc.weight, b1, self.proj.weight, b2)
            )
        return self.dropout(self.proj(self.activation(self.fc(x))))


def _bias_of(layer: nn.Linear) -> torch.Tensor:
    """The layer's bias, or zeros where it has none (``bias=False``), for chapter 9's functions,
    which always take one."""
    if layer.bias is not None:
        return layer.bias
    return torch.zeros(layer.weight.shape[0], device=layer.weight.device, dtype=layer.weight.dtype)


def normalize(x: torch.Tensor, norm: nn.LayerNorm) -> torch.Tensor:
    """What every LayerNorm of the GPT computes: PyTorch's fused kernel. mini_llm.learner swaps
    in chapter 9's ``layer_norm`` written by the learner."""
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


class LayerNorm(nn.LayerNorm):
    """``nn.LayerNorm`` (same parameters and state dict) that computes :func:`normalize`,
    looked up when called."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return normalize(x, self)


class Block(nn.Module):
    """One transformer block, pre-LN: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Token + position embeddings, a stack of blocks, a final LayerNorm, a tied output head."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.n_embd)
        self.position_embedding = nn.Embedding(config.block_size, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.head = Linear(config.n_embd, config.vocab_size, bias=False)
        # Weight tying: the vector that represents a token going in also scores it
        # coming out.
        self.head.weight = self.token_embedding.weight
        self.apply(self._init_weights)
        # Each block adds two projections into the residual stream; scaling them down by
        # √(2L) keeps the stream's variance from growing with depth.
        for block in self.blocks:
            for projection in (block.attn.proj, block.mlp.proj):
                nn.init.normal_(projection.weight, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        caches: list[KVCache] | None = None,
    ):
        """Logits (B, T, vocab) for token ids ``idx`` (B, T); the mean cross-entropy if
        ``targets`` (B, T) is given (ids of -1 are ignored), else ``None``.

        With ``caches`` (one per block, from :meth:`new_caches`), ``idx`` continues the tokens
        already in the caches, and positions count on from there.
        """
        B, T = idx.shape
        start = caches[0].length if caches else 0
        if start + T > self.config.block_size:
            raise ValueError(
                f"a sequence of {start + T} tokens is longer than the model's context "
                f"(block_size={self.config.block_size}); keep only the last "
                f"{self.config.block_size} tokens, e.g. idx[:, -{self.config.block_size}:]"
            )
        positions = torch.arange(start, start + T, device=idx.device)
        x = self.dropout(self.token_embedding(idx) + self.position_embedding(positions))
        for i, block in enumerate(self.blocks):
            x = block(x, caches[i] if caches else None)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(B * T), ignore_index=-1)
        return logits, loss

    @staticmethod
    def counted_targets(targets: torch.Tensor) -> int:
        """How many targets the loss of :meth:`forward` averages over (all but the -1s).

        With it the trainer can split a batch into shares and weight each share's loss by its
        share of the targets (:mod:`mini_llm.engine.cpu_parallel`).
        """
        return int((targets != -1).sum())

    @torch.no_grad()
    def attention_maps(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """Attention weights (B, H, T, T) of every block for ``idx``: what looks where.

        Meant for plots of a model in eval mode (with dropout on, later blocks see noise).
        """
        T = idx.size(1)
        x = self.token_embedding(idx) + self.position_embedding(torch.arange(T, device=idx.device))
        maps = []
        for block in self.blocks:
            q, k, _ = block.attn.heads(block.ln_1(x))
            maps.append(causal_attention_weights(q, k))
            x = block(x)
        return maps

    def new_caches(self, batch_size: int) -> list[KVCache]:
        """Empty KV caches, one per block, that hold a whole context window."""
        c = self.config
        weight = self.token_embedding.weight
        return [
            KVCache(
                batch_size,
                c.n_head,
                c.block_size,
                c.n_embd // c.n_head,
                device=weight.device,
                dtype=weight.dtype,
            )
            for _ in range(c.n_layer)
        ]

    def num_parameters(self) -> int:
        """Trainable parameters, the tied embedding/head matrix counted once."""
        return sum(p.numel() for p in self.parameters())

    @torch.no_grad()
    def generate(
        self,
        idx,
        max_new_tokens,
        temperature=1.0,
        top_k=None,
        top_p=None,
        generator=None,
        use_cache=True,
    ):
        """``idx`` (B, T) and ``max_new_tokens`` more: see :func:`mini_llm.generate.generate`."""
        from mini_llm.generate import generate

        return generate(
            self,
            idx,
            max_new_tokens,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            generator=generator,
            use_cache=use_cache,
        )
