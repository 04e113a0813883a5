"""Known-buggy answers to the ch12_gpu_training exercise: mistakes learners really make.

Same layout as ``ch09_transformer.py``: each function carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of
the notebook must fail every one of them while the reference passes. Among them are the
mistakes issue 14 lists: a warm-up off by one, a cosine that does not reach ``min_lr``, 2·N
instead of 6·N FLOPs, attention's FLOPs forgotten, MFU as a percentage, and a power law fitted
as a straight line in log-log space (no floor C). ``ALTERNATIVES`` (at the end) holds correct
answers written differently, which the hidden tests must accept.

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
_rate_bug("no_negative_check", "a negative step gets a rate instead of an error", checked=())
_rate_bug(
    "step_check_only",
    "checks the step but not warmup_iters: a negative warm-up gets a rate, not an error",
    checked=("step",),
)


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
_flops_bug("no_negative_check", "a negative size gets a count instead of an error", checked=False)


@bug(
    "flops_per_token",
    "layers_check_only",
    "checks n_layer only: a negative n_params, block_size or n_embd gets a count",
)
def _(n_params, n_layer, block_size, n_embd):
    if n_layer < 0:
        raise ValueError("negative n_layer")
    return 6 * n_params + 12 * n_layer * block_size * n_embd


# ------------------------------------------------------------------------------------------- mfu


def _mfu(tokens_per_second, flops_per_token, peak_flops, *, checked=True, scale=1, peak_unit=1):
    """The right MFU (with the inputs ``checked``), times ``scale``, the peak read in units of
    ``peak_unit`` FLOP/s."""
    if checked and (peak_flops <= 0 or tokens_per_second < 0 or flops_per_token < 0):
        raise ValueError("bad input")
    return scale * tokens_per_second * flops_per_token / (peak_flops * peak_unit)


_mfu_bug = bug.variants("mfu", _mfu, like=flops.mfu)
_mfu_bug("percentage", "returns a percentage (x 100) where a fraction is asked for", scale=100)
_mfu_bug("no_zero_peak_check", "divides by a peak of 0 (ZeroDivisionError, or inf)", checked=False)
_mfu_bug(
    "peak_in_tflops",
    "treats peak_flops as TFLOP/s: multiplies it by 1e12 again",
    peak_unit=1e12,
)


@bug(
    "mfu",
    "flops_unchecked",
    "checks the peak and the throughput but not flops_per_token: a negative count gets an MFU",
)
def _(tokens_per_second, flops_per_token, peak_flops):
    if peak_flops <= 0 or tokens_per_second < 0:
        raise ValueError("bad input")
    return tokens_per_second * flops_per_token / peak_flops


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


@bug("fit_power_law", "no_input_check", "two points or a size of 0 get a fit, not an error")
def _(sizes, losses):
    sizes, losses = np.asarray(sizes, dtype=float), np.asarray(losses, dtype=float)
    with np.errstate(all="ignore"):
        grid = np.linspace(1e-3, 4, 4000)
        alpha = min(grid, key=lambda a: _linear_fit(sizes, losses, a)[2])
        a, c, _ = _linear_fit(sizes, losses, alpha)
    return a, alpha, c


# -------------------------------------------------------------------- correct, written otherwise


@correct("learning_rate_at", "fraction_first")
def _(step, max_lr, min_lr, warmup_iters, decay_iters):
    if step < 0 or warmup_iters < 0:
        raise ValueError("step must not be negative")
    if step < warmup_iters:
        return (step + 1) / warmup_iters * max_lr
    progress = min(1.0, (step - warmup_iters) / max(1, decay_iters - warmup_iters))
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
    """Search the floor C instead of alpha: for a fixed C, log(L - C) is a line in log N."""
    sizes, losses = _checked(sizes, losses)

    def fit_for(c):
        slope, intercept = np.polyfit(np.log(sizes), np.log(losses - c), 1)
        a, alpha = math.exp(intercept), -slope
        return a, alpha, float(np.sum((a * sizes**-alpha + c - losses) ** 2))

    low, high = losses.min() - 10 * (losses.max() - losses.min()), losses.min() - 1e-12
    for _ in range(200):  # golden section on C
        left, right = high - 0.618034 * (high - low), low + 0.618034 * (high - low)
        if fit_for(left)[2] < fit_for(right)[2]:
            high = right
        else:
            low = left
    c = (low + high) / 2
    a, alpha, _ = fit_for(c)
    return a, alpha, c
