"""Chapter 9 -- The Transformer.

The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), built from its parts.

An encoder layer is self-attention and a position-wise feed-forward network, each wrapped in a
residual connection and a LayerNorm. A decoder layer adds, between the two, **cross-attention**:
queries from the decoder, keys and values from the encoder's output. The paper normalises after
each residual sum (post-LN, ``norm(x + f(x))``); most models since normalise the input of each
sub-layer instead (pre-LN, ``x + f(norm(x))``), which keeps an identity path from the loss to
every layer and trains deep stacks without a learning-rate warm-up (Xiong et al., 2020).

All attention here is :mod:`mini_llm.self_attention`'s; masks are boolean, True = may attend.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from mini_llm.self_attention import (
    MultiHeadAttention,
    PositionalEncoding,
    causal_mask,
    multi_head_attention,
)


def layer_norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    """Normalise each vector of ``x`` (..., d) over its d features: γ (x - μ) / √(σ² + ε) + β.

    σ² is the biased variance (divided by d, not d - 1) and ε sits inside the square root, as in
    ``torch.nn.functional.layer_norm``. Unlike a batch norm, nothing is shared between positions
    or examples: a vector's output depends on that vector alone.
    """
    if gamma.shape != x.shape[-1:] or beta.shape != x.shape[-1:]:
        raise ValueError(f"gamma and beta must have shape ({x.size(-1)},)")
    mean = x.mean(dim=-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return gamma * (x - mean) / torch.sqrt(variance + eps) + beta


class LayerNorm(nn.Module):
    """:func:`layer_norm` with a learned gain γ (starts at 1) and bias β (starts at 0)."""

    def __init__(self, d_model: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)


def feed_forward(
    x: torch.Tensor, W1: torch.Tensor, b1: torch.Tensor, W2: torch.Tensor, b2: torch.Tensor
) -> torch.Tensor:
    """max(0, x W1ᵀ + b1) W2ᵀ + b2, the same two-layer network at every position of ``x``.

    W1 is (d_ff, d) and W2 (d, d_ff), stored (out, in) like ``nn.Linear``. Attention mixes the
    positions; this is where each position is transformed on its own.
    """
    return torch.relu(x @ W1.T + b1) @ W2.T + b2


class PositionWiseFeedForward(nn.Module):
    """:func:`feed_forward` with learned weights; d_ff = 4·d_model unless given."""

    def __init__(self, d_model: int, d_ff: int | None = None):
        super().__init__()
        d_ff = 4 * d_model if d_ff is None else d_ff
        self.linear1, self.linear2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return feed_forward(
            x, self.linear1.weight, self.linear1.bias, self.linear2.weight, self.linear2.bias
        )


def attention_sublayer(
    x: torch.Tensor,
    source: torch.Tensor | None,
    W_q: torch.Tensor,
    W_k: torch.Tensor,
    W_v: torch.Tensor,
    W_o: torch.Tensor,
    gamma: torch.Tensor,
    beta: torch.Tensor,
    n_heads: int,
    mask: torch.Tensor | None = None,
    norm_first: bool = False,
) -> torch.Tensor:
    """One attention sub-layer with its residual connection and LayerNorm, weights explicit.

    ``source`` None: self-attention of ``x``. Otherwise cross-attention: queries from ``x`` (the
    decoder), keys and values from ``source`` (the encoder's output), which is used as it is
    (in pre-LN the encoder has normalised it already).
    Post-LN: norm(x + MHA(x)); pre-LN: x + MHA(norm(x)).
    """

    def attend(h):
        return multi_head_attention(h, W_q, W_k, W_v, W_o, n_heads, mask, source=source)[0]

    if norm_first:
        return x + attend(layer_norm(x, gamma, beta))
    return layer_norm(x + attend(x), gamma, beta)


class EncoderLayer(nn.Module):
    """Self-attention, then the feed-forward network, each with a residual and a LayerNorm.

    ``forward(x, src_mask)`` returns the new x (B, S, d) and the self-attention weights
    (B, H, S, S). ``src_mask`` broadcasts to (B, S, S), e.g. (B, 1, S) to hide padding.
    ``dropout`` (the paper's P_drop, 0.1) zeroes each sub-layer's output at random in training,
    before it is added to the stream; 0, this chapter's setting, switches it off.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        norm_first: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(d_model, n_heads)
        self.feed_forward = PositionWiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2 = LayerNorm(d_model), LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor | None = None):
        if self.norm_first:  # pre-LN: x + f(LN(x)), the stream itself never normalised
            out, weights = self.self_attention(self.norm1(x), src_mask)
            x = x + self.dropout(out)
            x = x + self.dropout(self.feed_forward(self.norm2(x)))
        else:  # post-LN: LN(x + f(x))
            out, weights = self.self_attention(x, src_mask)
            x = self.norm1(x + self.dropout(out))
            x = self.norm2(x + self.dropout(self.feed_forward(x)))
        return x, weights


class DecoderLayer(nn.Module):
    """Masked self-attention, cross-attention to the encoder, then the feed-forward network.

    ``forward(x, encoder_output, src_mask, tgt_mask)`` returns the new x (B, T, d), the
    self-attention weights (B, H, T, T) and the cross-attention weights (B, H, T, S).
    ``tgt_mask`` (T, T) is causal, so position t never reads the digits after it; ``src_mask``
    (B, 1, S) hides the source padding from the cross-attention. ``dropout``: as in
    :class:`EncoderLayer`.
    """

    def __init__(
        self,
        d_model: int,
        n_heads: int,
        d_ff: int | None = None,
        norm_first: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.norm_first = norm_first
        self.self_attention = MultiHeadAttention(d_model, n_heads)
        self.cross_attention = MultiHeadAttention(d_model, n_heads)
        self.feed_forward = PositionWiseFeedForward(d_model, d_ff)
        self.norm1, self.norm2, self.norm3 = (LayerNorm(d_model) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        x: torch.Tensor,
        encoder_output: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
    ):
        memory = encoder_output  # the source of the cross-attention's keys and values
        if self.norm_first:  # pre-LN: x + f(LN(x))
            out, self_weights = self.self_attention(self.norm1(x), tgt_mask)
            x = x + self.dropout(out)
            out, cross_weights = self.cross_attention(self.norm2(x), src_mask, memory)
            x = x + self.dropout(out)
            x = x + self.dropout(self.feed_forward(self.norm3(x)))
        else:  # post-LN: LN(x + f(x))
            out, self_weights = self.self_attention(x, tgt_mask)
            x = self.norm1(x + self.dropout(out))
            out, cross_weights = self.cross_attention(x, src_mask, memory)
            x = self.norm2(x + self.dropout(out))
            x = self.norm3(x + self.dropout(self.feed_forward(x)))
        return x, self_weights, cross_weights


class Transformer(nn.Module):
    """The encoder-decoder: embeddings × √d_model plus sinusoidal positions, ``n_layers``
    encoder and decoder layers, and an output layer tied to the target embedding.

    The interface is chapter 7's :class:`mini_llm.seq2seq.Seq2Seq`'s: ``forward(src, tgt)``
    returns ``(logits, loss)`` with teacher forcing (the decoder reads <s> and the correct
    previous tokens), and :meth:`translate` decodes greedily. Id 0 is padding in both
    vocabularies. With ``norm_first`` (pre-LN) each stack ends with one more LayerNorm, since
    the residual stream itself is never normalised; ``dropout`` goes to every layer.
    """

    def __init__(
        self,
        source_size: int,
        target_size: int,
        bos_id: int,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        d_ff: int | None = None,
        max_len: int = 64,
        norm_first: bool = False,
        dropout: float = 0.0,
    ):
        super().__init__()
        self.bos_id, self.d_model = bos_id, d_model
        self.source_embedding = nn.Embedding(source_size, d_model, padding_idx=0)
        self.target_embedding = nn.Embedding(target_size, d_model, padding_idx=0)
        for embedding in (self.source_embedding, self.target_embedding):
            # std d^-1/2, so that the × √d_model of the forward pass gives unit-size vectors,
            # comparable with the positional encoding, and tied logits of a sensible size.
            nn.init.normal_(embedding.weight, std=d_model**-0.5)
            with torch.no_grad():
                embedding.weight[0].zero_()
        self.positions = PositionalEncoding(max_len, d_model)
        self.encoder_layers = nn.ModuleList(
            EncoderLayer(d_model, n_heads, d_ff, norm_first, dropout) for _ in range(n_layers)
        )
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(d_model, n_heads, d_ff, norm_first, dropout) for _ in range(n_layers)
        )
        self.encoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()
        self.decoder_norm = LayerNorm(d_model) if norm_first else nn.Identity()

    def _embed(self, embedding: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        return self.positions(embedding(ids) * math.sqrt(self.d_model))

    def encode(self, src: torch.Tensor):
        """The encoder's output (B, S, d) and the source mask (B, 1, S), True at real words."""
        src_mask = (src != 0)[:, None, :]
        x = self._embed(self.source_embedding, src)
        for layer in self.encoder_layers:
            x, _ = layer(x, src_mask)
        return self.encoder_norm(x), src_mask

    def decode(self, tgt_in: torch.Tensor, memory: torch.Tensor, src_mask: torch.Tensor):
        """Logits (B, T, V) for the next token at every position of ``tgt_in``, and the
        cross-attention weights of every layer (B, layers, heads, T, S)."""
        tgt_mask = causal_mask(tgt_in.size(1)).to(tgt_in.device)
        x = self._embed(self.target_embedding, tgt_in)
        maps = []
        for layer in self.decoder_layers:
            x, _, cross = layer(x, memory, src_mask, tgt_mask)
            maps.append(cross)
        logits = self.decoder_norm(x) @ self.target_embedding.weight.T  # tied output
        return logits, torch.stack(maps, dim=1)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor):
        tgt_in = torch.cat([torch.full_like(tgt[:, :1], self.bos_id), tgt[:, :-1]], dim=1)
        memory, src_mask = self.encode(src)
        logits, _ = self.decode(tgt_in, memory, src_mask)
        return logits, F.cross_entropy(logits.flatten(0, 1), tgt.flatten(), ignore_index=0)

    @torch.no_grad()
    def translate(self, src: torch.Tensor, eos: int, max_len: int = 8):
        """Greedy decoding: token ids (B, ≤ max_len) and the cross-attention weights with
        which each output was chosen (B, layers, heads, steps, S).

        The encoder runs once; the decoder re-reads its whole prefix at every step (no cache:
        the causal mask makes the earlier positions' results the same each time).
        """
        memory, src_mask = self.encode(src)
        tokens = torch.full((len(src), 1), self.bos_id, dtype=torch.long, device=src.device)
        for _ in range(max_len):
            logits, maps = self.decode(tokens, memory, src_mask)
            tokens = torch.cat([tokens, logits[:, -1].argmax(dim=-1, keepdim=True)], dim=1)
            if (tokens[:, 1:] == eos).any(dim=1).all():
                break
        return tokens[:, 1:], maps


def noam_learning_rate(step: int, d_model: int, warmup: int) -> float:
    """The paper's schedule: d_model^-0.5 · min(step^-0.5, step · warmup^-1.5).

    ``step`` counts updates from 1. The rate grows linearly for ``warmup`` steps, peaks at
    step = warmup (where both terms are equal) and then decays as 1/√step. The training loop
    offers it as ``TrainConfig(schedule="noam")`` (:mod:`mini_llm.engine.schedule`).
    """
    if step < 1 or d_model < 1 or warmup < 1:
        raise ValueError(f"need step, d_model and warmup >= 1, got {step}, {d_model}, {warmup}")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def transformer_parameter_count(
    vocab_size: int,
    d_model: int,
    d_ff: int,
    encoder_layers: int,
    decoder_layers: int,
    *,
    target_vocab_size: int | None = None,
    cross_attention: bool = True,
    learned_positions: int = 0,
    final_norms: int = 0,
) -> int:
    """The number of parameters of a Transformer, from its sizes alone.

    Per layer: each attention 4·d² + 4·d (Q, K, V, O with biases), the feed-forward network
    2·d·d_ff + d_ff + d, each LayerNorm 2·d. An encoder layer has one attention and two norms;
    a decoder layer two attentions and three norms (one and two with ``cross_attention=False``,
    a decoder-only model such as GPT). Embeddings: ``target_vocab_size`` None means one table
    shared by the source, the target and the output (the paper's); otherwise a source table of
    ``vocab_size`` and a target table of ``target_vocab_size`` tied to the output.
    ``learned_positions`` rows of a position table (0: sinusoidal) and ``final_norms`` extra
    LayerNorms (pre-LN stacks end with one each).
    """
    sizes = (
        vocab_size,
        d_model,
        d_ff,
        encoder_layers,
        decoder_layers,
        learned_positions,
        final_norms,
    )
    if min(sizes) < 0 or min(vocab_size, d_model, d_ff) < 1:
        raise ValueError(f"sizes must be positive integers, got {sizes}")
    attention = 4 * d_model * d_model + 4 * d_model
    ffn = 2 * d_model * d_ff + d_ff + d_model
    norm = 2 * d_model
    encoder_layer = attention + ffn + 2 * norm
    decoder_layer = attention + ffn + 2 * norm + (attention + norm if cross_attention else 0)
    embeddings = (vocab_size + (target_vocab_size or 0) + learned_positions) * d_model
    return (
        embeddings
        + encoder_layers * encoder_layer
        + decoder_layers * decoder_layer
        + final_norms * norm
    )
