"""Known-buggy answers to the ch12_gpu_training exercise: mistakes learners really make.

Same layout as ``ch09_transformer.py``: each function carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of
the notebook must fail every one of them while the reference passes. Among them are the
mistakes issue 14 lists: a warm-up off by one, a cosine that does not reach ``min_lr``, 2·N
instead of 6·N FLOPs, attention's FLOPs forgotten, MFU as a percentage, and a power law fitted
as a straight line in log-log space (no floor C). ``ALTERNATIVES`` (at the end) holds correct
answers written differently, which the hidden tests must accept.

Issue 31 added, from the classes of mistakes it lists: schedule boundaries (``//``, ``<=`` at
the end of the warm-up, ``>`` at decay_iters, no floor past the end, a quarter cosine, the
cosine's denominator off by one, progress clamped instead of a branch, a warm-up factor that
divides by zero without warm-up), attention counted once or per sequence or as one product, a
size of zero refused, an MFU rounded, fits checked only on easy parameters (alpha searched in
(0, 1] only, no rescaling of the sizes, a refinement stopped early, least squares in log space,
the caller's sizes rescaled in place), and input checks that only look at zero, at the result's
sign, at one argument, or raise an ``AssertionError`` (registered with ``bug.input``: they must
lose the ``<part>_input_tests`` cell only).

The schedule's reference is ``mini_llm.engine.schedule.warmup_cosine_learning_rate``: the exercise calls
it ``learning_rate_at`` (``RENAMED``), the name the trainer keeps for its config-taking wrapper.
"""

from __future__ import annotations

import math

import numpy as np

from mini_llm import flops
from mini_llm.engine.schedule import warmup_cosine_learning_rate

from ._registry import new_registry

REFERENCE = ("mini_llm.engine.schedule", "mini_llm.flops", "mini_llm.scaling")
"""the mini_llm modules that hold the reference of each graded part"""
RENAMED = {"learning_rate_at": "warmup_cosine_learning_rate"}
"""exercise part -> the name of its reference in the REFERENCE modules, where they differ"""

BUGS, ALTERNATIVES, bug, correct = new_registry()


# ------------------------------------------------------------------------------ learning_rate_at


def _cosine(step, max_lr, min_lr, start, end):
    progress = (step - start) / max(1, end - start)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


def _rate(
    step,
    max_lr,
    min_lr,
    warmup_iters,
    decay_iters,
    *,
    checked=("step", "warmup_iters"),
    first=1,
    cosine_from=None,
    cosine_to=None,
):
    """The right schedule; knobs: what is ``checked`` for a negative value, the warm-up rate of
    step 0 (``first`` / warmup_iters of max_lr), the step the cosine starts from (None: the end
    of the warm-up) and the rate it falls to (None: min_lr)."""
    if (step < 0 and "step" in checked) or (warmup_iters < 0 and "warmup_iters" in checked):
        raise ValueError("negative step")
    if step < warmup_iters:
        return max_lr * (step + first) / warmup_iters
    if step >= decay_iters:
        return min_lr
    start = warmup_iters if cosine_from is None else cosine_from
    return _cosine(step, max_lr, min_lr if cosine_to is None else cosine_to, start, decay_iters)


_rate_bug = bug.variants("learning_rate_at", _rate, like=warmup_cosine_learning_rate)
_rate_bug("warmup_off_by_one", "max_lr * step / warmup: step 0 gets a rate of 0", first=0)
_rate_bug(
    "progress_from_zero",
    "progress = step / decay_iters: the cosine has not reached min_lr when it stops",
    cosine_from=0,
)
_rate_bug("cosine_to_zero", "the cosine falls to 0, not to min_lr", cosine_to=0.0)


def _input_only(fn):
    """Mark a bug made with ``bug.variants`` as one in the input checks alone (as
    ``bug.input`` marks those written out)."""
    fn.input_bug = True
    return fn


