"""Chapter 12 -- Training on a GPU.

Scaling laws: fit L(N) = A·N^-alpha + C to losses measured at several sizes N.

``C`` is the loss no size can beat (the data's own entropy, plus what the setup cannot learn);
``A·N^-alpha`` is what more size removes. A straight line through log L against log N assumes
C = 0, which bends the fit wherever the loss is near its floor: the fit here keeps C.

For a fixed alpha the law is linear in A and C, so they come from least squares exactly; the
one remaining unknown, alpha, is found by a search over the sum of squared residuals.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np


class PowerLaw(NamedTuple):
    """L(N) = A·N^-alpha + C."""

    A: float
    alpha: float
    C: float

    def __call__(self, sizes) -> np.ndarray:
        return self.A * np.asarray(sizes, dtype=float) ** -self.alpha + self.C


def _checked(sizes, losses) -> tuple[np.ndarray, np.ndarray]:
    sizes, losses = np.asarray(sizes, dtype=float), np.asarray(losses, dtype=float)
    if sizes.ndim != 1 or sizes.shape != losses.shape:
        raise ValueError(
            f"sizes and losses must be two lists of the same length, got shapes "
            f"{sizes.shape} and {losses.shape}"
        )
    if len(sizes) < 3:
        raise ValueError(f"fitting A, alpha and C needs at least 3 points, got {len(sizes)}")
    if not (np.all(np.isfinite(sizes)) and np.all(np.isfinite(losses))) or np.any(sizes <= 0):
        raise ValueError("sizes must be positive and finite, and losses finite")
    if len(np.unique(sizes)) < 3:
        raise ValueError("fitting a power law needs at least 3 different sizes")
    return sizes, losses


def _linear_part(sizes, losses, alpha) -> tuple[float, float, float]:
    """(A, C, sum of squared residuals) of the best fit with ``alpha`` held fixed."""
    design = np.stack([sizes**-alpha, np.ones_like(sizes)], axis=1)
    (a, c), *_ = np.linalg.lstsq(design, losses, rcond=None)
    residuals = design @ np.array([a, c]) - losses
    return float(a), float(c), float(residuals @ residuals)


def fit_power_law(sizes, losses) -> PowerLaw:
    """The least-squares fit of L(N) = A·N^-alpha + C to ``losses`` measured at ``sizes``.

    Sizes are rescaled by their geometric mean while fitting (so N^-alpha stays near 1 for any
    units), and A is converted back at the end. alpha is searched over (0, 4]: a grid, then a
    golden-section refinement around the best grid point.
    """
    sizes, losses = _checked(sizes, losses)
    scale = math.exp(np.log(sizes).mean())
    scaled = sizes / scale

    def sse(alpha):
        return _linear_part(scaled, losses, alpha)[2]

    grid = np.linspace(1e-3, 4.0, 400)
    best = int(np.argmin([sse(a) for a in grid]))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    ratio = (math.sqrt(5) - 1) / 2
    for _ in range(80):  # golden section: the bracket shrinks by 0.618 each time
        left, right = high - ratio * (high - low), low + ratio * (high - low)
        if sse(left) < sse(right):
            high = right
        else:
            low = left
    alpha = (low + high) / 2
    a, c, _ = _linear_part(scaled, losses, alpha)
    return PowerLaw(A=float(a * scale**alpha), alpha=float(alpha), C=c)


def standard_errors(sizes, losses, law: PowerLaw) -> PowerLaw:
    """Standard errors of A, alpha and C of a least-squares fit, from its Jacobian.

    The usual linearised estimate: covariance s²·(JᵀJ)⁻¹ with s² = (sum of squared residuals)
    / (points - 3). With few points it is rough (and infinite with exactly 3, where the fit
    goes through every point and nothing measures the noise).
    """
    sizes, losses = _checked(sizes, losses)
    dof = len(sizes) - 3
    if dof == 0:
        return PowerLaw(math.inf, math.inf, math.inf)
    power = sizes**-law.alpha
    jacobian = np.stack([power, -law.A * power * np.log(sizes), np.ones_like(sizes)], axis=1)
    residuals = law(sizes) - losses
    variance = residuals @ residuals / dof
    covariance = variance * np.linalg.pinv(jacobian.T @ jacobian)
    return PowerLaw(*(float(math.sqrt(max(v, 0.0))) for v in np.diag(covariance)))
