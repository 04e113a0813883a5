"""The GPT model: shapes, causality, the two attention paths, parameter count, HF GPT-2 logits."""

from dataclasses import replace

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from mini_llm.gpt import (
    GPT,
    GPTConfig,
    causal_attention_weights,
    explicit_attention,
    parameter_count,
)
from mini_llm.hf_gpt2 import from_hf_gpt2

TINY = GPTConfig(vocab_size=11, block_size=16, n_layer=2, n_head=2, n_embd=24)


def tiny(**changes) -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(**{**TINY.__dict__, **changes})).eval()


def test_shapes_and_loss():
    model = tiny()
    idx = torch.randint(11, (3, 10))
    logits, loss = model(idx)
    assert logits.shape == (3, 10, 11) and loss is None
    targets = torch.randint(11, (3, 10))
    logits, loss = model(idx, targets)
    assert loss.shape == () and loss.item() == pytest.approx(
        torch.nn.functional.cross_entropy(logits.view(-1, 11), targets.view(-1)).item()
    )
    # An untrained model is close to uniform: loss near ln(vocab).
    assert abs(loss.item() - torch.log(torch.tensor(11.0)).item()) < 0.3


@pytest.mark.parametrize("attention", ["fused", "explicit"])
def test_changing_a_future_token_never_changes_earlier_logits(attention):
    model = tiny(attention=attention)
    idx = torch.randint(11, (2, 12))
    changed = idx.clone()
    changed[:, 7] = (changed[:, 7] + 1) % 11
    before, _ = model(idx)
    after, _ = model(changed)
    torch.testing.assert_close(before[:, :7], after[:, :7], rtol=0, atol=0)
    assert (before[:, 7:] - after[:, 7:]).abs().max() > 1e-4  # the change is seen from 7 on


def test_explicit_and_fused_attention_agree():
    fused, explicit = tiny(attention="fused"), tiny(attention="explicit")
    explicit.load_state_dict(fused.state_dict())
    idx = torch.randint(11, (2, 16))
    torch.testing.assert_close(fused(idx, idx)[0], explicit(idx, idx)[0], rtol=1e-5, atol=1e-5)
    fused(idx, idx)[1].backward()
    explicit(idx, idx)[1].backward()
    for (name, a), b in zip(fused.named_parameters(), explicit.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-4, atol=1e-6, msg=name)


def test_explicit_attention_is_the_formula():
    torch.manual_seed(1)
    q, k, v = (torch.randn(1, 1, 3, 4) for _ in range(3))
    scores = (q @ k.transpose(-2, -1))[0, 0] / 2.0  # √d_k = 2
    expected = torch.zeros(3, 4)
    for i in range(3):
        weights = torch.softmax(scores[i, : i + 1], dim=0)
        expected[i] = (weights[:, None] * v[0, 0, : i + 1]).sum(0)
    torch.testing.assert_close(explicit_attention(q, k, v)[0][0, 0], expected)


def test_attention_maps_are_causal_distributions_the_model_uses():
    model = tiny()  # fused attention: the maps must agree with PyTorch's kernel
    idx = torch.randint(11, (2, 9))
    maps = model.attention_maps(idx)
    assert len(maps) == 2 and maps[0].shape == (2, 2, 9, 9)
    for weights in maps:
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 9))
        assert torch.all(weights.triu(diagonal=1) == 0)  # nothing from the future
    # Mixing block 0's values with the map reproduces that block's attention output.
    block = model.blocks[0]
    x = block.ln_1(model.token_embedding(idx) + model.position_embedding(torch.arange(9)))
    _, _, v = block.attn.heads(x)
    mixed = (maps[0] @ v).transpose(1, 2).reshape(2, 9, 24)
    with torch.no_grad():
        torch.testing.assert_close(block.attn.proj(mixed), block.attn(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(11, 16, 2, 24), (65, 64, 4, 128), (3, 5, 1, 8)])
