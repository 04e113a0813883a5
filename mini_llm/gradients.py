"""Tools -- Tensors, gradients and a training loop.

Derivatives measured by finite differences, and gradient descent: the two ideas every later
chapter's training rests on.

A derivative says how fast a function's value changes when its input moves a little. The
central difference ``(f(x + h) - f(x - h)) / 2h`` measures it with nothing but two calls of the
function, so it is the independent witness against which autograd's answers are checked.
Gradient descent then walks downhill, ``x <- x - learning_rate * f'(x)``, one small step at a
time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def numerical_gradient(
    f: Callable[[torch.Tensor], torch.Tensor | float], x: torch.Tensor, eps: float = 1e-6
) -> torch.Tensor:
    """The gradient of the scalar function ``f`` at ``x`` by central differences.

    Each entry ``i`` is ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)``: two calls of ``f`` per
    entry, so it is slow, and in float64 accurate to about ``eps**2`` -- enough to check
    autograd. ``x`` is left unchanged; the result has its shape and dtype.
    """
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("x must be a floating-point tensor (differences need fractions)")
    if not eps > 0:
        raise ValueError(f"eps must be positive, got {eps!r}")
    point = x.detach().clone()
    flat = point.view(-1)
    gradient = torch.zeros_like(point)
    for i in range(flat.numel()):
        original = flat[i].item()
        flat[i] = original + eps
        above = float(f(point))
        flat[i] = original - eps
        below = float(f(point))
        flat[i] = original
        gradient.view(-1)[i] = (above - below) / (2 * eps)
    return gradient


def gradient_descent(
    derivative: Callable[[float], float], start: float, learning_rate: float, steps: int
) -> list[float]:
    """The points gradient descent visits on a function of one number, ``start`` first.

    Each step moves against the slope, ``x <- x - learning_rate * derivative(x)``, so the list
    has ``steps + 1`` entries. Too large a rate overshoots the minimum and can diverge.
    """
    if not isinstance(steps, int) or steps < 0:
        raise ValueError(f"steps must be a whole number >= 0, got {steps!r}")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate!r}")
    points = [float(start)]
    for _ in range(steps):
        points.append(points[-1] - learning_rate * float(derivative(points[-1])))
    return points
