"""Finite differences measure a derivative well enough to check autograd, and gradient
descent walks to a minimum, or away from it when the rate is too large."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from mini_llm.gradients import gradient_descent, numerical_gradient


def test_central_differences_agree_with_autograd_in_float64():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(3, 4, dtype=torch.float64, generator=generator)
    weights = torch.randn(3, 4, dtype=torch.float64, generator=generator)

    def f(v):
        return (torch.sin(v) * weights).sum() + (v**3).mean()

    leaf = x.clone().requires_grad_()
    f(leaf).backward()
    measured = numerical_gradient(f, x)
    assert measured.shape == x.shape and measured.dtype == torch.float64
    assert torch.allclose(measured, leaf.grad, atol=1e-8)


def test_the_point_is_left_as_it_was_and_float32_is_kept():
    x = torch.tensor([1.0, -2.0], dtype=torch.float32)
    before = x.clone()
    gradient = numerical_gradient(lambda v: (v**2).sum(), x, eps=1e-2)
    assert torch.equal(x, before)
    assert gradient.dtype == torch.float32
    assert torch.allclose(gradient, 2 * before, atol=1e-3)


def test_the_error_of_central_differences_shrinks_with_the_square_of_the_step():
    x = torch.tensor([0.7], dtype=torch.float64)
    exact = math.cos(0.7)
    errors = [abs(numerical_gradient(torch.sin, x, eps=h).item() - exact) for h in (1e-1, 1e-2)]
    assert 80 < errors[0] / errors[1] < 120  # h ten times smaller: the error 100 times


@pytest.mark.parametrize("eps", [0.0, -1e-3])
def test_a_step_that_is_not_positive_is_refused(eps):
    with pytest.raises(ValueError, match="eps must be positive"):
        numerical_gradient(torch.sum, torch.zeros(2, dtype=torch.float64), eps=eps)


def test_an_integer_point_is_refused():
    with pytest.raises(TypeError, match="floating-point"):
        numerical_gradient(torch.sum, torch.zeros(2, dtype=torch.int64))


def test_descent_on_a_parabola_shrinks_the_distance_by_one_minus_twice_the_rate():
    points = gradient_descent(lambda x: 2 * (x - 3), start=0.0, learning_rate=0.1, steps=20)
    assert len(points) == 21 and points[0] == 0.0
    for before, after in itertools.pairwise(points):
        assert after - 3 == pytest.approx((1 - 2 * 0.1) * (before - 3))
    diverging = gradient_descent(lambda x: 2 * (x - 3), 0.0, learning_rate=1.1, steps=20)
    assert abs(diverging[-1] - 3) > abs(diverging[0] - 3) * 20


def test_no_steps_is_the_start_alone():
    assert gradient_descent(lambda x: x, start=5, learning_rate=0.5, steps=0) == [5.0]


@pytest.mark.parametrize(
    ("rate", "steps", "message"),
    [(0.0, 3, "learning_rate must be positive"), (-0.1, 3, "learning_rate"), (0.1, -1, "steps")],
)
def test_bad_settings_are_refused(rate, steps, message):
    with pytest.raises(ValueError, match=message):
        gradient_descent(lambda x: x, start=1.0, learning_rate=rate, steps=steps)