def test_parameter_count_matches_the_formula(shape, bias):
    V, T, L, d = shape
    model = GPT(
        GPTConfig(
            vocab_size=V,
            block_size=T,
            n_layer=L,
            n_head=2 if d % 2 == 0 else 1,
            n_embd=d,
            bias=bias,
        )
    )
    per_layer = 12 * d * d + (13 * d if bias else 2 * d)
    expected = V * d + T * d + L * per_layer + (2 * d if bias else d)
    assert model.num_parameters() == expected == model.config.parameter_count()


def test_output_head_is_tied_to_the_token_embedding():
    model = tiny()
    assert model.head.weight is model.token_embedding.weight


def test_a_context_longer_than_the_model_is_a_clear_error():
    model = tiny()
    with pytest.raises(ValueError, match=r"longer than the model's context \(block_size=16\)"):
        model(torch.zeros((1, 17), dtype=torch.long))


def test_bad_shapes_are_rejected_with_a_reason():
    with pytest.raises(ValueError, match="divisible by n_head"):
        GPTConfig(n_embd=30, n_head=4)
    with pytest.raises(ValueError, match="activation must be one of"):
        GPTConfig(activation="swish")


HF_CONFIGS = [
    # GPT-2's default activation, gelu_new
    {"vocab_size": 50, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4},
    {
        "vocab_size": 71,
        "n_positions": 24,
        "n_embd": 48,
        "n_layer": 3,
        "n_head": 3,
        "activation_function": "gelu",
    },
    {
        "vocab_size": 97,
        "n_positions": 32,
        "n_embd": 64,
        "n_layer": 1,
        "n_head": 8,
        "layer_norm_epsilon": 1e-6,
    },
]


@pytest.mark.parametrize("settings", HF_CONFIGS)
def test_logits_equal_hugging_face_gpt2(settings):
    torch.manual_seed(0)
    hf = GPT2LMHeadModel(GPT2Config(**settings, bos_token_id=0, eos_token_id=0)).eval()
    with torch.no_grad():  # the default init has zero biases and unit norms; make them count
        for name, tensor in hf.named_parameters():
            if name.endswith("bias") or "ln" in name:
                tensor.add_(0.1 * torch.randn_like(tensor))
    fused = from_hf_gpt2(hf).eval()
    explicit = GPT(replace(fused.config, attention="explicit")).eval()
    explicit.load_state_dict(fused.state_dict())
    idx = torch.randint(settings["vocab_size"], (2, settings["n_positions"]))
    with torch.no_grad():
        expected = hf(idx).logits
        for ours in (fused, explicit):
            assert (ours(idx)[0] - expected).abs().max().item() <= 1e-4


def test_hugging_face_features_the_course_model_lacks_are_refused():
    hf = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=10,
            n_positions=8,
            n_embd=8,
            n_layer=1,
            n_head=2,
            activation_function="relu",
            bos_token_id=0,
            eos_token_id=0,
        )
    )
    with pytest.raises(ValueError, match="activation_function"):
        from_hf_gpt2(hf)


@pytest.mark.parametrize("bias", [True, False])
def test_module_level_parameter_count_is_the_configs(bias):
    config = GPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128, bias=bias)
    assert parameter_count(65, 64, 4, 128, bias) == config.parameter_count()
    assert parameter_count(65, 64, 4, 128, bias) == GPT(config).num_parameters()


@pytest.mark.parametrize("offset", [0, 1, 5])
def test_causal_attention_weights_with_a_cache_offset_are_the_last_rows(offset):
    """New queries after ``offset`` cached tokens get the last rows of the full causal map."""
    torch.manual_seed(2)
    q, k = torch.randn(2, 3, 8, 4), torch.randn(2, 3, 8, 4)
    full = causal_attention_weights(q, k)
    torch.testing.assert_close(full.sum(-1), torch.ones(2, 3, 8))
    assert torch.all(full.triu(diagonal=1) == 0) and torch.all(full.diagonal(dim1=-2, dim2=-1) > 0)
    torch.testing.assert_close(
        causal_attention_weights(q[:, :, offset:], k, offset), full[..., offset:, :]
    )
    with pytest.raises(ValueError, match="keys"):
        causal_attention_weights(q[:, :, offset:], k, offset + 1)
