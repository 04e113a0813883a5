"""Chapter 8 -- Self-attention.

Self-attention: scaled dot-product attention, masks, heads and positions.

Every position of a sequence asks a question (its query q), offers a label (its key k) and
carries a content (its value v). Each query scores every key by a dot product, the softmax turns
the scores into weights, and the output is the weighted mean of the values:

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V

Dividing by √d_k keeps the scores at unit variance whatever the width d_k, so the softmax neither
saturates nor starts flat as heads get wider. Masks follow one convention across the course
(chapter 7's): a boolean tensor in which **True means "may attend"**. :mod:`mini_llm.gpt`'s
causal self-attention computes exactly these functions (see ``tests/test_attention.py``).
"""

from __future__ import annotations

import math

import torch
from torch import nn


def scaled_dot_product_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ / √d_k) v: the outputs (..., T, d_v) and the weights (..., T, S).

    q is (..., T, d_k), k (..., S, d_k) and v (..., S, d_v), with any leading batch dimensions.
    ``mask`` broadcasts to (..., T, S) and is either boolean (True: query t may attend to key s)
    or float (added to the scores, e.g. a distance bias; -inf forbids), as in
    ``torch.nn.functional.scaled_dot_product_attention``.

    A query that may attend to nothing (a fully masked row) gets weights 0 and output 0. Filling
    the masked scores with -inf instead gives 0/0 = NaN there; a finite -1e9 gives a defined but
    meaningless answer, the uniform mean of the *forbidden* values (and float16 cannot hold it:
    ``masked_fill`` refuses, a conversion gives -inf). So masked scores are -inf, and rows
    without any allowed key are zeroed explicitly.
    """
    if q.size(-1) != k.size(-1):
        raise ValueError(f"queries have d_k={q.size(-1)} but keys have {k.size(-1)}")
    if k.size(-2) != v.size(-2):
        raise ValueError(f"{k.size(-2)} keys but {v.size(-2)} values")
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights
    if mask.dtype == torch.bool:
        scores = scores.masked_fill(~mask, float("-inf"))
    else:
        scores = scores + mask
    # Rows with no allowed key: softmax a row of zeros instead (no NaN, in the forward pass or
    # the gradient), then zero its weights.
    anything_allowed = (scores > float("-inf")).any(dim=-1, keepdim=True)
    weights = torch.softmax(torch.where(anything_allowed, scores, 0.0), dim=-1)
    weights = weights * anything_allowed
    return weights @ v, weights


def causal_mask(size: int, padding: torch.Tensor | None = None) -> torch.Tensor:
    """Which key each query may attend to: (size, size), True on and below the diagonal, so
    position t sees positions 0..t and never the future.

    With ``padding`` (B, size), True at real tokens (e.g. ``padding_mask(lengths, size)``), the
    result is (B, size, size) and also forbids the padded keys.
    """
    if size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    allowed = torch.ones(size, size, dtype=torch.bool).tril()
    if padding is None:
        return allowed
    if padding.dtype != torch.bool or padding.dim() != 2 or padding.size(1) != size:
        raise ValueError(
            f"padding must be a bool tensor (B, {size}), got {padding.dtype} {tuple(padding.shape)}"
        )
    return allowed & padding[:, None, :]


def padding_mask(lengths: torch.Tensor, size: int) -> torch.Tensor:
    """(B, size) bool, True at the first ``lengths[b]`` positions of row b (the real tokens).

    As an attention mask over keys use ``padding_mask(...)[:, None, :]`` (B, 1, S).
    """
    lengths = torch.as_tensor(lengths)
    if (lengths < 0).any() or (lengths > size).any():
        raise ValueError(f"lengths must be in 0..{size}, got {lengths.tolist()}")
    return torch.arange(size) < lengths[:, None]


def split_heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(..., T, d) -> (..., n_heads, T, d / n_heads): head h gets features h·d/H .. (h+1)·d/H.

    The features are first split (a view), then the head axis is moved before the time axis;
    a plain ``view(..., H, T, d/H)`` would instead cut the sequence into pieces.
    """
    *batch, T, d = x.shape
    if n_heads < 1 or d % n_heads:
        raise ValueError(f"d={d} must be divisible by n_heads={n_heads}")
    return x.reshape(*batch, T, n_heads, d // n_heads).transpose(-3, -2)


def combine_heads(x: torch.Tensor) -> torch.Tensor:
    """(..., n_heads, T, d_head) -> (..., T, n_heads·d_head): the inverse of :func:`split_heads`."""
    *batch, H, T, d_head = x.shape
    return x.transpose(-3, -2).reshape(*batch, T, H * d_head)


def _attend_by_heads(q, k, v, n_heads, mask):
    """Attention on projected q, k, v (..., T, d), head by head; mask broadcasts to (..., T, S)
    and is shared by the heads. Returns (..., T, d) and the weights (..., H, T, S)."""
    if mask is not None:
        mask = mask.unsqueeze(-3)  # a heads axis
    out, weights = scaled_dot_product_attention(
        split_heads(q, n_heads), split_heads(k, n_heads), split_heads(v, n_heads), mask
    )
    return combine_heads(out), weights


def multi_head_attention(
    x: torch.Tensor,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    n_heads: int,
    mask: torch.Tensor | None = None,
    source: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head self-attention of ``x`` (..., T, d) with explicit (d, d) weights, stored as
    (out, in) like ``nn.Linear``: the outputs (..., T, d) and the weights (..., H, T, T).

    Q = x W_qᵀ, K = x W_kᵀ, V = x W_vᵀ are split into ``n_heads`` heads of d / n_heads features;
    each head attends on its own, the heads are put side by side again and mixed by W_o. The
    parameters are 4·d² whatever the number of heads. ``mask`` broadcasts to (..., T, T).

    With ``source`` (..., S, d) it is cross-attention (chapter 9): the queries come from ``x``,
    the keys and values from ``source``, and the weights are (..., H, T, S).
    """
    source = x if source is None else source
    out, weights = _attend_by_heads(x @ W_q.T, source @ W_k.T, source @ W_v.T, n_heads, mask)
    return out @ W_o.T, weights


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention as a module: four (d, d) projections, optionally with biases.

    ``forward(x, mask=None, source=None)`` returns ``(out, weights)`` like
    :func:`multi_head_attention`, to which it is equal when ``bias=False``; with ``source`` the
    keys and values come from it (cross-attention).
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True):
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} must be divisible by n_heads={n_heads}")
        self.n_heads = n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, source: torch.Tensor | None = None
    ):
        source = x if source is None else source
        out, weights = _attend_by_heads(
            self.q(x), self.k(source), self.v(source), self.n_heads, mask
        )
        return self.o(out), weights


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model) table: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same).

    Each pair of dimensions turns at its own frequency, so PE(p + k) is PE(p) rotated by an angle
    that depends on k only, and PE(p)·PE(p + k) = Σ_i cos(k ω_i) does not depend on p.
    """
    if max_len < 0 or d_model < 1:
        raise ValueError(f"need max_len >= 0 and d_model >= 1, got {max_len}, {d_model}")
    positions = torch.arange(max_len, dtype=torch.float64)[:, None]
    pair = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i for each pair of dimensions
    angles = positions / 10000 ** (pair / d_model)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table.float()


class PositionalEncoding(nn.Module):
    """Adds a position vector to each token vector of ``x`` (B, T, d).

    ``learned=False``: the fixed sinusoidal table (nothing to train, defined for any position up
    to ``max_len``). ``learned=True``: a trained table, ``nn.Embedding(max_len, d)``, as in the
    GPT of :mod:`mini_llm.gpt`; its rows beyond the training length never get a gradient.
    """

    def __init__(self, max_len: int, d_model: int, learned: bool = False):
        super().__init__()
        self.max_len = max_len
        if learned:
            self.table = nn.Embedding(max_len, d_model)
        else:
            self.register_buffer(
                "table_values", sinusoidal_positional_encoding(max_len, d_model), persistent=False
            )
            self.table = None

    def forward(self, x: torch.Tensor, start: int = 0) -> torch.Tensor:
        T = x.size(-2)
        if start + T > self.max_len:
            raise ValueError(f"positions up to {start + T - 1}, but the table holds {self.max_len}")
        positions = torch.arange(start, start + T, device=x.device)
        table = self.table(positions) if self.table is not None else self.table_values[positions]
        return x + table
