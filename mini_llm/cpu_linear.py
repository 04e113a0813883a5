"""``nn.Linear`` whose large float32 matrix multiplies on the CPU run in oneDNN instead of MKL.

Why: PyTorch has two CPU math libraries inside it. Plain ``nn.Linear`` uses Intel's MKL, which
chooses its code by the processor's *vendor*: on AMD chips it runs its AVX2 kernels even when
the chip has AVX-512. oneDNN, the other library, chooses by the processor's *features*. On the
course's AMD EPYC machine a large float32 product runs at about 105 GFLOP/s per core in MKL and
210 in oneDNN (``benchmarks/cpu_matmul.py``), and the three matrix multiplies of a linear layer
(the forward pass, the gradient of the input and the gradient of the weight) are two thirds of a
training step of the small GPT. The results are float32 either way, equal to rounding.

oneDNN costs about 10 µs more per call, so small products (one token at a time in generation)
stay with MKL. Anything else -- other devices, other dtypes, autocast -- is plain ``F.linear``.
"""

from __future__ import annotations

import platform

import torch
import torch.nn.functional as F
from torch import nn

# Below this many multiply-adds per product, oneDNN's call overhead outweighs its faster kernel
# (measured on the course machine: break-even near 64 x 128 x 128).
MIN_MULTIPLY_ADDS = 1 << 21


def onednn_available() -> bool:
    """Whether this machine and PyTorch build can send a linear layer to oneDNN.

    Only x86-64 processors: the MKL-versus-oneDNN difference is theirs, and on ARM (Apple
    silicon, for one) PyTorch's own default is the better-tuned path.
    """
    return (platform.machine().lower() in ("x86_64", "amd64")
            and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


_ONEDNN = onednn_available()


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


def uses_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether :class:`Linear` sends ``x @ weightᵀ`` to oneDNN (see the module docstring)."""
    return (
        _ONEDNN
        and x.device.type == "cpu"
        and x.dtype == weight.dtype == torch.float32
        and not torch.is_autocast_enabled("cpu")
        and x.numel() * weight.size(0) >= MIN_MULTIPLY_ADDS
    )


class Linear(nn.Linear):
    """A drop-in ``nn.Linear`` (same parameters, same state dict) that is faster on such CPUs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not uses_onednn(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        rows = x.reshape(-1, x.size(-1))
        y = onednn_matmul(rows, self.weight, self.bias)
        return y.view(*x.shape[:-1], y.size(-1))
