"""Chapter 14's LoRA: a frozen weight plus a trainable low-rank update, merged back at the end."""

import pytest
import torch
from torch import nn

from mini_llm import lora
from mini_llm.gpt import GPT, GPTConfig

CONFIG = GPTConfig(vocab_size=20, block_size=16, n_layer=2, n_head=2, n_embd=16)


def small_gpt(seed=0):
    torch.manual_seed(seed)
    return GPT(CONFIG).eval()


def ids(seed=1):
    return torch.randint(CONFIG.vocab_size, (3, 12), generator=torch.Generator().manual_seed(seed))


def kick(model, seed=2):
    """Give every B a nonzero value, as training would."""
    generator = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, lora.LoRALinear):
            module.B.data = 0.1 * torch.randn(module.B.shape, generator=generator)


def test_a_lora_layer_starts_as_its_base_and_keeps_the_base_frozen():
    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    layer = lora.LoRALinear(base, rank=2, alpha=4.0)
    x = torch.randn(4, 6)
    assert torch.equal(layer(x), base(x))
    assert layer.A.shape == (2, 6) and layer.B.shape == (5, 2)
    assert layer.A.abs().sum() > 0 and layer.scaling == 2.0
    assert not base.weight.requires_grad and not base.bias.requires_grad


def test_the_update_is_scaled_b_times_a():
    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    layer = lora.LoRALinear(base, rank=3, alpha=1.5)
    layer.B.data = torch.randn(5, 3)
    x = torch.randn(4, 6)
    expected = base(x) + 0.5 * x @ (layer.B @ layer.A).T
    assert torch.allclose(layer(x), expected, atol=1e-6)
    assert torch.linalg.matrix_rank(layer.delta_weight()) <= 3


def test_rank_must_be_positive():
    with pytest.raises(ValueError, match="rank"):
        lora.LoRALinear(nn.Linear(3, 3), rank=0)


def test_the_adapted_gpt_equals_the_base_at_init():
    model = small_gpt()
    before = model(ids())[0]
    names = lora.add_lora(model, rank=2)
    assert len(names) == 4 * CONFIG.n_layer
    assert all(isinstance(model.get_submodule(name), lora.LoRALinear) for name in names)
    assert torch.equal(model(ids())[0], before)


def test_only_a_and_b_get_gradients():
    model = small_gpt()
    lora.add_lora(model, rank=2)
    kick(model)
    x = ids()
    model(x, targets=x)[1].backward()
    for name, parameter in model.named_parameters():
        is_lora = name.endswith((".A", ".B"))
        assert parameter.requires_grad == is_lora, name
        assert (parameter.grad is not None) == is_lora, name
        if is_lora:
            assert parameter.grad.abs().sum() > 0, name


def test_b_at_zero_still_gets_a_gradient_and_a_does_not():
    """Why B, not A, starts at zero: the gradient reaches B through A x."""
    model = small_gpt()
    lora.add_lora(model, rank=2)
    x = ids()
    model(x, targets=x)[1].backward()
    layer = model.blocks[0].attn.qkv
    assert layer.B.grad.abs().sum() > 0
    assert torch.count_nonzero(layer.A.grad) == 0


def test_merged_logits_equal_adapted_logits():
    model = small_gpt()
    lora.add_lora(model, rank=3, alpha=6.0)
    kick(model)
    adapted = model(ids())[0]
    assert not torch.allclose(adapted, small_gpt()(ids())[0], atol=1e-4)  # it did change
    lora.merge_lora(model)
    assert not any(isinstance(m, lora.LoRALinear) for m in model.modules())
    assert type(model.blocks[0].mlp.fc) is nn.Linear
    assert torch.allclose(model(ids())[0], adapted, atol=1e-5)


def test_merged_weight_is_w_plus_scaled_b_a():
    torch.manual_seed(0)
    layer = lora.LoRALinear(nn.Linear(4, 3, bias=False), rank=2, alpha=2.0)
    layer.B.data = torch.randn(3, 2)
    merged = layer.merged()
    assert merged.bias is None
    assert torch.allclose(merged.weight, layer.base.weight + layer.B @ layer.A)


@pytest.mark.parametrize("rank", [1, 4, 16])
def test_the_parameter_count_formula(rank):
    model = small_gpt()
    full = lora.trainable_parameters(model)
    assert full == CONFIG.parameter_count()
    lora.add_lora(model, rank=rank)
    expected = CONFIG.n_layer * 16 * rank * CONFIG.n_embd
    assert lora.trainable_parameters(model) == lora.lora_parameter_count(CONFIG, rank) == expected


def test_targets_choose_the_wrapped_layers():
    model = small_gpt()
    names = lora.add_lora(model, rank=2, targets=("attn.qkv",))
    assert names == [f"blocks.{i}.attn.qkv" for i in range(CONFIG.n_layer)]
    assert lora.trainable_parameters(model) == lora.lora_parameter_count(CONFIG, 2, ("attn.qkv",))
    assert type(model.head) is nn.Linear  # the tied head is never wrapped
    with pytest.raises(ValueError, match="no nn.Linear"):
        lora.add_lora(small_gpt(), targets=("nothing",))
