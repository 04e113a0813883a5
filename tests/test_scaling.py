"""The power-law fit recovers known laws, keeps the floor C, and says how sure it is."""

import math

import numpy as np
import pytest

from mini_llm.scaling import PowerLaw, fit_power_law, standard_errors

SIZES = np.array([1e3, 3e3, 1e4, 3e4, 1e5, 1e6])


@pytest.mark.parametrize(("A", "alpha", "C"), [(50.0, 0.3, 1.2), (4.0, 0.07, 0.0), (2e3, 1.1, 3)])
def test_noiseless_laws_are_recovered(A, alpha, C):
    law = fit_power_law(SIZES, A * SIZES**-alpha + C)
    assert law == pytest.approx((A, alpha, C), rel=1e-6, abs=1e-8)


def test_units_of_n_do_not_change_the_exponent():
    losses = 50 * SIZES**-0.3 + 1.2
    in_millions = fit_power_law(SIZES / 1e6, losses)
    assert in_millions.alpha == pytest.approx(0.3, rel=1e-6)
    assert in_millions.A == pytest.approx(50 * 1e6**-0.3, rel=1e-6)


def test_a_straight_line_in_log_space_would_miss_the_floor():
    losses = 50 * SIZES**-0.3 + 1.2
    slope = -np.polyfit(np.log(SIZES), np.log(losses), 1)[0]
    assert slope < 0.2  # the floor flattens the line: the C-less fit underestimates alpha
    assert fit_power_law(SIZES, losses).alpha == pytest.approx(0.3, rel=1e-6)


def test_standard_errors_grow_with_the_noise_and_cover_the_truth():
    truth = PowerLaw(50.0, 0.3, 1.2)
    errors = []
    for noise in (0.002, 0.02):
        rng = np.random.default_rng(0)
        losses = truth(SIZES) + rng.normal(0, noise, len(SIZES))
        law = fit_power_law(SIZES, losses)
        error = standard_errors(SIZES, losses, law)
        assert abs(law.alpha - truth.alpha) < 4 * error.alpha
        errors.append(error.alpha)
    assert errors[1] > 5 * errors[0]
    exact = fit_power_law(SIZES[:3], truth(SIZES[:3]))
    assert standard_errors(SIZES[:3], truth(SIZES[:3]), exact).alpha == math.inf


@pytest.mark.parametrize(
    ("sizes", "losses", "message"),
    [
        ([1, 2], [2, 1], "at least 3 points"),
        ([1, 2, 3], [2, 1], "same length"),
        ([1, 0, 3], [3, 2, 1], "positive"),
        ([1, 2, float("nan")], [3, 2, 1], "finite"),
        ([1, 1, 2], [3, 2, 1], "3 different sizes"),
    ],
)
def test_bad_input_is_a_clear_error(sizes, losses, message):
    with pytest.raises(ValueError, match=message):
        fit_power_law(sizes, losses)
