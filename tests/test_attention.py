"""mini_llm.self_attention against PyTorch's own attention, and the GPT built on the same formula."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mini_llm.gpt import GPT, CausalSelfAttention, GPTConfig
from mini_llm.self_attention import (
    MultiHeadAttention,
    PositionalEncoding,
    causal_mask,
    combine_heads,
    multi_head_attention,
    padding_mask,
    scaled_dot_product_attention,
    sinusoidal_positional_encoding,
    split_heads,
)


def _qkv(*batch, T=5, S=7, d_k=8, d_v=6, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(*batch, T, d_k, generator=g, dtype=dtype),
        torch.randn(*batch, S, d_k, generator=g, dtype=dtype),
        torch.randn(*batch, S, d_v, generator=g, dtype=dtype),
    )


# ------------------------------------------------------------------ scaled dot-product attention


@pytest.mark.parametrize("batch", [(), (3,), (2, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_equals_pytorch_without_mask(batch, dtype):
    q, k, v = _qkv(*batch, dtype=dtype)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (*batch, 5, 6) and weights.shape == (*batch, 5, 7)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-6)
    torch.testing.assert_close(weights.sum(-1), torch.ones(*batch, 5, dtype=dtype))


def test_equals_pytorch_with_causal_padding_and_combined_masks():
    q, k, v = _qkv(3, T=6, S=6)
    padding = padding_mask(torch.tensor([6, 4, 2]), 6)
    masks = {
        "causal": causal_mask(6),
        "padding": padding[:, None, :],
        "combined": causal_mask(6, padding),
    }
    for name, mask in masks.items():
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        # PyTorch's boolean attn_mask has the course's convention: True = may attend.
        expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        assert (out - expected).abs().max() <= 1e-6, name
        assert (weights[~mask.expand_as(weights)] == 0).all(), name
    causal_out = scaled_dot_product_attention(q, k, v, causal_mask(6))[0]
    torch.testing.assert_close(
        causal_out, F.scaled_dot_product_attention(q, k, v, is_causal=True), rtol=0, atol=1e-6
    )


def test_a_float_mask_is_added_to_the_scores():
    q, k, v = _qkv(2, T=4, S=4)
    bias = -0.5 * (torch.arange(4)[:, None] - torch.arange(4)[None, :]).abs().double()
    out, _ = scaled_dot_product_attention(q, k, v, bias)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    assert (out - expected).abs().max() <= 1e-6


def test_a_fully_masked_row_gives_zeros_not_nan_also_in_the_gradient():
    q, k, v = _qkv(1, T=3, S=4)
    q.requires_grad_(True)
    mask = torch.tensor(
        [[True, True, False, False], [False, False, False, False], [True, False, True, True]]
    )
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not out.isnan().any() and not weights.isnan().any()
    assert (out[0, 1] == 0).all() and (weights[0, 1] == 0).all()
    torch.testing.assert_close(weights[0, [0, 2]].sum(-1), torch.ones(2, dtype=torch.float64))
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    out.sum().backward()
    assert not q.grad.isnan().any()
    # The -1e9 alternative is defined but attends uniformly to forbidden values.
    big_negative = torch.softmax((q @ k.transpose(-2, -1)).masked_fill(~mask, -1e9), -1)
    torch.testing.assert_close(big_negative[0, 1], torch.full((4,), 0.25, dtype=torch.float64))


def test_scaling_divides_by_the_square_root_of_d_k():
    q, k, v = _qkv(T=2, S=3, d_k=16)
    _, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(weights, torch.softmax(q @ k.T / 4.0, dim=-1))
    assert not torch.allclose(weights, torch.softmax(q @ k.T, dim=-1))


def test_bad_shapes_are_reported():
    q, k, v = _qkv(T=2, S=3, d_k=4)
    with pytest.raises(ValueError, match="d_k"):
        scaled_dot_product_attention(q, k[:, :3], v)
    with pytest.raises(ValueError, match="values"):
        scaled_dot_product_attention(q, k, v[:2])


# --------------------------------------------------------------------------------------- masks


def test_causal_mask_sees_the_past_and_itself():
    mask = causal_mask(4)
    assert mask.dtype == torch.bool
    assert mask.tolist() == [
        [True, False, False, False],
        [True, True, False, False],
        [True, True, True, False],
        [True, True, True, True],
    ]
    with pytest.raises(ValueError):
        causal_mask(-1)


def test_padding_and_combined_masks():
    padding = padding_mask(torch.tensor([3, 1]), 4)
    assert padding.tolist() == [[True, True, True, False], [True, False, False, False]]
    combined = causal_mask(4, padding)
    assert combined.shape == (2, 4, 4)
    assert combined[0, 3].tolist() == [True, True, True, False]  # padded key hidden
    assert combined[1, 2].tolist() == [True, False, False, False]
    assert combined[0, 1].tolist() == [True, True, False, False]  # the future hidden
    with pytest.raises(ValueError):
        padding_mask(torch.tensor([5]), 4)
    with pytest.raises(ValueError):
        causal_mask(4, padding[:, :3])


# --------------------------------------------------------------------------------------- heads


def test_split_heads_gives_each_head_a_block_of_features():
    x = torch.arange(2 * 3 * 8).reshape(2, 3, 8)
    heads = split_heads(x, 4)
    assert heads.shape == (2, 4, 3, 2)
    assert torch.equal(heads[1, 2, 0], x[1, 0, 4:6])  # head 2, position 0: features 4 and 5
    assert torch.equal(combine_heads(heads), x)
    with pytest.raises(ValueError, match="divisible"):
        split_heads(x, 3)


def _torch_mha(d, heads, bias, seed=0):
    torch.manual_seed(seed)
    reference = nn.MultiheadAttention(d, heads, bias=bias, batch_first=True).double()
    ours = MultiHeadAttention(d, heads, bias=bias).double()
    W_q, W_k, W_v = reference.in_proj_weight.chunk(3)
    with torch.no_grad():
        for layer, weight in zip((ours.q, ours.k, ours.v), (W_q, W_k, W_v), strict=True):
            layer.weight.copy_(weight)
        ours.o.weight.copy_(reference.out_proj.weight)
        if bias:
            for layer, b in zip(
                (ours.q, ours.k, ours.v), reference.in_proj_bias.chunk(3), strict=True
            ):
                layer.bias.copy_(b)
            ours.o.bias.copy_(reference.out_proj.bias)
    return reference, ours


@pytest.mark.parametrize("heads", [1, 2, 4])
def test_multi_head_attention_equals_pytorch(heads):
    reference, ours = _torch_mha(8, heads, bias=False)
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    lengths = torch.tensor([5, 3, 1])
    mask = causal_mask(5, padding_mask(lengths, 5))
    # nn.MultiheadAttention's boolean masks mean the opposite: True = NOT allowed.
    expected, expected_weights = reference(
        x,
        x,
        x,
        attn_mask=~causal_mask(5),
        key_padding_mask=~padding_mask(lengths, 5),
        average_attn_weights=False,
    )
    W_q, W_k, W_v = reference.in_proj_weight.chunk(3)
    out, weights = multi_head_attention(x, W_q, W_k, W_v, reference.out_proj.weight, heads, mask)
    assert (out - expected).abs().max() <= 1e-6
    assert (weights - expected_weights).abs().max() <= 1e-6
    module_out, _ = ours(x, mask)
    assert (module_out - expected).abs().max() <= 1e-6


def test_the_module_with_biases_equals_pytorch():
    reference, ours = _torch_mha(12, 3, bias=True)
    x = torch.randn(2, 4, 12, dtype=torch.float64)
    expected = reference(x, x, x, need_weights=False)[0]
    assert (ours(x)[0] - expected).abs().max() <= 1e-6


@pytest.mark.parametrize("heads", [1, 2, 4, 8])
def test_parameters_are_four_d_squared_for_any_number_of_heads(heads):
    module = MultiHeadAttention(64, heads, bias=False)
    assert sum(p.numel() for p in module.parameters()) == 4 * 64 * 64


# ------------------------------------------------------------------------------------ positions


def test_sinusoidal_table_values():
    pe = sinusoidal_positional_encoding(50, 16)
    assert pe.shape == (50, 16) and pe.dtype == torch.float32
    assert torch.equal(pe[0], torch.tensor([0.0, 1.0] * 8))
    p, i = 7, 3
    angle = p / 10000 ** (2 * i / 16)
    assert pe[p, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
    assert pe[p, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)
    assert sinusoidal_positional_encoding(5, 7).shape == (5, 7)  # odd width: last column sin
    with pytest.raises(ValueError):
        sinusoidal_positional_encoding(5, 0)


def test_dot_product_of_two_positions_depends_only_on_their_distance():
    pe = sinusoidal_positional_encoding(200, 32).double()
    for k in (1, 5, 40):
        dots = (pe[:-k] * pe[k:]).sum(-1)
        assert dots.std() < 1e-5
        assert dots[0].item() != pytest.approx((pe[0] * pe[0]).sum().item())


def test_positional_encoding_module():
    x = torch.zeros(2, 6, 8)
    sinusoidal = PositionalEncoding(10, 8)
    torch.testing.assert_close(sinusoidal(x)[1], sinusoidal_positional_encoding(6, 8))
    torch.testing.assert_close(
        sinusoidal(x[:, :2], start=4)[0], sinusoidal_positional_encoding(6, 8)[4:]
    )
    assert not list(sinusoidal.parameters())
    learned = PositionalEncoding(10, 8, learned=True)
    assert sum(p.numel() for p in learned.parameters()) == 80
    with pytest.raises(ValueError, match="table holds 10"):
        sinusoidal(torch.zeros(1, 11, 8))


# ---------------------------------------------------------------- the GPT uses the same attention


@pytest.mark.parametrize("kind", ["fused", "explicit"])
def test_gpt_attention_is_split_heads_attention_combine_heads(kind):
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=1, n_head=4, n_embd=16, attention=kind)
    torch.manual_seed(0)
    attention = CausalSelfAttention(config).double().eval()
    x = torch.randn(2, 6, 16, dtype=torch.float64)
    q, k, v = attention.qkv(x).chunk(3, dim=-1)
    out, _ = scaled_dot_product_attention(
        split_heads(q, 4), split_heads(k, 4), split_heads(v, 4), causal_mask(6)
    )
    expected = attention.proj(combine_heads(out))
    assert (attention(x) - expected).abs().max() <= 1e-6
    W_q, W_k, W_v = attention.qkv.weight.chunk(3)
    b_q, b_k, b_v = attention.qkv.bias.chunk(3)
    # Same thing through the module with the GPT's weights copied in.
    module = MultiHeadAttention(16, 4).double()
    with torch.no_grad():
        for layer, w, b in (
            (module.q, W_q, b_q),
            (module.k, W_k, b_k),
            (module.v, W_v, b_v),
            (module.o, attention.proj.weight, attention.proj.bias),
        ):
            layer.weight.copy_(w)
            layer.bias.copy_(b)
    assert (module(x, causal_mask(6))[0] - attention(x)).abs().max() <= 1e-6


def test_gpt_positions_and_attention_maps_are_the_package_ones():
    config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8)
    torch.manual_seed(1)
    gpt = GPT(config).eval()
    idx = torch.randint(0, 11, (2, 5))
    positions = PositionalEncoding(8, 8, learned=True)
    positions.table.weight.data.copy_(gpt.position_embedding.weight)
    x = positions(gpt.token_embedding(idx))
    block = gpt.blocks[0]
    q, k, v = block.attn.qkv(block.ln_1(x)).chunk(3, dim=-1)
    _, weights = scaled_dot_product_attention(
        split_heads(q, 2), split_heads(k, 2), split_heads(v, 2), causal_mask(5)
    )
    torch.testing.assert_close(gpt.attention_maps(idx)[0], weights, rtol=0, atol=1e-6)
