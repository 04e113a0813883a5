"""The oneDNN-backed Linear: when it is used, and that it computes what nn.Linear computes."""

import platform

import pytest
import torch
from torch.func import functional_call, grad, vmap

from mini_llm.engine import cpu_linear
from mini_llm.engine.cpu_linear import Decision, Linear, onednn_available, uses_onednn
from mini_llm.gpt import GPT, GPTConfig

x86_only = pytest.mark.skipif(
    platform.machine().lower() not in ("x86_64", "amd64"),
    reason=f"oneDNN's linear layer is an x86-64 path; this is {platform.machine()}",
)

# Products big enough for oneDNN: 12·64 rows of 128 features into 384.
ROWS_SHAPE, IN, OUT = (12, 64), 128, 384


@pytest.fixture
def onednn():
    """Force the fast path on, whatever this CPU's own decision is."""
    with cpu_linear.forced(True):
        yield


def decide_with(monkeypatch, capability: str, speedup: float):
    """The decision ``auto`` makes on a CPU of ``capability`` where oneDNN is ``speedup``x."""
    measured = []
    monkeypatch.setattr(cpu_linear, "onednn_available", lambda: True)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(cpu_linear, "measure_speedup", lambda: measured.append(1) or speedup)
    monkeypatch.setattr(cpu_linear, "_decision", None)
    monkeypatch.delenv(cpu_linear.ENVIRONMENT_VARIABLE, raising=False)
    first = cpu_linear.decision()
    assert cpu_linear.decision() is first  # kept for the process
    return first, len(measured)


def test_avx2_keeps_nn_linear_without_measuring(monkeypatch):
    chosen, measurements = decide_with(monkeypatch, "AVX2", speedup=3.0)
    assert not chosen.use_onednn and measurements == 0
    assert "AVX2" in chosen.reason and "AVX2" in str(chosen) and "off" in str(chosen)


@pytest.mark.parametrize("speedup, used", [(1.6, True), (1.05, False), (0.8, False)])
def test_avx512_uses_onednn_only_if_measured_faster(monkeypatch, speedup, used):
    chosen, measurements = decide_with(monkeypatch, "AVX512", speedup)
    assert chosen.use_onednn == used and measurements == 1  # measured once, then cached
    assert f"{speedup:.2f}x" in chosen.reason


@pytest.mark.parametrize("mode, used", [("on", True), ("off", False), (" OFF ", False)])
def test_the_environment_decides_outright(monkeypatch, mode, used):
    monkeypatch.setattr(cpu_linear, "onednn_available", lambda: True)
    monkeypatch.setattr(cpu_linear, "measure_speedup", lambda: pytest.fail("measured"))
    monkeypatch.setattr(cpu_linear, "_decision", None)
    monkeypatch.setenv(cpu_linear.ENVIRONMENT_VARIABLE, mode)
    assert cpu_linear.decision().use_onednn == used


def test_forced_holds_within_its_block_only(monkeypatch):
    monkeypatch.setattr(cpu_linear, "_decision", Decision(False, "measured"))
    with cpu_linear.forced(True):
        assert cpu_linear.decision().use_onednn
    assert cpu_linear.decision() == Decision(False, "measured")


def test_a_bad_environment_value_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(cpu_linear, "_decision", None)
    monkeypatch.setenv(cpu_linear.ENVIRONMENT_VARIABLE, "fast")
    with pytest.raises(ValueError, match="MINI_LLM_ONEDNN must be auto, on or off, got 'fast'"):
        Linear(2, 2)


@x86_only
def test_the_measurement_times_both_paths_and_leaves_the_random_stream_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    speedup = cpu_linear.measure_speedup(repeats=1)
    assert torch.equal(torch.rand(3), expected)
    assert 0.05 < speedup < 20


def test_without_the_fast_path_linear_is_nn_linear(monkeypatch):
    monkeypatch.setattr(cpu_linear, "_decision", Decision(False, "test"))
    monkeypatch.setattr(cpu_linear, "onednn_matmul", lambda *a: pytest.fail("oneDNN was called"))
    layer = Linear(IN, OUT)
    x = torch.randn(*ROWS_SHAPE, IN)
    assert not uses_onednn(x, layer.weight)
    torch.testing.assert_close(layer(x), torch.nn.Linear.forward(layer, x), rtol=0, atol=0)


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


@x86_only
def test_the_fast_path_is_taken_for_large_float32_products(onednn):
    x, weight = torch.randn(*ROWS_SHAPE, IN), torch.randn(OUT, IN)
    assert onednn_available(), "this PyTorch build has no oneDNN: the GPT's fast path is missing"
    assert uses_onednn(x, weight)


