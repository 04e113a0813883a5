"""mini_llm.transformer against PyTorch's own layers on the same weights, and its counts."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mini_llm.self_attention import MultiHeadAttention, multi_head_attention, padding_mask
from mini_llm.seq2seq import BOS, EOS, encode_batch, exact_match, number_to_words, vocabularies
from mini_llm.transformer import (
    DecoderLayer,
    EncoderLayer,
    LayerNorm,
    PositionWiseFeedForward,
    Transformer,
    attention_sublayer,
    feed_forward,
    layer_norm,
    noam_learning_rate,
    transformer_parameter_count,
)

D, H, D_FF = 16, 4, 40


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors: one thread is fastest, and on a busy machine several can be far slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _pairs(count: int, seed: int, max_value: int = 999_999):
    """(words, digits) pairs of chapter 7's task, for random numbers up to ``max_value``."""
    numbers = np.random.default_rng(seed).integers(0, max_value + 1, size=count)
    return [(number_to_words(int(n)), list(str(n))) for n in numbers]


def _randomise(module: nn.Module, seed: int = 0) -> None:
    """Every parameter random (LayerNorm's γ = 1, β = 0 would hide mistakes in copying)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.3 + (p.dim() == 1))


def test_layer_norm_equals_pytorch():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, 7, generator=g, dtype=torch.float64) * 4 + 2
    gamma, beta = (
        torch.randn(7, generator=g, dtype=torch.float64),
        torch.randn(7, generator=g, dtype=torch.float64),
    )
    for eps in (1e-5, 0.5):
        expected = F.layer_norm(x, (7,), gamma, beta, eps)
        assert (layer_norm(x, gamma, beta, eps) - expected).abs().max() < 1e-12
    norm = LayerNorm(7).double()
    out = norm(x)
    assert torch.allclose(out.mean(-1), torch.zeros(3, 5, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(
        out.var(-1, unbiased=False), torch.ones(3, 5, dtype=torch.float64), atol=1e-4
    )
    with pytest.raises(ValueError, match="gamma and beta"):
        layer_norm(x, gamma[:3], beta)


def test_feed_forward_is_per_position():
    ffn = PositionWiseFeedForward(D)
    assert ffn.linear1.out_features == 4 * D  # d_ff = 4 d by default
    x = torch.randn(2, 6, D)
    expected = ffn.linear2(torch.relu(ffn.linear1(x)))
    assert torch.allclose(ffn(x), expected, atol=1e-6)
    # position 3 alone gives the same output as inside the sequence
    assert torch.allclose(ffn(x[:, 3:4]), ffn(x)[:, 3:4], atol=1e-6)
    w1, b1, w2, b2 = (p.detach() for p in ffn.parameters())
    assert torch.equal(feed_forward(x, w1, b1, w2, b2), ffn(x))


def _copy_attention(ours: MultiHeadAttention, theirs: nn.MultiheadAttention) -> None:
    with torch.no_grad():
        theirs.in_proj_weight.copy_(torch.cat([ours.q.weight, ours.k.weight, ours.v.weight]))
        theirs.in_proj_bias.copy_(torch.cat([ours.q.bias, ours.k.bias, ours.v.bias]))
        theirs.out_proj.weight.copy_(ours.o.weight)
        theirs.out_proj.bias.copy_(ours.o.bias)


def _copy_common(ours, theirs, norms) -> None:
    _copy_attention(ours.self_attention, theirs.self_attn)
    with torch.no_grad():
        for name in ("linear1", "linear2"):
            getattr(theirs, name).weight.copy_(getattr(ours.feed_forward, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours.feed_forward, name).bias)
        for name in norms:
            getattr(theirs, name).weight.copy_(getattr(ours, name).weight)
            getattr(theirs, name).bias.copy_(getattr(ours, name).bias)


def _torch_layer(cls, norm_first):
    layer = cls(
        D,
        H,
        dim_feedforward=D_FF,
        dropout=0.0,
        activation="relu",
        batch_first=True,
        norm_first=norm_first,
    )
    return layer.train()  # train mode: no fast path (dropout is 0 anyway)


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_equals_pytorch(norm_first):
    ours = EncoderLayer(D, H, D_FF, norm_first=norm_first)
    _randomise(ours)
    theirs = _torch_layer(nn.TransformerEncoderLayer, norm_first)
    _copy_common(ours, theirs, ("norm1", "norm2"))
    x = torch.randn(3, 7, D, generator=torch.Generator().manual_seed(2))
    real = padding_mask(torch.tensor([7, 5, 2]), 7)
    out, weights = ours(x, real[:, None, :])
    expected = theirs(x, src_key_padding_mask=~real)  # PyTorch: True = padding
    assert (out - expected).abs().max() <= 1e-5
    assert weights.shape == (3, H, 7, 7)
    assert weights[1, :, :, 5:].abs().max() == 0  # nobody reads the padding


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_equals_pytorch(norm_first):
    ours = DecoderLayer(D, H, D_FF, norm_first=norm_first)
    _randomise(ours, seed=3)
    theirs = _torch_layer(nn.TransformerDecoderLayer, norm_first)
    _copy_common(ours, theirs, ("norm1", "norm2", "norm3"))
    _copy_attention(ours.cross_attention, theirs.multihead_attn)
    g = torch.Generator().manual_seed(4)
    x, memory = torch.randn(3, 5, D, generator=g), torch.randn(3, 7, D, generator=g)
    real = padding_mask(torch.tensor([7, 4, 1]), 7)
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    out, self_weights, cross = ours(x, memory, real[:, None, :], causal)
    expected = theirs(x, memory, tgt_mask=~causal, memory_key_padding_mask=~real)
    assert (out - expected).abs().max() <= 1e-5
    assert self_weights[:, :, 0, 1:].abs().max() == 0  # position 0 reads only itself
    assert cross.shape == (3, H, 5, 7) and cross[2, :, :, 1:].abs().max() == 0


def test_cross_attention_reads_keys_from_the_source():
    g = torch.Generator().manual_seed(5)
    x, source = torch.randn(2, 3, 8, generator=g), torch.randn(2, 6, 8, generator=g)
    W_q, W_k, W_v, W_o = (torch.randn(8, 8, generator=g) for _ in range(4))
    gamma, beta = torch.randn(8, generator=g), torch.randn(8, generator=g)
    out, weights = multi_head_attention(x, W_q, W_k, W_v, W_o, 2, source=source)
    assert out.shape == (2, 3, 8) and weights.shape == (2, 2, 3, 6)
    reference = nn.MultiheadAttention(8, 2, bias=False, batch_first=True)
    with torch.no_grad():
        reference.in_proj_weight.copy_(torch.cat([W_q, W_k, W_v]))
        reference.out_proj.weight.copy_(W_o)
    assert (out - reference(x, source, source)[0]).abs().max() < 1e-5
    post = attention_sublayer(x, source, W_q, W_k, W_v, W_o, gamma, beta, 2)
    assert torch.allclose(post, F.layer_norm(x + out, (8,), gamma, beta), atol=1e-5)
    pre = attention_sublayer(x, source, W_q, W_k, W_v, W_o, gamma, beta, 2, norm_first=True)
    normed = F.layer_norm(x, (8,), gamma, beta)
    expected = x + multi_head_attention(normed, W_q, W_k, W_v, W_o, 2, source=source)[0]
    assert torch.allclose(pre, expected, atol=1e-5)


def _model(norm_first=False, seed=0):
    source, target = vocabularies()
    torch.manual_seed(seed)
    model = Transformer(
        len(source),
        len(target),
        target.stoi[BOS],
        d_model=32,
        n_heads=4,
        n_layers=2,
        norm_first=norm_first,
    )
    return model, source, target


def test_model_embeds_scaled_and_ties_the_output():
    model, source, target = _model()
    assert model.target_embedding.weight is not None
    output_weights = [p for p in model.parameters() if p.shape == (len(target), 32)]
    assert len(output_weights) == 1  # the output layer is the target embedding itself
    src, _ = encode_batch(_pairs(4, 0), source, target)
    # the first encoder layer reads the embeddings x sqrt(d) plus the positions
    seen = []
    hook = model.encoder_layers[0].register_forward_pre_hook(lambda m, args: seen.append(args[0]))
    model.encode(src)
    hook.remove()
    expected = (
        model.source_embedding(src) * math.sqrt(32) + model.positions.table_values[: src.size(1)]
    )
    assert torch.allclose(seen[0], expected)


@pytest.mark.parametrize("norm_first", [False, True])
def test_parameter_count_equals_numel(norm_first):
    model, source, target = _model(norm_first)
    counted = transformer_parameter_count(
        len(source),
        32,
        128,
        2,
        2,
        target_vocab_size=len(target),
        final_norms=2 if norm_first else 0,
    )
    assert counted == sum(p.numel() for p in model.parameters())


def test_parameter_count_of_published_models():
    # Transformer base (Vaswani et al. 2017, table 3): 65 million, shared 37,000-token vocabulary
    base = transformer_parameter_count(37_000, 512, 2048, 6, 6)
    assert 60e6 < base < 66e6
    # V d + 4 d^2 per attention (6 encoder + 2 x 6 decoder) + 2 d d_ff per layer (12): the rest
    # (biases, norms) is under 0.2 %
    leading = 37_000 * 512 + 4 * (6 + 2 * 6) * 512**2 + 2 * 12 * 512 * 2048
    assert abs(base - leading) / base < 2e-3
    # GPT-3 (Brown et al. 2020): 175 billion; 96 decoder layers without cross-attention
    gpt3 = transformer_parameter_count(
        50_257,
        12_288,
        4 * 12_288,
        0,
        96,
        cross_attention=False,
        learned_positions=2048,
        final_norms=1,
    )
    assert 174e9 < gpt3 < 176e9
    leading = 50_257 * 12_288 + 4 * 96 * 12_288**2 + 2 * 96 * 12_288 * 4 * 12_288
    assert abs(gpt3 - leading) / gpt3 < 1e-3
    # against a real torch module, decoder-only: nn.TransformerEncoderLayer has the same layout
    layers = nn.ModuleList(nn.TransformerEncoderLayer(24, 4, 96) for _ in range(3))
    tables = nn.Embedding(50, 24).weight.numel() + nn.Embedding(10, 24).weight.numel()
    expected = sum(p.numel() for p in layers.parameters()) + tables + 2 * 24
    assert (
        transformer_parameter_count(
            50, 24, 96, 0, 3, cross_attention=False, learned_positions=10, final_norms=1
        )
        == expected
    )
    with pytest.raises(ValueError, match="positive"):
        transformer_parameter_count(0, 512, 2048, 6, 6)


def test_noam_schedule():
    d, warmup = 512, 4000
    rates = [noam_learning_rate(s, d, warmup) for s in range(1, 20_001)]
    peak = int(np.argmax(rates)) + 1
    assert peak == warmup
    assert rates[0] == pytest.approx(d**-0.5 * warmup**-1.5)
    assert rates[warmup - 1] == pytest.approx(d**-0.5 * warmup**-0.5)
    assert rates[1] == pytest.approx(2 * rates[0])  # linear growth
    assert rates[4 * warmup - 1] == pytest.approx(rates[warmup - 1] / 2)  # 1/sqrt(step) decay
    with pytest.raises(ValueError):
        noam_learning_rate(0, d, warmup)


def test_padding_does_not_change_a_row():
    model, source, target = _model()
    model.eval()
    pairs = _pairs(5, 3)
    src, tgt = encode_batch(pairs, source, target)
    alone_src, alone_tgt = encode_batch(pairs[:1], source, target)
    logits, _ = model(src, tgt)
    alone, _ = model(alone_src, alone_tgt)
    assert torch.allclose(logits[0, : alone.size(1)], alone[0], atol=1e-5)


@pytest.mark.parametrize("norm_first", [False, True])
def test_model_learns_and_translates(norm_first):
    model, source, target = _model(norm_first)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3)
    src, tgt = encode_batch(_pairs(16, 0, max_value=99), source, target)
    first = model(src, tgt)[1].item()
    for _ in range(150):  # memorise one batch: the loss must fall far
        loss = model(src, tgt)[1]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    assert loss.item() < 0.1 * first
    eos = target.stoi[EOS]
    tokens, maps = model.translate(src, eos)
    assert exact_match(tokens, tgt, eos) > 0.9
    assert maps.shape == (16, 2, 4, tokens.size(1), src.size(1))
    assert torch.allclose(maps.sum(-1), torch.ones_like(maps.sum(-1)), atol=1e-5)
    padded = (src == 0)[:, None, None, None, :].expand_as(maps)
    assert maps[padded].abs().max() == 0  # no head reads padding
