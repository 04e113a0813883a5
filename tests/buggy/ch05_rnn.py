"""Known-buggy answers to the ch05_rnn exercise: mistakes learners really make.

Same layout as ``ch01_bigrams.py``: each function carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the
notebook must fail every one of them while the reference passes. ``ALTERNATIVES`` (at the end)
holds correct answers written differently (per-sample loops, ``torch.addmm``, ``F.linear``,
NumPy for the hand-written backward pass, all the tanh slopes first,
``torch.nn.utils.clip_grad_norm_``, ``math.hypot`` of the norms), which the hidden tests must
accept. The forward parts must be differentiable by autograd, so a NumPy step (even one wrapped
with ``requires_grad=True``) is a bug here. No entry calls the reference of a part of this
assignment: the grader withholds those (``like=`` only borrows a signature).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from mini_llm import rnn

from ._registry import new_registry

REFERENCE = ("mini_llm.rnn",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()
derived = bug.derived


def _states(xs, h0, W_xh, W_hh, b_h):
    """h_1 .. h_T as a list (a correct forward pass the backward bugs share)."""
    h, states = h0, []
    for t in range(xs.shape[1]):
        h = torch.tanh(xs[:, t] @ W_xh.T + h @ W_hh.T + b_h)
        states.append(h)
    return states


# -------------------------------------------------------------------------------- rnn_step


def _rnn_step(
    x_t, h_prev, W_xh, W_hh, b_h, *, activation=torch.tanh, whh_T=True, recurrent=True, bias=True
):
    """The right step; knobs: the ``activation``, W_hh used transposed (``whh_T``), the
    ``recurrent`` term and the ``bias`` inside the activation (False: added after it)."""
    pre = x_t @ W_xh.T
    if recurrent:
        pre = pre + h_prev @ (W_hh.T if whh_T else W_hh)
    return activation(pre + b_h) if bias else activation(pre) + b_h


_step_bug = bug.variants("rnn_step", _rnn_step, like=rnn.rnn_step)
_step_bug(
    "whh_not_transposed",
    "h_prev @ W_hh: the (out, in) recurrent matrix used as (in, out)",
    whh_T=False,
)
_step_bug(
    "forgets_h_prev", "tanh(x_t W_xhᵀ + b_h): the previous state is never used", recurrent=False
)
_step_bug("no_tanh", "returns the pre-activation: the tanh is missing", activation=lambda a: a)
_step_bug("relu", "ReLU instead of tanh", activation=torch.relu)
_step_bug(
    "bias_outside_tanh",
    "tanh(x_t W_xhᵀ + h_prev W_hhᵀ) + b_h: bias added after the tanh",
    bias=False,
)


# ----------------------------------------------------------------------------- rnn_forward


def _forward(xs, h0, W_xh, W_hh, b_h):
    return torch.stack(_states(xs, h0, W_xh, W_hh, b_h), dim=1)


_forward_bug = bug.variants("rnn_forward", _forward, like=rnn.rnn_forward)
_forward_bug(
    "starts_from_zeros",
    "the given h0 is ignored: every sequence starts from zeros",
    h0=derived(lambda a: torch.zeros_like(a.h0)),
)


@bug("rnn_forward", "last_state_only", "returns only h_T, shape (B, H)")
def _(xs, h0, W_xh, W_hh, b_h):
    return _states(xs, h0, W_xh, W_hh, b_h)[-1]


@bug("rnn_forward", "includes_h0", "h0 stacked in front: T + 1 states")
def _(xs, h0, W_xh, W_hh, b_h):
    return torch.stack([h0, *_states(xs, h0, W_xh, W_hh, b_h)], dim=1)


@bug(
    "rnn_forward", "h_not_carried", "every step starts again from h0 instead of the previous state"
)
def _(xs, h0, W_xh, W_hh, b_h):
    return torch.stack(
        [torch.tanh(xs[:, t] @ W_xh.T + h0 @ W_hh.T + b_h) for t in range(xs.shape[1])], dim=1
    )


@bug("rnn_forward", "time_batch_swapped", "loops over dim 0 (the batch) as if xs were time first")
def _(xs, h0, W_xh, W_hh, b_h):
    h, states = h0, []
    for t in range(xs.shape[0]):
        h = torch.tanh(xs[t] @ W_xh.T + h @ W_hh.T + b_h)
        states.append(h)
    return torch.stack(states, dim=0)


_forward_bug(
    "reversed_time",
    "reads the sequence from the last step to the first",
    xs=derived(lambda a: a.xs.flip(1)),
)


# ---------------------------------------------------------------------------- rnn_backward


def _backward(
    xs,
    h0,
    W_xh,
    W_hh,
    b_h,
    grad_hs,
    *,
    carry=True,
    whh_state="before",
    slope="own",
    h0_through_whh=True,
    backwards=True,
    whh_transposed=False,
):
    """BPTT with switches: every switch off its default is one of the bugs below."""
    states = _states(xs, h0, W_xh, W_hh, b_h)
    before = [h0, *states[:-1]]
    grads = {
        "W_xh": torch.zeros_like(W_xh),
        "W_hh": torch.zeros_like(W_hh),
        "b_h": torch.zeros_like(b_h),
    }
    d_hs = torch.zeros_like(grad_hs)
    from_later = torch.zeros_like(h0)
    steps = range(xs.shape[1])
    delta = torch.zeros_like(h0)
    for t in reversed(steps) if backwards else steps:
        d = grad_hs[:, t] + (from_later if carry else 0)
        if slope == "none":
            delta = d
        else:
            delta = d * (1 - (states[t] if slope == "own" else before[t]) ** 2)
        grads["W_xh"] = grads["W_xh"] + delta.T @ xs[:, t]
        h_for_whh = states[t] if whh_state == "after" else before[t]
        grads["W_hh"] = grads["W_hh"] + delta.T @ h_for_whh
        grads["b_h"] = grads["b_h"] + delta.sum(dim=0)
        from_later = delta @ (W_hh.T if whh_transposed else W_hh)
        d_hs[:, t] = d
    grads["h0"] = from_later if h0_through_whh else delta
    grads["hs"] = d_hs
    return grads


_backward_bug = bug.variants("rnn_backward", _backward, like=rnn.rnn_backward)
_backward_bug(
    "no_gradient_from_later",
    "d_t = grad_hs[:, t] only: nothing flows back from step t + 1",
    carry=False,
)
_backward_bug(
    "whh_with_h_t", "W_hh gradient pairs delta_t with h_t instead of h_{t-1}", whh_state="after"
)
_backward_bug(
    "no_tanh_derivative",
    "delta_t = d_t: the factor 1 - h_t² of the tanh is forgotten",
    slope="none",
)
_backward_bug("slope_of_previous_step", "tanh' taken at h_{t-1} instead of h_t", slope="previous")
_backward_bug(
    "h0_without_whh", "the h0 gradient is delta_1, missing the last @ W_hh", h0_through_whh=False
)
_backward_bug(
    "forward_in_time",
    "the loop runs t = 1 .. T: the carried gradient flows the wrong way",
    backwards=False,
)
_backward_bug(
    "whh_transposed_back",
    "delta_{t+1} @ W_hh.T carried back instead of delta_{t+1} @ W_hh",
    whh_transposed=True,
)
_backward_bug(
    "hs_is_grad_hs",
    "returns grad_hs itself as the gradient of the states",
    returns=lambda grads, a: {**grads, "hs": a.grad_hs.clone()},
)


# --------------------------------------------------------------------- clip_by_global_norm


def _positive(max_norm):
    if max_norm <= 0:
        raise ValueError("max_norm must be positive")


def _joint_norm(grads):
    return float(sum(float((g.double() ** 2).sum()) for g in grads) ** 0.5)


@bug("clip_by_global_norm", "per_tensor", "each tensor clipped to max_norm on its own")
def _(grads, max_norm):
    _positive(max_norm)
    clipped = [g * min(1.0, max_norm / (float(g.double().norm()) + 1e-6)) for g in grads]
    return clipped, _joint_norm(grads)


@bug("clip_by_global_norm", "clamp_entries", "torch.clamp of every entry to [-max_norm, max_norm]")
def _(grads, max_norm):
    _positive(max_norm)
    return [g.clamp(-max_norm, max_norm) for g in grads], _joint_norm(grads)


def _clip(
    grads,
    max_norm,
    *,
    checked=True,
    norm_of=_joint_norm,
    scale=lambda max_norm, norm: min(1.0, max_norm / (norm + 1e-6)),
    cast=lambda g: g,
):
    """The right clipping (``checked``: max_norm must be positive); knobs: the joint norm
    ``norm_of(grads)``, the ``scale(max_norm, norm)`` and a ``cast`` of each gradient."""
    if checked:
        _positive(max_norm)
    norm = norm_of(grads)
    return [cast(g) * scale(max_norm, norm) for g in grads], norm


_clip_bug = bug.variants("clip_by_global_norm", _clip, like=rnn.clip_by_global_norm)
_clip_bug(
    "norm_after_clipping",
    "returns the norm of the clipped gradients",
    returns=lambda out, a: (out[0], _joint_norm(out[0])),
)
_clip_bug(
    "always_rescale",
    "scale = max_norm / norm even when the norm is smaller",
    scale=lambda max_norm, norm: max_norm / (norm + 1e-6),
)
_clip_bug(
    "sum_of_norms",
    "the joint norm as the sum of the tensors' norms",
    norm_of=lambda grads: sum(float(g.double().norm()) for g in grads),
)
_clip_bug(
    "no_eps",
    "max_norm / norm without the 1e-6: all-zero gradients divide by 0",
    scale=lambda max_norm, norm: min(1.0, max_norm / norm),
)


@bug.input("clip_by_global_norm", "accepts_non_positive", "max_norm <= 0 is not refused")
def _(grads, max_norm):
    return _clip(grads, max_norm, checked=False)


# ------------------------------------------------- dtypes and the caller's data (issue 18)


@bug("rnn_forward", "float32_buffer", "states stored in torch.zeros(B, T, H): float32, rounded")
def _(xs, h0, W_xh, W_hh, b_h):
    B, T, _ = xs.shape
    hs = torch.zeros(B, T, W_hh.shape[0])
    h = h0
    for t in range(T):
        h = torch.tanh(xs[:, t] @ W_xh.T + h @ W_hh.T + b_h)
        hs[:, t] = h
    return hs


@bug("clip_by_global_norm", "in_place", "g.mul_(scale): clips the caller's tensors in place")
def _(grads, max_norm):
    _positive(max_norm)
    norm = _joint_norm(grads)
    for g in grads:
        g.mul_(min(1.0, max_norm / (norm + 1e-6)))
    return list(grads), norm


_clip_bug(
    "returns_float64",
    "[g.double() * scale ...]: float32 gradients come back float64",
    cast=lambda g: g.double(),
)


# ---------------------------------------------------------------- correct, written differently


@correct("rnn_step", "per_sample_mv")
def _(x_t, h_prev, W_xh, W_hh, b_h):
    rows = [torch.tanh(torch.mv(W_xh, x) + torch.mv(W_hh, h) + b_h) for x, h in zip(x_t, h_prev)]
    return torch.stack(rows)


@correct("rnn_step", "addmm")
def _(x_t, h_prev, W_xh, W_hh, b_h):
    return torch.tanh(torch.addmm(torch.addmm(b_h, x_t, W_xh.t()), h_prev, W_hh.t()))


@correct("rnn_forward", "preallocated")
def _(xs, h0, W_xh, W_hh, b_h):
    B, T, _ = xs.shape
    hs = torch.empty(B, T, W_hh.shape[0], dtype=xs.dtype)
    h = h0
    for t in range(T):
        h = torch.tanh(
            torch.einsum("bd,hd->bh", xs[:, t], W_xh) + torch.einsum("bk,hk->bh", h, W_hh) + b_h
        )
        hs[:, t] = h
    return hs


@correct("rnn_forward", "cat_of_unsqueezed")
def _(xs, h0, W_xh, W_hh, b_h):
    pieces, h = [], h0
    for x_t in xs.unbind(dim=1):
        h = torch.tanh(x_t @ W_xh.T + h @ W_hh.T + b_h)
        pieces.append(h.unsqueeze(1))
    return torch.cat(pieces, dim=1)


@correct("rnn_backward", "all_slopes_first_then_einsum")
def _(xs, h0, W_xh, W_hh, b_h, grad_hs):
    hs = torch.stack(_states(xs, h0, W_xh, W_hh, b_h), dim=1)  # (B, T, H)
    slopes = 1 - hs**2  # every tanh' at once
    T = xs.shape[1]
    deltas = torch.zeros_like(hs)
    d_hs = torch.zeros_like(hs)
    d = grad_hs[:, -1]
    for t in range(T - 1, -1, -1):
        d_hs[:, t] = d
        deltas[:, t] = d * slopes[:, t]
        if t > 0:
            d = grad_hs[:, t - 1] + deltas[:, t] @ W_hh
    before = torch.cat([h0[:, None], hs[:, :-1]], dim=1)
    return {
        "W_xh": torch.einsum("bth,btd->hd", deltas, xs),
        "W_hh": torch.einsum("bth,btk->hk", deltas, before),
        "b_h": deltas.sum(dim=(0, 1)),
        "h0": deltas[:, 0] @ W_hh,
        "hs": d_hs,
    }


@correct("rnn_backward", "numpy_per_step")
def _(xs, h0, W_xh, W_hh, b_h, grad_hs):
    x, g = xs.numpy(), grad_hs.numpy()
    Wx, Wh, b = W_xh.numpy(), W_hh.numpy(), b_h.numpy()
    h = [h0.numpy()]
    for t in range(x.shape[1]):
        h.append(np.tanh(x[:, t] @ Wx.T + h[-1] @ Wh.T + b))
    dWx, dWh, db = np.zeros_like(Wx), np.zeros_like(Wh), np.zeros_like(b)
    d_hs = np.zeros_like(g)
    carry = np.zeros_like(h[0])
    for t in range(x.shape[1], 0, -1):  # h[t] is h_t, h[t - 1] the state before
        d = g[:, t - 1] + carry
        d_hs[:, t - 1] = d
        delta = d * (1 - h[t] ** 2)
        dWx += delta.T @ x[:, t - 1]
        dWh += delta.T @ h[t - 1]
        db += delta.sum(axis=0)
        carry = delta @ Wh
    return {
        k: torch.from_numpy(v)
        for k, v in {"W_xh": dWx, "W_hh": dWh, "b_h": db, "h0": carry, "hs": d_hs}.items()
    }


@correct("clip_by_global_norm", "vector_norm_of_concatenation")
def _(grads, max_norm):
    if max_norm <= 0:
        raise ValueError("max_norm must be positive")
    norm = torch.linalg.vector_norm(torch.cat([g.double().flatten() for g in grads])).item()
    if norm <= max_norm:
        return list(grads), norm
    return [g * (max_norm / (norm + 1e-6)) for g in grads], norm


@correct("clip_by_global_norm", "torch_clip_grad_norm")
def _(grads, max_norm):
    if max_norm <= 0:
        raise ValueError("max_norm must be positive")
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads]
    for p, g in zip(params, grads):
        p.grad = g.detach().clone()
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return [p.grad for p in params], float(norm)


# ------------------------------------------ generated inputs and autograd (issue 31): new bugs


@bug(
    "rnn_step",
    "numpy_wrapped_requires_grad",
    "the step in NumPy, wrapped in torch.tensor(..., requires_grad=True): a flag, no graph",
)
def _(x_t, h_prev, W_xh, W_hh, b_h):
    x, h = x_t.detach().numpy(), h_prev.detach().numpy()
    Wx, Wh, b = W_xh.detach().numpy(), W_hh.detach().numpy(), b_h.detach().numpy()
    rows = [np.tanh(Wx @ x[i] + Wh @ h[i] + b) for i in range(x.shape[0])]
    return torch.tensor(np.stack(rows), requires_grad=True)


_step_bug(
    "detaches_h_prev",
    "h_prev.detach() inside the step (truncation in the wrong place): no gradient reaches h_prev",
    h_prev=derived(lambda a: a.h_prev.detach()),
)
_step_bug(
    "casts_to_float32",
    "x_t.float() and friends 'for speed': float64 inputs give a float32 state",
    activation=lambda a: torch.tanh(a.float()),
)
_step_bug(
    "tanh_from_exponentials",
    "tanh written as (e^2a - 1) / (e^2a + 1): nan once the pre-activation is large",
    activation=lambda a: (torch.exp(2 * a) - 1) / (torch.exp(2 * a) + 1),
)


@bug(
    "rnn_forward",
    "detaches_between_steps",
    "h = h.detach() after every step: right states, no gradient through time",
)
def _(xs, h0, W_xh, W_hh, b_h):
    h, states = h0, []
    for t in range(xs.shape[1]):
        h = torch.tanh(xs[:, t] @ W_xh.T + h @ W_hh.T + b_h)
        states.append(h)
        h = h.detach()
    return torch.stack(states, dim=1)


@bug(
    "rnn_forward",
    "float64_buffer",
    "states stored in torch.zeros(..., dtype=torch.float64): float32 inputs come back float64",
)
def _(xs, h0, W_xh, W_hh, b_h):
    B, T, _ = xs.shape
    hs = torch.zeros(B, T, W_hh.shape[0], dtype=torch.float64)
    h = h0
    for t in range(T):
        h = torch.tanh(xs[:, t] @ W_xh.T + h @ W_hh.T + b_h)
        hs[:, t] = h
    return hs


@bug(
    "rnn_forward", "writes_into_h0", "h = h0, then h[:] = new state: the caller's h0 is overwritten"
)
def _(xs, h0, W_xh, W_hh, b_h):
    h, states = h0, []
    for t in range(xs.shape[1]):
        h[:] = torch.tanh(xs[:, t] @ W_xh.T + h @ W_hh.T + b_h)
        states.append(h.clone())
    return torch.stack(states, dim=1)


@bug(
    "rnn_backward",
    "float32_accumulators",
    "dW = torch.zeros(H, D); dW += ...: the sums are float32 whatever the inputs",
)
def _(xs, h0, W_xh, W_hh, b_h, grad_hs):
    grads = _backward(xs, h0, W_xh, W_hh, b_h, grad_hs)
    for key in ("W_xh", "W_hh", "b_h"):
        total = torch.zeros(grads[key].shape)
        total += grads[key]
        grads[key] = total
    return grads


@bug(
    "rnn_backward",
    "adds_into_grad_hs",
    "d = grad_hs[:, t]; d += carried: a view, so the caller's grad_hs is changed",
)
def _(xs, h0, W_xh, W_hh, b_h, grad_hs):
    states = _states(xs, h0, W_xh, W_hh, b_h)
    grads = {k: torch.zeros_like(v) for k, v in (("W_xh", W_xh), ("W_hh", W_hh), ("b_h", b_h))}
    d_states, carried = [None] * len(states), torch.zeros_like(h0)
    for t in reversed(range(len(states))):
        d = grad_hs[:, t]
        d += carried
        delta = d * (1 - states[t] ** 2)
        grads["W_xh"] = grads["W_xh"] + delta.T @ xs[:, t]
        grads["W_hh"] = grads["W_hh"] + delta.T @ (states[t - 1] if t > 0 else h0)
        grads["b_h"] = grads["b_h"] + delta.sum(dim=0)
        carried = delta @ W_hh
        d_states[t] = d.clone()
    return {**grads, "h0": carried, "hs": torch.stack(d_states, dim=1)}


_backward_bug(
    "returns_float64",
    "everything .double() 'for accuracy': float32 inputs get float64 gradients",
    returns=lambda grads, a: {k: v.double() for k, v in grads.items()},
)


@bug.input(
    "clip_by_global_norm", "refuses_only_zero", "if max_norm == 0: a negative max_norm slips by"
)
def _(grads, max_norm):
    if max_norm == 0:
        raise ValueError("max_norm must not be 0")
    return _clip(grads, max_norm, checked=False)


@bug.input("clip_by_global_norm", "refuses_only_negative", "if max_norm < 0: max_norm = 0 slips by")
def _(grads, max_norm):
    if max_norm < 0:
        raise ValueError("max_norm must not be negative")
    return _clip(grads, max_norm, checked=False)


@bug.input(
    "clip_by_global_norm",
    "assert_not_valueerror",
    "assert max_norm > 0: AssertionError, not ValueError",
)
def _(grads, max_norm):
    assert max_norm > 0, "max_norm must be positive"
    return _clip(grads, max_norm, checked=False)


@bug.input(
    "clip_by_global_norm",
    "zero_gradients_return_early",
    "returns early when every gradient is zero, before checking max_norm",
)
def _(grads, max_norm):
    if _joint_norm(grads) == 0:
        return [g.clone() for g in grads], 0.0
    return _clip(grads, max_norm)


_clip_bug(
    "norm_as_tensor",
    "returns the norm as a 0-d tensor (torch.linalg.vector_norm), not a Python float",
    returns=lambda out, a: (out[0], torch.tensor(out[1])),
)
_clip_bug(
    "casts_to_float32",
    "[g.float() * scale ...]: float64 gradients come back float32",
    cast=lambda g: g.float(),
)


# ------------------------------------------------- correct, written differently (issue 31)


@correct("rnn_forward", "linear_then_addmm")
def _(xs, h0, W_xh, W_hh, b_h):
    inputs = F.linear(xs, W_xh, b_h).unbind(dim=1)  # T tensors (B, H)
    states = []
    h = h0
    for a in inputs:
        h = torch.tanh(torch.addmm(a, h, W_hh.t()))
        states.append(h)
    return torch.stack(states, dim=1)


@correct("clip_by_global_norm", "hypot_of_norms")
def _(grads, max_norm):
    if not max_norm > 0:
        raise ValueError("max_norm must be positive")
    norm = math.hypot(*(float(torch.linalg.vector_norm(g.double())) for g in grads))
    factor = max_norm / (norm + 1e-6)
    return [g * factor if factor < 1 else g.clone() for g in grads], norm