@x86_only
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("transposed_input", [False, True])
def test_values_and_gradients_equal_nn_linear(onednn, bias, transposed_input):
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


@x86_only
def test_small_products_other_dtypes_and_autocast_use_plain_linear(onednn):
    weight = torch.randn(OUT, IN)
    assert not uses_onednn(torch.randn(1, IN), weight)  # one token in generation
    assert not uses_onednn(torch.randn(*ROWS_SHAPE, IN, dtype=torch.float64), weight.double())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not uses_onednn(torch.randn(*ROWS_SHAPE, IN), weight)
    # ...and they still compute the right thing, here in float64 against the formula.
    layer = Linear(IN, OUT).double()
    x = torch.randn(3, IN, dtype=torch.float64)
    torch.testing.assert_close(layer(x), x @ layer.weight.T + layer.bias)


@x86_only
def test_torch_func_grad_and_vmap_give_the_autograd_results(onednn):
    """grad over functional_call, and per-sample gradients (vmap of grad), at a fast-path size."""
    torch.manual_seed(0)
    layer = Linear(IN, OUT)
    x = torch.randn(*ROWS_SHAPE, IN)
    upstream = torch.randn(*ROWS_SHAPE, OUT)
    params = {name: p.detach() for name, p in layer.named_parameters()}

    def loss(params, x, upstream):
        return (functional_call(layer, params, (x,)) * upstream).sum()

    _, expected = forward_backward(layer, x, upstream)  # this one goes through oneDNN
    got = grad(loss)(params, x, upstream)
    torch.testing.assert_close(got["weight"], expected[1], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got["bias"], expected[2], rtol=1e-4, atol=1e-4)
    per_sample = vmap(grad(loss), in_dims=(None, 0, 0))(
        params, x.unsqueeze(1), upstream.unsqueeze(1)
    )
    torch.testing.assert_close(per_sample["weight"].sum(0), expected[1], rtol=1e-4, atol=1e-3)


@x86_only
def test_gpt_gradients_are_the_same_with_and_without_onednn(monkeypatch):
    """The whole model, tied embedding/head included, trains on the same gradients."""
    config = GPTConfig(vocab_size=82, block_size=64, n_layer=2, n_head=4, n_embd=128)
    torch.manual_seed(0)
    x = torch.randint(82, (12, 64))
    y = torch.roll(x, -1, dims=1)

    def gradients(use_onednn: bool):
        monkeypatch.setattr(cpu_linear, "_decision", Decision(use_onednn, "test"))
        calls = []
        monkeypatch.setattr(
            cpu_linear,
            "onednn_matmul",
            lambda *a, real=cpu_linear.onednn_matmul: calls.append(1) or real(*a),
        )
        torch.manual_seed(1)
        model = cpu_linear.accelerate(GPT(config))  # as the trainer gives it on a CPU
        _, loss = model(x, y)
        loss.backward()
        assert bool(calls) == use_onednn
        return loss.item(), {n: p.grad for n, p in model.named_parameters()}

    loss_fast, fast = gradients(True)
    loss_plain, plain = gradients(False)
    assert loss_fast == pytest.approx(loss_plain, rel=1e-6)
    assert fast.keys() == plain.keys()
    for name in fast:
        torch.testing.assert_close(fast[name], plain[name], rtol=1e-4, atol=1e-5, msg=name)


@x86_only
@pytest.mark.slow  # torch.compile (make check leaves it out)
def test_compiled_linear_matches_eager(onednn):
    reference, ours = reference_and_ours(bias=True)
    x = torch.randn(*ROWS_SHAPE, IN)
    upstream = torch.randn(*ROWS_SHAPE, OUT)
    y_ref, grads_ref = forward_backward(reference, x, upstream)
    y, grads = forward_backward(torch.compile(ours, fullgraph=True), x, upstream)
    torch.testing.assert_close(y, y_ref, rtol=1e-5, atol=1e-5)
    for got, expected in zip(grads, grads_ref, strict=True):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)


def test_accelerate_turns_every_linear_layer_in_place_and_keeps_the_state_dict():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16))
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    assert linears  # the model's own code uses plain nn.Linear
    assert cpu_linear.accelerate(model) is model
    assert all(type(m) is Linear for m in linears)
    assert not [m for m in model.modules() if type(m) is torch.nn.Linear]
    assert model.head.weight is model.token_embedding.weight  # tying kept
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[name], before[name]) for name in before)