_input_only(_rate_bug("no_negative_check", "a negative step gets a rate, not an error", checked=()))
_input_only(
    _rate_bug(
        "step_check_only",
        "checks the step but not warmup_iters: a negative warm-up gets a rate, not an error",
        checked=("step",),
    )
)


@bug("learning_rate_at", "floor_division", "(step + 1) // warmup_iters: 0 until the last step")
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("negative step")
    if step < warmup_iters:
        return max_lr * ((step + 1) // warmup_iters)
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


@bug(
    "learning_rate_at",
    "warmup_inclusive",
    "step <= warmup_iters: the first cosine step is still warm-up, above max_lr",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("negative step")
    if warmup_iters and step <= warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


@bug(
    "learning_rate_at",
    "end_strict",
    "step > decay_iters: with warm-up equal to decay, step decay_iters restarts at max_lr",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("negative step")
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step > decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


@bug(
    "learning_rate_at",
    "no_floor_after_decay",
    "no branch for step >= decay_iters: the cosine rises again past the end",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("negative step")
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


@bug("learning_rate_at", "quarter_cosine", "cos(pi/2 * progress): a quarter cosine, not a half")
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("negative step")
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + math.cos(math.pi / 2 * progress) * (max_lr - min_lr)


@bug(
    "learning_rate_at",
    "cosine_denominator_plus_one",
    "progress divided by decay_iters - warmup_iters + 1: min_lr is reached one step late",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("negative step")
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / (decay_iters - warmup_iters + 1)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


@bug(
    "learning_rate_at",
    "warmup_factor_always",
    "the warm-up factor (step + 1) / warmup_iters computed at every step: "
    "ZeroDivisionError without warm-up",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("negative step")
    warm = (step + 1) / warmup_iters
    if warm <= 1:
        return max_lr * warm
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


@bug(
    "learning_rate_at",
    "progress_clamped",
    "progress clamped to 1 instead of a branch at decay_iters: with warm-up equal to decay, "
    "step decay_iters gets max_lr",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("step must not be negative")
    if step < warmup_iters:
        return (step + 1) / warmup_iters * max_lr
    progress = min(1.0, (step - warmup_iters) / max(1, decay_iters - warmup_iters))
    return min_lr + (max_lr - min_lr) * (math.cos(math.pi * progress) + 1) / 2


@bug.input(
    "learning_rate_at",
    "assert_not_value_error",
    "assert step >= 0: an AssertionError, not a ValueError",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    assert step >= 0 and warmup_iters >= 0, "negative step"
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


@bug.input(
    "learning_rate_at",
    "both_negative_only",
    "raises only when step and warmup_iters are both negative (and, not or)",
)
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 and warmup_iters < 0:
        raise ValueError("negative step")
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (max_lr - min_lr)


# ------------------------------------------------------------------------------- flops_per_token


def _flops(n_params, n_layer, block_size, n_embd, *, checked=True, per_param=6, attention=12):
    """The right count (with the sizes ``checked``): per_param·N + attention·L·T·d."""
    if checked and min(n_params, n_layer, block_size, n_embd) < 0:
        raise ValueError("negative size")
    return per_param * n_params + attention * n_layer * block_size * n_embd


_flops_bug = bug.variants("flops_per_token", _flops, like=flops.flops_per_token)
_flops_bug("two_n", "2·N: the forward pass only, the backward pass forgotten", per_param=2)
_flops_bug("no_attention", "6·N only: attention's Q·K^T and weights·V forgotten", attention=0)
_flops_bug("attention_forward_only", "attention counted forward only: 4·L·T·d", attention=4)
_flops_bug("attention_one_product", "attention counts only Q·K^T: 6·L·T·d", attention=6)
_input_only(
    _flops_bug(
        "no_negative_check", "a negative size gets a count instead of an error", checked=False
    )
)


@bug.input(
    "flops_per_token",
    "layers_check_only",
    "checks n_layer only: a negative n_params, block_size or n_embd gets a count",
)
def _(n_params, n_layer, block_size, n_embd):
    if n_layer < 0:
        raise ValueError("negative n_layer")
    return 6 * n_params + 12 * n_layer * block_size * n_embd


@bug.input(
    "flops_per_token",
    "result_sign_checked",
    "checks the count, not the sizes: two negative sizes multiply to a positive count",
)
def _(n_params, n_layer, block_size, n_embd):
    total = 6 * n_params + 12 * n_layer * block_size * n_embd
    if total < 0:
        raise ValueError("negative count")
    return total


@bug(
    "flops_per_token",
    "zero_refused",
    "min(sizes) <= 0 raises: a model without layers (or an empty window) is refused",
)
def _(n_params, n_layer, block_size, n_embd):
    if min(n_params, n_layer, block_size, n_embd) <= 0:
        raise ValueError("sizes must be positive")
    return 6 * n_params + 12 * n_layer * block_size * n_embd


@bug(
    "flops_per_token",
    "window_squared",
    "attention as 12·L·T²·d: the cost of a whole sequence, not of one token",
)
def _(n_params, n_layer, block_size, n_embd):
    if min(n_params, n_layer, block_size, n_embd) < 0:
        raise ValueError("negative size")
    return 6 * n_params + 12 * n_layer * block_size**2 * n_embd


@bug("flops_per_token", "one_layer_of_attention", "attention counted once, not for every layer")
def _(n_params, n_layer, block_size, n_embd):
    if min(n_params, n_layer, block_size, n_embd) < 0:
        raise ValueError("negative size")
    attention = 12 * block_size * n_embd if n_layer else 0
    return 6 * n_params + attention


# ------------------------------------------------------------------------------------------- mfu


def _mfu(tokens_per_second, flops_per_token, peak_flops, *, checked=True, scale=1, peak_unit=1):
    """The right MFU (with the inputs ``checked``), times ``scale``, the peak read in units of
    ``peak_unit`` FLOP/s."""
    if checked and (peak_flops <= 0 or tokens_per_second < 0 or flops_per_token < 0):
        raise ValueError("bad input")
    return scale * tokens_per_second * flops_per_token / (peak_flops * peak_unit)


_mfu_bug = bug.variants("mfu", _mfu, like=flops.mfu)
_mfu_bug("percentage", "returns a percentage (x 100) where a fraction is asked for", scale=100)
_input_only(
    _mfu_bug(
        "no_zero_peak_check", "divides by a peak of 0 (ZeroDivisionError, or inf)", checked=False
    )
)
_mfu_bug(
    "peak_in_tflops",
    "treats peak_flops as TFLOP/s: multiplies it by 1e12 again",
    peak_unit=1e12,
)


@bug.input(
    "mfu",
    "flops_unchecked",
    "checks the peak and the throughput but not flops_per_token: a negative count gets an MFU",
)
def _(tokens_per_second, flops_per_token, peak_flops):
    if peak_flops <= 0 or tokens_per_second < 0:
        raise ValueError("bad input")
    return tokens_per_second * flops_per_token / peak_flops


@bug.input("mfu", "zero_peak_only", "refuses a peak of 0 only: a negative peak gives an MFU")
def _(tokens_per_second, flops_per_token, peak_flops):
    if peak_flops == 0 or tokens_per_second < 0 or flops_per_token < 0:
        raise ValueError("bad input")
    return tokens_per_second * flops_per_token / peak_flops


@bug.input(
    "mfu",
    "product_checked",
    "checks the achieved FLOP/s, not each input: two negatives make a positive MFU",
)
def _(tokens_per_second, flops_per_token, peak_flops):
    achieved = tokens_per_second * flops_per_token
    if peak_flops <= 0 or achieved < 0:
        raise ValueError("bad input")
    return achieved / peak_flops


@bug("mfu", "rounded", "round(mfu, 2): a small model's MFU of a fraction of a percent is 0")
def _(tokens_per_second, flops_per_token, peak_flops):
    if peak_flops <= 0 or tokens_per_second < 0 or flops_per_token < 0:
        raise ValueError("bad input")
    return round(tokens_per_second * flops_per_token / peak_flops, 2)


# --------------------------------------------------------------------------------- fit_power_law


def _checked(sizes, losses):
    sizes, losses = np.asarray(sizes, dtype=float), np.asarray(losses, dtype=float)
    if sizes.shape != losses.shape or len(sizes) < 3 or np.any(sizes <= 0):
        raise ValueError("bad input")
    return sizes, losses


def _linear_fit(sizes, losses, alpha):
    design = np.stack([sizes**-alpha, np.ones_like(sizes)], axis=1)
    (a, c), *_ = np.linalg.lstsq(design, losses, rcond=None)
    return a, c, float(np.sum((design @ [a, c] - losses) ** 2))


@bug("fit_power_law", "log_line_without_c", "a straight line through log L against log N: C = 0")
def _(sizes, losses):
    sizes, losses = _checked(sizes, losses)
    slope, intercept = np.polyfit(np.log(sizes), np.log(losses), 1)
    return math.exp(intercept), -slope, 0.0


@bug("fit_power_law", "coarse_grid", "alpha from a grid of step 0.1, never refined")
def _(sizes, losses):
    sizes, losses = _checked(sizes, losses)
    grid = np.arange(0.1, 3.0, 0.1)
    alpha = min(grid, key=lambda a: _linear_fit(sizes, losses, a)[2])
    a, c, _ = _linear_fit(sizes, losses, alpha)
    return a, alpha, c


def _fit(sizes, losses, *, high=4.0, rescale=True, steps=80, grid=400):
    """A right fit (the package's method, written again): alpha searched over
    (0, ``high``] on a ``grid``, refined by ``steps`` of a golden section; the sizes
    rescaled by their geometric mean (``rescale``)."""
    scale = math.exp(np.log(sizes).mean()) if rescale else 1.0
    scaled = sizes / scale

    def sse(alpha):
        return _linear_fit(scaled, losses, alpha)[2]

    alphas = np.linspace(1e-3, high, grid)
    best = int(np.argmin([sse(a) for a in alphas]))
    low, top = alphas[max(best - 1, 0)], alphas[min(best + 1, grid - 1)]
    for _ in range(steps):
        left, right = top - 0.618034 * (top - low), low + 0.618034 * (top - low)
        if sse(left) < sse(right):
            top = right
        else:
            low = left
    alpha = (low + top) / 2
    a, c, _ = _linear_fit(scaled, losses, alpha)
    return float(a * scale**alpha), float(alpha), float(c)


@bug.input("fit_power_law", "no_input_check", "two points or a size of 0 get a fit, not an error")
def _(sizes, losses):
    sizes, losses = np.asarray(sizes, dtype=float), np.asarray(losses, dtype=float)
    with np.errstate(all="ignore"):
        return _fit(sizes, losses)


@bug.input(
    "fit_power_law",
    "two_points_accepted",
    "len(sizes) < 2 refused, not < 3: two points get a fit of three unknowns",
)
def _(sizes, losses):
    sizes, losses = np.asarray(sizes, dtype=float), np.asarray(losses, dtype=float)
    if sizes.shape != losses.shape or len(sizes) < 2 or np.any(sizes <= 0):
        raise ValueError("bad input")
    return _fit(sizes, losses)


@bug.input(
    "fit_power_law",
    "lengths_truncated",
    "lists of different lengths cut to the shorter one (as zip does), not refused",
)
def _(sizes, losses):
    n = min(len(sizes), len(losses))
    sizes, losses = np.asarray(sizes[:n], dtype=float), np.asarray(losses[:n], dtype=float)
    if n < 3 or np.any(sizes <= 0):
        raise ValueError("bad input")
    return _fit(sizes, losses)


@bug(
    "fit_power_law",
    "alpha_below_one",
    "alpha searched over (0, 1] only: a steeper law is fitted at the edge of the range",
)
def _(sizes, losses):
    sizes, losses = _checked(sizes, losses)
    return _fit(sizes, losses, high=1.0, grid=100)


@bug(
    "fit_power_law",
    "no_rescaling",
    "lstsq on the raw sizes: N^-alpha of a billion-size model is lost next to the ones",
)
def _(sizes, losses):
    sizes, losses = _checked(sizes, losses)
    return _fit(sizes, losses, rescale=False)


@bug(
    "fit_power_law",
    "refinement_too_short",
    "the search refined by only a few golden-section steps: alpha to about 1e-3",
)
def _(sizes, losses):
    sizes, losses = _checked(sizes, losses)
    return _fit(sizes, losses, steps=4, grid=200)


@bug(
    "fit_power_law",
    "log_residuals",
    "C searched, then A and alpha from a line through log(L - C): least squares in log "
    "space, right only on noise-free losses",
)
def _(sizes, losses):
    sizes, losses = _checked(sizes, losses)

    def fit_for(c):
        slope, intercept = np.polyfit(np.log(sizes), np.log(losses - c), 1)
        a, alpha = math.exp(intercept), -slope
        return a, alpha, float(np.sum((np.log(a * sizes**-alpha) - np.log(losses - c)) ** 2))

    spread = losses.max() - losses.min()
    low, high = losses.min() - 10 * spread, losses.min() - 1e-9 * spread
    for _ in range(100):
        left, right = high - 0.618034 * (high - low), low + 0.618034 * (high - low)
        if fit_for(left)[2] < fit_for(right)[2]:
            high = right
        else:
            low = left
    c = (low + high) / 2
    a, alpha, _ = fit_for(c)
    return a, alpha, c


@bug(
    "fit_power_law",
    "sizes_rescaled_in_place",
    "sizes /= their mean on np.asarray(sizes): the caller's array is rescaled too",
)
def _(sizes, losses):
    sizes, losses = np.asarray(sizes, dtype=float), np.asarray(losses, dtype=float)
    if sizes.shape != losses.shape or len(sizes) < 3 or np.any(sizes <= 0):
        raise ValueError("bad input")
    scale = math.exp(np.log(sizes).mean())
    sizes /= scale
    a, alpha, c = _fit(sizes, losses, rescale=False)
    return a * scale**alpha, alpha, c


# -------------------------------------------------------------------- correct, written otherwise


@correct("learning_rate_at", "fraction_first")
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("step must not be negative")
    if step < warmup_iters:
        return (step + 1) / warmup_iters * max_lr
    if step >= decay_iters:  # also when the warm-up equals the decay
        progress = 1.0
    else:
        progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    return min_lr + (max_lr - min_lr) * (math.cos(math.pi * progress) + 1) / 2


@correct("flops_per_token", "per_layer_sum")
def _(n_params, n_layer, block_size, n_embd):
    if any(size < 0 for size in (n_params, n_layer, block_size, n_embd)):
        raise ValueError("sizes must not be negative")
    forward = 2 * n_params + sum(4 * block_size * n_embd for _ in range(n_layer))
    return 3 * forward


@correct("mfu", "achieved_over_peak")
def _(tokens_per_second, flops_per_token, peak_flops):
    if not peak_flops > 0 or min(tokens_per_second, flops_per_token) < 0:
        raise ValueError("need a positive peak and non-negative rates")
    achieved = flops_per_token * tokens_per_second
    return achieved / peak_flops


@correct("fit_power_law", "search_over_c")
def _(sizes, losses):
    """Start from a search over the floor C (for a fixed C, log(L - C) is a line in log N),
    then polish all three by Levenberg-Marquardt on the residuals of L itself."""
    sizes, losses = _checked(sizes, losses)
    scale = math.exp(np.log(sizes).mean())
    x = sizes / scale

    def line_for(c):
        slope, intercept = np.polyfit(np.log(x), np.log(np.maximum(losses - c, 1e-300)), 1)
        a, alpha = math.exp(intercept), -slope
        return np.array([a, alpha, c]), float(np.sum((a * x**-alpha + c - losses) ** 2))

    spread = losses.max() - losses.min()
    candidates = losses.min() - spread * np.geomspace(1e-6, 10, 60)
    theta, sse = min((line_for(c) for c in candidates), key=lambda pair: pair[1])
    damping = 1e-3
    for _ in range(500):
        a, alpha, c = theta
        power = x**-alpha
        residual = a * power + c - losses
        jacobian = np.stack([power, -a * power * np.log(x), np.ones_like(x)], axis=1)
        normal = jacobian.T @ jacobian
        step = np.linalg.solve(normal + damping * np.diag(np.diag(normal)), -jacobian.T @ residual)
        trial = theta + step
        trial_sse = float(np.sum((trial[0] * x ** -trial[1] + trial[2] - losses) ** 2))
        if trial_sse < sse:
            theta, sse, damping = trial, trial_sse, max(damping / 3, 1e-12)
            if np.all(np.abs(step) <= 1e-13 * (np.abs(theta) + 1e-13)):
                break
        else:
            damping *= 4
            if damping > 1e12:
                break
    a, alpha, c = theta
    return float(a * scale**alpha), float(alpha), float(c)


@correct("fit_power_law", "zooming_grid")
def _(sizes, losses):
    """A grid of alpha zoomed in ten times around its best point; A and C by the normal
    equations of the 2 x 2 system, solved by hand."""
    if len(sizes) != len(losses):
        raise ValueError("sizes and losses differ in length")
    if len(sizes) < 3:
        raise ValueError("three unknowns need three points")
    sizes = np.array(sizes, dtype=np.float64)
    losses = np.array(losses, dtype=np.float64)
    if (sizes <= 0).any():
        raise ValueError("sizes must be positive")
    log_x = np.log(sizes) - np.log(sizes).mean()

    def solve(alpha):
        p = np.exp(-alpha * log_x)
        n, sp, spp = len(p), p.sum(), p @ p
        sl, spl = losses.sum(), p @ losses
        det = n * spp - sp * sp
        a = (n * spl - sp * sl) / det
        c = (spp * sl - sp * spl) / det
        return a, c, float(((a * p + c - losses) ** 2).sum())

    low, high = 1e-3, 4.0
    for _ in range(12):
        alphas = np.linspace(low, high, 41)
        errors = [solve(alpha)[2] for alpha in alphas]
        best = int(np.argmin(errors))
        step = alphas[1] - alphas[0]
        low, high = max(alphas[best] - step, 1e-6), alphas[best] + step
    alpha = (low + high) / 2
    a, c, _ = solve(alpha)
    return a * math.exp(alpha * np.log(sizes).mean()), alpha, c


@correct("learning_rate_at", "phase_by_phase")
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    for name, value in (("step", step), ("warmup_iters", warmup_iters)):
        if value < 0:
            raise ValueError(f"{name} must not be negative, got {value}")
    if step < warmup_iters:
        phase = "warm-up"
    elif step < decay_iters:
        phase = "decay"
    else:
        phase = "floor"
    if phase == "floor":
        return min_lr
    if phase == "warm-up":
        return max_lr / warmup_iters * (step + 1)
    angle = math.pi * (step - warmup_iters) / (decay_iters - warmup_iters)
    return max_lr - (max_lr - min_lr) * (1 - math.cos(angle)) / 2


@correct("mfu", "time_per_token")
def _(tokens_per_second, flops_per_token, peak_flops):
    """The time the peak needs for one token's FLOPs, over the time one token takes."""
    if peak_flops <= 0:
        raise ValueError("the peak must be positive")
    if tokens_per_second < 0 or flops_per_token < 0:
        raise ValueError("rates and counts must not be negative")
    if tokens_per_second == 0:
        return 0.0
    ideal_seconds = flops_per_token / peak_flops
    actual_seconds = 1 / tokens_per_second
    return ideal_seconds / actual_seconds
