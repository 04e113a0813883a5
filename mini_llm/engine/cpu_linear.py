"""``nn.Linear`` whose large float32 products on the CPU run in oneDNN -- where that is faster.

Why: PyTorch has two CPU math libraries inside it. Plain ``nn.Linear`` uses Intel's MKL, which
chooses its code by the processor's *vendor*: on AMD chips it runs its AVX2 kernels even when
the chip has AVX-512. oneDNN, the other library, chooses by the processor's *features*. On the
course's AMD EPYC machine with AVX-512 a large float32 product runs at about 105 GFLOP/s per core
in MKL and 210 in oneDNN (``benchmarks/cpu_matmul.py``). On an AMD EPYC that offers only AVX2,
though, oneDNN was measured *slower* (0.59-0.92x per layer), and on Intel chips MKL runs AVX-512
itself. So whether to use it is decided once per process, by :func:`decision`:

* ``MINI_LLM_ONEDNN=on`` or ``off`` in the environment decides outright (tests, benchmarks);
* otherwise (``auto``) a CPU without AVX-512, or without oneDNN, keeps ``nn.Linear``; one with
  AVX-512 times one forward + backward of a GPT-sized layer both ways (about 0.1 s) and uses
  oneDNN only if it is clearly faster.

Where oneDNN is not used, :class:`Linear` *is* ``nn.Linear``: its forward is the parent's.
Small products (one token at a time in generation) stay with MKL too, since oneDNN costs about
10 µs more per call; so do other devices, other dtypes, autocast, and ``torch.func`` transforms
(``grad``, ``vmap``), which cannot see inside the operator. Results are float32 either way,
equal to rounding.
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# Below this many multiply-adds per product, oneDNN's call overhead outweighs its faster kernel
# (measured on the course machine: break-even near 64 x 128 x 128).
MIN_MULTIPLY_ADDS = 1 << 21
ENVIRONMENT_VARIABLE = "MINI_LLM_ONEDNN"
# oneDNN must beat nn.Linear by this factor in the start-up measurement to be used: a margin
# for timing noise on a busy machine, where a wrong "on" would cost more than a missed gain.
REQUIRED_SPEEDUP = 1.15
# The measured layer: the MLP's first product of shakespeare-char-cpu (batch 12 x 64 tokens).
_PROBE_SHAPE = (768, 128, 512)  # rows, in features, out features


def onednn_available() -> bool:
    """Whether this machine and PyTorch build can send a linear layer to oneDNN.

    Only x86-64 processors: the MKL-versus-oneDNN difference is theirs, and on ARM (Apple
    silicon, for one) PyTorch's own default is the better-tuned path.
    """
    return (
        platform.machine().lower() in ("x86_64", "amd64")
        and torch.backends.mkldnn.is_available()
        and hasattr(torch.ops.mkldnn, "_linear_pointwise")
    )


@torch.library.custom_op("mini_llm::onednn_matmul", mutates_args=())
def onednn_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ weightᵀ (+ bias) by oneDNN; x (M, K) and weight (N, K) may be transposed views.

    A registered operator rather than a plain function, so that ``torch.compile`` calls it as it
    is instead of trying to rewrite oneDNN's linear layer (which it only does for frozen weights).
    """
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


@onednn_matmul.register_fake
def _(x, weight, bias):
    return x.new_empty(x.size(0), weight.size(0))


def _weight_gradient(grad_y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """dL/dW = gᵀ x, an (N, K) matrix summed over the M rows of g (M, N) and x (M, K).

    oneDNN wants its first operand in rows, so one of the two is copied transposed: the
    narrower one, which is the cheaper copy.
    """
    if x.size(1) < grad_y.size(1):
        return onednn_matmul(x.t(), grad_y.t(), None).t()  # (xᵀ g)ᵀ
    return onednn_matmul(grad_y.t(), x.t(), None)


def _save_for_backward(ctx, inputs, output):
    x, weight, bias = inputs
    ctx.save_for_backward(x, weight)
    ctx.has_bias = bias is not None


def _backward(ctx, grad_y):
    """The two other products of a linear layer: dL/dx = g W and dL/dW = gᵀ x."""
    x, weight = ctx.saved_tensors
    need_x, need_weight, need_bias = ctx.needs_input_grad
    grad_x = onednn_matmul(grad_y, weight.t(), None) if need_x else None
    grad_weight = _weight_gradient(grad_y, x) if need_weight else None
    grad_bias = grad_y.sum(0) if ctx.has_bias and need_bias else None
    return grad_x, grad_weight, grad_bias


onednn_matmul.register_autograd(_backward, setup_context=_save_for_backward)


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None):
    """``F.linear`` computed by oneDNN, for ``x`` of any shape (..., in_features)."""
    y = onednn_matmul(x.reshape(-1, x.size(-1)), weight, bias)
    return y.view(*x.shape[:-1], y.size(-1))


