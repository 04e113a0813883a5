"""The oneDNN-backed Linear computes what nn.Linear computes: values and all three gradients."""

import pytest
import torch

from mini_llm import cpu_linear
from mini_llm.cpu_linear import Linear, onednn_available, uses_onednn
from mini_llm.gpt import GPT, GPTConfig

# Products big enough for oneDNN: 12·64 rows of 128 features into 384.
ROWS_SHAPE, IN, OUT = (12, 64), 128, 384


def reference_and_ours(bias: bool, seed=0):
    torch.manual_seed(seed)
    ours = Linear(IN, OUT, bias=bias)
    reference = torch.nn.Linear(IN, OUT, bias=bias)
    reference.load_state_dict(ours.state_dict())
    return reference, ours


def forward_backward(layer, x, upstream):
    x = x.detach().clone().requires_grad_(True)
    y = layer(x)
    (y * upstream).sum().backward()
    grads = [x.grad] + [p.grad for p in layer.parameters()]
    return y.detach(), grads


def test_the_fast_path_is_taken_on_this_machine_for_large_float32_products():
    x, weight = torch.randn(*ROWS_SHAPE, IN), torch.randn(OUT, IN)
    assert uses_onednn(x, weight) == onednn_available()
    assert onednn_available(), "this PyTorch build has no oneDNN: the GPT's fast path is missing"


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("transposed_input", [False, True])
def test_values_and_gradients_equal_nn_linear(bias, transposed_input):
    reference, ours = reference_and_ours(bias)
    x = torch.randn(*ROWS_SHAPE, IN)
    if transposed_input:  # a non-contiguous view, as attention's output can be
        x = torch.randn(ROWS_SHAPE[1], ROWS_SHAPE[0], IN).transpose(0, 1)
    upstream = torch.randn(*ROWS_SHAPE, OUT)
    y_ref, grads_ref = forward_backward(reference, x, upstream)
    y, grads = forward_backward(ours, x, upstream)
    assert y.shape == y_ref.shape
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    for name, got, expected in zip(["input", "weight", "bias"], grads, grads_ref, strict=False):
        assert got.shape == expected.shape, name
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4, msg=name)


def test_small_products_other_dtypes_and_autocast_use_plain_linear():
    weight = torch.randn(OUT, IN)
    assert not uses_onednn(torch.randn(1, IN), weight)  # one token in generation
    assert not uses_onednn(torch.randn(*ROWS_SHAPE, IN, dtype=torch.float64),
                           weight.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not uses_onednn(torch.randn(*ROWS_SHAPE, IN), weight)
    # ...and they still compute the right thing, here in float64 against the formula.
    layer = Linear(IN, OUT).double()
    x = torch.randn(3, IN, dtype=torch.float64)
    torch.testing.assert_close(layer(x), x @ layer.weight.T + layer.bias)


def test_gpt_gradients_are_the_same_with_and_without_onednn(monkeypatch):
    """The whole model, tied embedding/head included, trains on the same gradients."""
    config = GPTConfig(vocab_size=82, block_size=64, n_layer=2, n_head=4, n_embd=128)
    torch.manual_seed(0)
    x = torch.randint(82, (12, 64))
    y = torch.roll(x, -1, dims=1)

    def gradients(use_onednn: bool):
        monkeypatch.setattr(cpu_linear, "_ONEDNN", use_onednn)
        torch.manual_seed(1)
        model = GPT(config)
        _, loss = model(x, y)
        loss.backward()
        return loss.item(), {n: p.grad for n, p in model.named_parameters()}

    loss_fast, fast = gradients(True)
    loss_plain, plain = gradients(False)
    assert loss_fast == pytest.approx(loss_plain, rel=1e-6)
    assert fast.keys() == plain.keys()
    for name in fast:
        torch.testing.assert_close(fast[name], plain[name], rtol=1e-4, atol=1e-5, msg=name)


def test_compiled_linear_matches_eager():
    reference, ours = reference_and_ours(bias=True)
    x = torch.randn(*ROWS_SHAPE, IN)
    upstream = torch.randn(*ROWS_SHAPE, OUT)
    y_ref, grads_ref = forward_backward(reference, x, upstream)
    y, grads = forward_backward(torch.compile(ours, fullgraph=True), x, upstream)
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    for got, expected in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)

