"""Chapter 11 -- GPT: a decoder-only transformer, read top to bottom: config, attention, MLP,
block, model.

Each block lets a position look at the positions before it (causal self-attention), then
transforms what it gathered (an MLP); LayerNorm comes *before* each (pre-LN), which trains
without a careful warm-up; the output head reuses the token embeddings (weight tying).
Attention is ``fused`` (PyTorch's kernel, the default) or ``explicit`` (the formula written out
with chapter 8's functions). Generation (:mod:`mini_llm.generate`) hands each block a KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm import self_attention

ACTIVATIONS = {
    "gelu": F.gelu,  # exact: x·Φ(x)
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),  # GPT-2's "gelu_new"
    "relu": torch.relu,  # the Transformer paper's, chapter 9's feed_forward
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
    activation: str = "gelu"  # one of ACTIVATIONS
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
    """Trainable parameters of a GPT of this shape (the number of heads does not matter):
    V·d + T·d + L·(12·d² + 13·d) + 2·d -- the token embedding (shared with the head), the
    positions, per block Q, K, V and output (4·d² + 4·d), the MLP d → 4d → d (8·d² + 5·d) and
    two LayerNorms (4·d), and the final LayerNorm. Without biases each block loses 9·d + 2·d
    and the final LayerNorm d: V·d + T·d + L·(12·d² + 2·d) + d."""
    V, T, L, d = vocab_size, block_size, n_layer, n_embd
    if bias:
        return V * d + T * d + L * (12 * d * d + 13 * d) + 2 * d
    return V * d + T * d + L * (12 * d * d + 2 * d) + d


def cached_causal_mask(queries: int, keys: int, device=None) -> torch.Tensor:
    """(queries, keys) bool, True = may attend, when the last ``queries`` of ``keys`` positions
    are new and the others sit in a KV cache: the last rows of chapter 8's causal mask."""
    return self_attention.causal_mask(keys)[keys - queries :].to(device)


def causal_attention_weights(q, k, offset: int = 0) -> torch.Tensor:
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
    """(output, weights) of softmax(Q Kᵀ / √d_k) V with the causal mask, by chapter 8's
    ``scaled_dot_product_attention``; k and v may start with S − T cached positions."""
    mask = cached_causal_mask(q.size(-2), k.size(-2), q.device)
    output, weights = self_attention.scaled_dot_product_attention(q, k, v, mask)
    if dropout_p > 0.0:  # dropout drops weights before they mix the values
        return F.dropout(weights, p=dropout_p) @ v, weights
    return output, weights


def fused_attention(q, k, v, dropout_p: float = 0.0) -> torch.Tensor:
    """The same output by PyTorch's fused kernel, given the mask its fast paths need."""
    T, S = q.size(-2), k.size(-2)
    if T == S:  # no cache, or a cache filled from empty: the usual triangle
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    if T == 1:  # one new token sees every cached key
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    allowed = cached_causal_mask(T, S, q.device)  # new tokens after a cached prefix
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, dropout_p=dropout_p)


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention in which each position sees only itself and the past."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head, self.dropout = config.n_head, config.dropout
        self.fused = config.attention == "fused"
        # One Linear makes Q, K and V together: one matrix multiply instead of three.
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)

    def heads(self, x: torch.Tensor):
        """Queries, keys and values of ``x`` (B, T, C), each (B, H, T, C/H): one set per head."""
        return [self_attention.split_heads(p, self.n_head) for p in self.qkv(x).chunk(3, dim=-1)]

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
        q, k, v = self.heads(x)
        if cache is not None:
            k, v = cache.append(k, v)
        dropout_p = self.dropout if self.training else 0.0
        if self.fused:
            y = fused_attention(q, k, v, dropout_p)
        else:
            y, _ = explicit_attention(q, k, v, dropout_p)
        y = self_attention.combine_heads(y)  # heads side by side again
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward network: widen to 4·d, apply the activation, project back."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.activation = ACTIVATIONS[config.activation]
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(self.activation(self.fc(x))))


class Block(nn.Module):
    """One transformer block, pre-LN: x + attention(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x: torch.Tensor, cache=None) -> torch.Tensor:
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
        self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
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

    def forward(self, idx, targets=None, caches: list | None = None):
        """Logits (B, T, vocab) for token ids ``idx`` (B, T), and the mean cross-entropy over
        ``targets`` (B, T; ids of -1 are not counted) or ``None``. With ``caches`` (one
        :class:`~mini_llm.generate.KVCache` per block) ``idx`` continues the tokens in them."""
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
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.view(B * T, -1), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    @torch.no_grad()
    def attention_maps(self, idx: torch.Tensor) -> list[torch.Tensor]:
        """Attention weights (B, H, T, T) of every block for ``idx``, for plots (eval mode)."""
        positions = torch.arange(idx.size(1), device=idx.device)
        x = self.token_embedding(idx) + self.position_embedding(positions)
        maps = []
        for block in self.blocks:
            q, k, _ = block.attn.heads(block.ln_1(x))
            maps.append(causal_attention_weights(q, k))
            x = block(x)
        return maps

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied matrix counted once

    def generate(self, idx, max_new_tokens, **options):
        """``max_new_tokens`` more tokens after ``idx``: :func:`mini_llm.generate.generate`."""
        from mini_llm.generate import generate

        return generate(self, idx, max_new_tokens, **options)