@dataclass(frozen=True)
class Decision:
    """Whether :class:`Linear` sends large products to oneDNN in this process, and why."""

    use_onednn: bool
    reason: str

    def __str__(self) -> str:
        return f"oneDNN linear layers {'on' if self.use_onednn else 'off'}: {self.reason}"


def measure_speedup(repeats: int = 9) -> float:
    """How many times faster oneDNN runs forward + backward of a GPT-sized layer than MKL.

    Measured on one thread: it compares the two libraries' kernels, not how busy the other
    cores are. The two take turns, and each is credited with its fastest turn: on a busy
    machine other processes only ever add time. A private random generator keeps the global
    one untouched (models built afterwards get the same weights whatever is decided).
    """
    rows, n_in, n_out = _PROBE_SHAPE
    generator = torch.Generator().manual_seed(0)
    seconds = {F.linear: [], onednn_linear: []}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch.inference_mode(False), torch.enable_grad():
            x = torch.randn(rows, n_in, generator=generator).requires_grad_()
            weight = torch.randn(n_out, n_in, generator=generator).requires_grad_()
            bias = torch.zeros(n_out).requires_grad_()
            upstream = torch.randn(rows, n_out, generator=generator)
            for _ in range(2 + repeats):  # two warm-up turns: allocator, oneDNN's kernel cache
                for linear, times in seconds.items():
                    start = time.perf_counter()
                    linear(x, weight, bias).backward(upstream)
                    times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(threads)
    return min(seconds[F.linear][2:]) / min(seconds[onednn_linear][2:])


def _decide(mode: str) -> Decision:
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"{ENVIRONMENT_VARIABLE} must be auto, on or off, got {mode!r}")
    capability = torch.backends.cpu.get_cpu_capability()
    if mode == "off":
        return Decision(False, f"{ENVIRONMENT_VARIABLE}=off")
    if not onednn_available():
        return Decision(False, f"no oneDNN linear on this {platform.machine()} CPU/PyTorch build")
    if mode == "on":
        return Decision(True, f"{ENVIRONMENT_VARIABLE}=on (CPU capability {capability})")
    if "AVX512" not in capability:
        return Decision(
            False,
            f"CPU capability {capability}: oneDNN's gain comes from AVX-512 "
            "kernels, and without them it measured slower than MKL",
        )
    speedup = measure_speedup()
    rows, n_in, n_out = _PROBE_SHAPE
    verdict = "faster" if speedup >= REQUIRED_SPEEDUP else f"below the {REQUIRED_SPEEDUP}x needed"
    return Decision(
        speedup >= REQUIRED_SPEEDUP,
        f"CPU capability {capability}, measured {speedup:.2f}x nn.Linear's speed on "
        f"{rows}x{n_in}->{n_out} forward + backward ({verdict})",
    )


_decision: Decision | None = None


def decision() -> Decision:
    """This process's choice, made on first use (the first :class:`Linear` built) and kept."""
    global _decision
    if _decision is None:
        _decision = _decide(os.environ.get(ENVIRONMENT_VARIABLE, "auto").strip().lower())
    return _decision


@contextlib.contextmanager
def forced(use_onednn: bool):
    """Within the block, send large products to oneDNN (or not) whatever was decided.

    For benchmarks that time both paths in one process, and for tests that must take the fast
    path on any x86 CPU.
    """
    global _decision
    before = _decision
    _decision = Decision(use_onednn, "forced")
    try:
        yield
    finally:
        _decision = before


def uses_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :class:`Linear` sends ``x @ weightᵀ`` to oneDNN (see the module docstring)."""
    return (
        _decision is not None
        and _decision.use_onednn
        and x.device.type == "cpu"
        and x.dtype == weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
        and not torch._C._are_functorch_transforms_active()  # grad, vmap: see module docstring
        and x.numel() * weight.size(0) >= MIN_MULTIPLY_ADDS
    )


class Linear(nn.Linear):
    """A drop-in ``nn.Linear`` (same parameters, same state dict), faster on some CPUs."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        decision()  # decided here, never while torch.compile traces forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if uses_onednn(x, self.weight):
            return onednn_linear(x, self.weight, self.bias)
        return super().forward(x)


def accelerate(model: nn.Module) -> nn.Module:
    """Make the model's ``nn.Linear`` layers :class:`Linear`, in place, and return the model.

    The same parameters and state dict, products in oneDNN where :func:`decision` says so. The
    engine applies it to a model it trains on the CPU, so that a model's own code keeps plain
    ``nn.Linear`` and reads as the book shows it.
    """
    decision()
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = Linear
    return model
