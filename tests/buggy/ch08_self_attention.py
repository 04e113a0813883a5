"""Known-buggy answers to the ch08_self_attention exercise: mistakes learners really make.

Same layout as ``ch07_attention.py``: each function carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the
notebook must fail every one of them while the reference passes. Among them are the mistakes of
the course's source documents (the exponent i/d in the positional encoding, a 4-D array
transposed as a whole when splitting heads). ``ALTERNATIVES`` (at the end) holds correct answers
written differently (einsum and a hand-written stable softmax, a comparison of positions, a
permute of an unflattened axis, NumPy loops), which the hidden tests must accept.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from mini_llm import self_attention

from ._registry import new_registry

REFERENCE = ("mini_llm.self_attention",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()
derived = bug.derived


def _masked_softmax_rows(scores, mask):
    """The correct masked softmax (zeros for a row with nothing allowed), shared by the bugs
    whose mistake lies elsewhere."""
    if mask is None:
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~mask, float("-inf"))
    some = mask.any(dim=-1, keepdim=True)
    return torch.softmax(torch.where(some, scores, 0.0), dim=-1) * some


def _scores(q, k):
    return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])


def _reversed_axes(t):
    """What ``.T`` does to a tensor of any number of axes."""
    return t.permute(*reversed(range(t.dim())))


def _filled_softmax(scores, mask, fill, dim=-1):
    """Masked scores set to ``fill``, then a plain softmax over ``dim``."""
    if mask is not None:
        scores = scores.masked_fill(~mask, fill)
    return torch.softmax(scores, dim=dim)


# ----------------------------------------------------------------- scaled_dot_product_attention


def _sdpa(q, k, v, mask=None, *, scores=_scores, weigh=_masked_softmax_rows):
    """Right attention in two steps a bug changes one of: ``scores(q, k)`` and the weights
    ``weigh(scores, mask)``."""
    weights = weigh(scores(q, k), mask)
    return weights @ v, weights


def _softmax_then_mask(scores, mask):
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        weights = weights * mask
    return weights


def _exp_without_max(scores, mask):
    e = torch.exp(scores)
    if mask is not None:
        e = e * mask
    total = e.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, e / total, 0.0)


_sdpa_bug = bug.variants(
    "scaled_dot_product_attention", _sdpa, like=self_attention.scaled_dot_product_attention
)
_sdpa_bug(
    "no_scaling",
    "the scores are not divided by sqrt(d_k)",
    scores=lambda q, k: q @ k.transpose(-2, -1),
)
_sdpa_bug(
    "divide_by_d_k",
    "the scores are divided by d_k instead of sqrt(d_k)",
    scores=lambda q, k: q @ k.transpose(-2, -1) / q.shape[-1],
)
_sdpa_bug(
    "softmax_over_queries",
    "softmax over dim=-2 (the queries) instead of the keys",
    weigh=lambda scores, mask: _filled_softmax(scores, mask, -1e9, dim=-2),
)
_sdpa_bug(
    "mask_inverted",
    "masked_fill(mask, -inf): the allowed positions are the ones removed",
    mask=derived(lambda a: None if a.mask is None else ~a.mask),
)
_sdpa_bug(
    "mask_after_softmax",
    "softmax of all scores, then multiplied by the mask: rows no longer sum to 1",
    weigh=_softmax_then_mask,
)
_sdpa_bug(
    "minus_1e9_fill",
    "masked scores set to -1e9: a fully masked row spreads its weight over the forbidden keys",
    weigh=lambda scores, mask: _filled_softmax(scores, mask, -1e9),
)
_sdpa_bug(
    "nan_on_empty_row",
    "masked scores set to -inf with nothing else: a fully masked row is nan",
    weigh=lambda scores, mask: _filled_softmax(scores, mask, float("-inf")),
)
_sdpa_bug(
    "exp_without_max",
    "softmax by hand without subtracting the row maximum: overflows",
    weigh=_exp_without_max,
)
_sdpa_bug(
    "k_dot_T",
    "q @ k.T: only right for 2-D inputs (.T reverses every axis)",
    scores=lambda q, k: q @ _reversed_axes(k) / math.sqrt(q.shape[-1]),
)


def _attention(q, k, v, mask=None, scale=None):
    """The reference's steps, for the bugs below that get only one thing wrong."""
    scores = q @ k.transpose(-2, -1) / (q.shape[-1] ** 0.5 if scale is None else scale)
    if mask is None:
        weights = torch.softmax(scores, dim=-1)
    else:
        some_key = mask.any(dim=-1, keepdim=True)
        scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(torch.where(some_key, scores, 0.0), dim=-1) * some_key
    return weights @ v, weights


@bug(
    "scaled_dot_product_attention",
    "scales_q_in_place",
    "q /= sqrt(d_k): right result, but the caller's queries shrink on every call",
)
def _(q, k, v, mask=None):
    q /= q.shape[-1] ** 0.5
    return _attention(q, k, v, mask, scale=1.0)


bug.variant(
    "scaled_dot_product_attention",
    "squeezed",
    "outputs .squeeze()d: a batch of one or a single query loses its axes",
    _attention,
    like=self_attention.scaled_dot_product_attention,
    returns=lambda out_weights, a: tuple(t.squeeze() for t in out_weights),
)


@bug(
    "scaled_dot_product_attention",
    "softmax_in_float64",
    "the softmax taken in float64 'for stability': float32 inputs come out float64",
)
def _(q, k, v, mask=None):
    _, weights = _attention(q.double(), k.double(), v.double(), mask)
    return weights @ v.double(), weights


@bug(
    "scaled_dot_product_attention",
    "detached_weights",
    "weights.detach() before the product with v: no gradient reaches q and k",
)
def _(q, k, v, mask=None):
    _, weights = _attention(q, k, v, mask)
    weights = weights.detach()
    return weights @ v, weights


# --------------------------------------------------------------------------------- causal_mask


def _checked_size(size):
    """ValueError for a negative size, as the contract says."""
    if size < 0:
        raise ValueError(size)
    return size


def _with_padding(allowed, size, padding, combine):
    """The (size, size) mask alone, or combined with the padding by ``combine``."""
    if padding is None:
        return allowed
    if padding.shape[-1] != size:
        raise ValueError(size)
    return combine(allowed, padding)


def _with_key_padding(allowed, padding):
    return allowed & padding[:, None, :]


def _causal(size, padding=None, *, future=False, dtype=torch.bool, combine=_with_key_padding):
    """The right mask; knobs: the ``future`` seen instead of the past, the ``dtype`` of the
    (size, size) mask and how it is combined with the padding (``combine(mask, padding)``)."""
    ones = torch.ones(_checked_size(size), _checked_size(size), dtype=dtype)
    allowed = ones.triu() if future else ones.tril()
    return _with_padding(allowed, size, padding, combine)


_causal_bug = bug.variants("causal_mask", _causal, like=self_attention.causal_mask)
_causal_bug("wrong_direction", "triu: each query sees the future and not the past", future=True)
_causal_bug(
    "padding_on_queries",
    "padding[:, :, None]: the padded queries are hidden instead of the padded keys",
    combine=lambda a, p: a & p[:, :, None],
)


@bug("causal_mask", "padding_ignored", "the padding argument is accepted and ignored")
def _(size, padding=None):
    if padding is not None and padding.shape[-1] != size:
        raise ValueError(size)
    return torch.ones(_checked_size(size), size, dtype=torch.bool).tril()


_causal_bug(
    "float_mask",
    "a float 0/1 mask: ~mask and masked_fill need bools",
    dtype=None,
    combine=lambda a, p: a * p[:, None, :],
)
_causal_bug(
    "padding_or",
    "causal OR padding: a real key in the future becomes visible",
    combine=lambda a, p: a | p[:, None, :],
)
_causal_bug(
    "squeezed",
    "(tril & padding[:, None, :]).squeeze(): a batch of one loses its batch axis",
    combine=lambda a, p: (a & p[:, None, :]).squeeze(),
)
_causal_bug(
    "unsqueezes_padding_in_place",
    "padding.unsqueeze_(1): the right mask, and the caller's padding becomes (B, 1, size)",
    combine=lambda a, p: a & p.unsqueeze_(1),
)


@bug(
    "causal_mask",
    "nested_list",
    "torch.tensor of a nested list of comparisons: size 0 gives shape (0,), not (0, 0)",
)
def _(size, padding=None):
    allowed = torch.tensor([[s <= t for s in range(size)] for t in range(_checked_size(size))])
    return _with_padding(allowed, size, padding, _with_key_padding)


# --------------------------------------------------------------------------------- split_heads


def _split_checked(x, n_heads):
    """(..., T, H, d/H), the features split but the axes not yet swapped; ValueError if d % H."""
    if n_heads < 1 or x.shape[-1] % n_heads:
        raise ValueError(x.shape[-1])
    return x.reshape(*x.shape[:-1], n_heads, x.shape[-1] // n_heads)


def _heads(x, n_heads, *, arrange=lambda x, n: _split_checked(x, n).transpose(-3, -2)):
    """The right split (ValueError if d % H), made by ``arrange(x, n_heads)``."""
    if n_heads < 1 or x.shape[-1] % n_heads:
        raise ValueError(x.shape[-1])
    return arrange(x, n_heads)


_heads_bug = bug.variants("split_heads", _heads, like=self_attention.split_heads)
_heads_bug(
    "view_without_transpose",
    "x.reshape(..., H, T, d/H) straight away: the right shape, the sequence cut into pieces",
    arrange=lambda x, n: x.reshape(*x.shape[:-2], n, x.shape[-2], x.shape[-1] // n),
)
_heads_bug(
    "interleaved_heads",
    "reshape to (..., T, d/H, H): head h gets every H-th feature",
    arrange=lambda x, n: x.reshape(*x.shape[:-1], x.shape[-1] // n, n).movedim(-1, -3),
)
_heads_bug(
    "whole_array_transposed",
    "the split array transposed as a whole (.T): every axis reversed",
    arrange=lambda x, n: _reversed_axes(_split_checked(x, n)),
)


@bug.input(
    "split_heads",
    "no_divisibility_check",
    "d // n_heads without a check: 10 features in 4 heads silently drop two",
)
def _(x, n_heads):
    *batch, T, d = x.shape
    width = d // n_heads
    return x[..., : n_heads * width].reshape(*batch, T, n_heads, width).transpose(-3, -2)


@bug(
    "split_heads",
    "width_minus_one",
    "x.view(*x.shape[:-1], n_heads, -1): an empty sequence (T = 0) cannot infer the -1",
)
def _(x, n_heads):
    if n_heads < 1 or x.shape[-1] % n_heads:
        raise ValueError(x.shape[-1])
    return x.view(*x.shape[:-1], n_heads, -1).transpose(-3, -2)


_heads_bug(
    "float_result",
    "a .float() at the end 'to be safe': float64 in, float32 out",
    returns=lambda heads, a: heads.float(),
)


@bug(
    "split_heads",
    "through_numpy",
    "split in NumPy and wrapped back in a new tensor: no gradient reaches x",
)
def _(x, n_heads):
    array = _split_checked(x.detach(), n_heads).numpy()
    return torch.tensor(array.swapaxes(-3, -2))


# ------------------------------------------------------------------ sinusoidal_positional_encoding


def _angle(p, j, d):
    return p / 10000 ** (2 * (j // 2) / d)


def _table(max_len, d_model, angle_of_column=_angle, even=torch.sin, odd=torch.cos):
    p = torch.arange(max_len, dtype=torch.float64)[:, None]
    columns = torch.arange(d_model, dtype=torch.float64)
    angles = angle_of_column(p, columns, d_model)
    return torch.where(columns.long() % 2 == 0, even(angles), odd(angles))


_table_bug = bug.variants(
    "sinusoidal_positional_encoding", _table, like=self_attention.sinusoidal_positional_encoding
)
_table_bug(
    "exponent_i_over_d",
    "exponent j/d for column j instead of 2*floor(j/2)/d: sin and cos of a pair at different frequencies",
    angle_of_column=lambda p, j, d: p / 10000 ** (j / d),
)
_table_bug(
    "sin_cos_swapped",
    "cos in the even columns, sin in the odd ones",
    even=torch.cos,
    odd=torch.sin,
)


@bug(
    "sinusoidal_positional_encoding",
    "halves_not_interleaved",
    "all the sines first, then all the cosines, instead of interleaved",
)
def _(max_len, d_model):
    half = (d_model + 1) // 2
    p = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = p / 10000 ** (2 * torch.arange(half, dtype=torch.float64) / d_model)
    return torch.cat([torch.sin(angles), torch.cos(angles[:, : d_model - half])], dim=1)


@bug(
    "sinusoidal_positional_encoding",
    "float64_table",
    "the right table left in float64: added to float32 embeddings it makes them float64",
)
def _(max_len, d_model):
    return _table(max_len, d_model)


_table_bug(
    "power_not_divided",
    "p * 10000^(2i/d): the frequencies grow instead of shrinking",
    angle_of_column=lambda p, j, d: p * 10000 ** (2 * (j // 2) / d),
)


@bug(
    "sinusoidal_positional_encoding",
    "odd_width_crash",
    "assumes an even d_model: an odd one raises",
)
def _(max_len, d_model):
    p = torch.arange(max_len, dtype=torch.float64)[:, None]
    angles = p / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    return torch.stack([torch.sin(angles), torch.cos(angles)], dim=-1).reshape(max_len, d_model)


@bug(
    "sinusoidal_positional_encoding",
    "rows_as_list",
    "torch.tensor of a list of rows: max_len = 0 gives shape (0,), not (0, d_model)",
)
def _(max_len, d_model):
    rows = [
        [
            (math.sin if j % 2 == 0 else math.cos)(p / 10000 ** (2 * (j // 2) / d_model))
            for j in range(d_model)
        ]
        for p in range(max_len)
    ]
    return torch.tensor(rows)


_table_bug(
    "integer_exponent",
    "2 * (j // 2) // d_model: integer division makes every exponent 0, every frequency 1",
    angle_of_column=lambda p, j, d: p / 10000 ** ((2 * (j // 2)) // d),
)


# ------------------------------------------------------------------------------ alternatives


@correct("scaled_dot_product_attention", "einsum_stable_softmax")
def _(q, k, v, mask=None):
    scores = torch.einsum("...td,...sd->...ts", q, k) * q.shape[-1] ** -0.5
    allowed = torch.ones_like(scores, dtype=torch.bool) if mask is None else mask.expand_as(scores)
    scores = torch.where(allowed, scores, torch.tensor(-math.inf, dtype=scores.dtype))
    top = scores.amax(dim=-1, keepdim=True)
    e = torch.exp(scores - torch.where(torch.isinf(top), 0.0, top))
    total = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(total == 0, 1.0, total)
    return torch.einsum("...ts,...sd->...td", weights, v), weights


@correct("scaled_dot_product_attention", "nan_to_num")
def _(q, k, v, mask=None):
    scores = torch.matmul(q, k.mT) / torch.tensor(float(q.size(-1))).sqrt()
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -torch.inf)
    weights = torch.nan_to_num(scores.softmax(-1), nan=0.0)
    return torch.matmul(weights, v), weights


@correct("causal_mask", "compare_positions")
def _(size, padding=None):
    if size < 0:
        raise ValueError("a negative size")
    position = torch.arange(size)
    allowed = position[None, :] <= position[:, None]
    if padding is not None:
        if padding.size(1) != size:
            raise ValueError("padding length")
        allowed = allowed.unsqueeze(0).logical_and(padding.unsqueeze(1))
    return allowed


@correct("causal_mask", "numpy_loops")
def _(size, padding=None):
    if padding is not None and padding.shape[1] != size:
        raise ValueError("padding length")
    rows = 1 if padding is None else padding.shape[0]
    out = np.zeros((rows, size, size), dtype=bool)
    for b in range(rows):
        for t in range(size):
            for s in range(t + 1):
                out[b, t, s] = True if padding is None else bool(padding[b, s])
    out = torch.from_numpy(out)
    return out[0] if padding is None else out


@correct("split_heads", "unflatten_movedim")
def _(x, n_heads):
    if n_heads <= 0 or x.size(-1) % n_heads != 0:
        raise ValueError("not divisible")
    return x.unflatten(-1, (n_heads, -1)).movedim(-2, -3)


@correct("split_heads", "stack_slices")
def _(x, n_heads):
    d = x.shape[-1]
    if not (n_heads > 0 and d % n_heads == 0):
        raise ValueError("not divisible")
    width = d // n_heads
    return torch.stack([x[..., h * width : (h + 1) * width] for h in range(n_heads)], dim=-3)


@correct("sinusoidal_positional_encoding", "numpy_loops")
def _(max_len, d_model):
    table = np.zeros((max_len, d_model))
    for p in range(max_len):
        for i in range(0, d_model, 2):
            angle = p / 10000 ** (i / d_model)
            table[p, i] = np.sin(angle)
            if i + 1 < d_model:
                table[p, i + 1] = np.cos(angle)
    return torch.tensor(table, dtype=torch.float32)


@correct("sinusoidal_positional_encoding", "exp_log_frequencies")
def _(max_len, d_model):
    frequencies = torch.exp(-math.log(10000.0) * torch.arange(0, d_model, 2) / d_model)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), frequencies)
    pairs = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)
    return pairs[:, :d_model]


# ------------------------------------------------------------------ more realistic mistakes
# Written from the classes the hidden tests used to miss: a finite mask fill against very low
# scores, faked autograd, a dtype lost on one path only, padding assumed at the end, a mask
# of the wrong dtype, invalid input checked at one value only.


def _finite_fill(fill):
    """Masked scores set to ``fill``, and rows with nothing allowed zeroed as the contract
    says: right everywhere except where the allowed scores are below ``fill``."""

    def weigh(scores, mask):
        if mask is None:
            return torch.softmax(scores, dim=-1)
        some = mask.any(dim=-1, keepdim=True)
        return torch.softmax(scores.masked_fill(~mask, fill), dim=-1) * some

    return weigh


_sdpa_bug(
    "minus_1e9_with_empty_rows",
    "masked scores set to -1e9 (empty rows zeroed): allowed scores below -1e9 lose to it",
    weigh=_finite_fill(-1e9),
)
_sdpa_bug(
    "minus_1e4_half_safe",
    "masked scores set to -1e4 'so that float16 holds it': allowed scores below -1e4 lose",
    weigh=_finite_fill(-1e4),
)


def _renormalised(scores, mask):
    weights = torch.softmax(scores, dim=-1)
    if mask is None:
        return weights
    weights = weights * mask
    total = weights.sum(dim=-1, keepdim=True)
    return torch.where(total > 0, weights / total, 0.0)


_sdpa_bug(
    "renormalised_after_softmax",
    "softmax of all scores, masked and divided by the new sum: a dominant masked key "
    "underflows the allowed weights to 0",
    weigh=_renormalised,
)


@bug(
    "scaled_dot_product_attention",
    "numpy_with_requires_grad",
    "computed in NumPy, wrapped with requires_grad=True: the flag, but no graph to q, k, v",
)
def _(q, k, v, mask=None):
    qn, kn, vn = (t.detach().numpy() for t in (q, k, v))
    scores = qn @ np.swapaxes(kn, -1, -2) / math.sqrt(qn.shape[-1])
    allowed = np.ones(scores.shape, bool) if mask is None else np.broadcast_to(mask, scores.shape)
    scores = np.where(allowed, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isfinite(top), top, 0.0))
    total = e.sum(axis=-1, keepdims=True)
    weights = np.where(total > 0, e / np.where(total > 0, total, 1.0), 0.0)

    def wrap(array):
        return torch.tensor(array, dtype=q.dtype, requires_grad=True)

    return wrap(weights @ vn), wrap(weights)


@bug(
    "scaled_dot_product_attention",
    "float64_softmax_unmasked",
    "torch.softmax(..., dtype=torch.float64) when there is no mask: float32 in, float64 out",
)
def _(q, k, v, mask=None):
    if mask is not None:
        return _attention(q, k, v, mask)
    weights = torch.softmax(_scores(q, k), dim=-1, dtype=torch.float64)
    return weights @ v.double(), weights


@bug.input(
    "causal_mask",
    "negative_size_runtime_error",
    "no check of size: a negative size fails inside torch.ones with RuntimeError",
)
def _(size, padding=None):
    allowed = torch.ones(size, size, dtype=torch.bool).tril()
    return _with_padding(allowed, size, padding, _with_key_padding)


@bug.input(
    "causal_mask",
    "only_longer_padding_refused",
    "checks padding.shape[1] > size only: a shorter padding fails with a broadcasting error",
)
def _(size, padding=None):
    allowed = torch.ones(_checked_size(size), size, dtype=torch.bool).tril()
    if padding is None:
        return allowed
    if padding.shape[1] > size:
        raise ValueError(size)
    return allowed & padding[:, None, :]


_causal_bug(
    "int_mask_with_padding",
    "with padding, tril.long() * padding: a 0/1 int mask, which ~ turns into -1/-2",
    combine=lambda a, p: a.long() * p[:, None, :],
)


@bug(
    "causal_mask",
    "padding_as_lengths",
    "padding turned into lengths (padding.sum(1)): right only when the padding is at the end",
)
def _(size, padding=None):
    allowed = torch.ones(_checked_size(size), size, dtype=torch.bool).tril()
    if padding is None:
        return allowed
    if padding.shape[-1] != size:
        raise ValueError(size)
    lengths = padding.sum(dim=1)
    return allowed & (torch.arange(size)[None, :] < lengths[:, None])[:, None, :]


@bug.input(
    "split_heads",
    "zero_heads_only",
    "refuses n_heads == 0 and non-divisors, but -2 heads of 6 features slip through",
)
def _(x, n_heads):
    if n_heads == 0 or x.shape[-1] % n_heads:
        raise ValueError(n_heads)
    return x.unflatten(-1, (abs(n_heads), -1)).transpose(-3, -2)


@bug.input(
    "split_heads",
    "zero_division",
    "d % n_heads checked without n_heads >= 1: zero heads raise ZeroDivisionError",
)
def _(x, n_heads):
    if x.shape[-1] % n_heads or n_heads < 0:
        raise ValueError(n_heads)
    return _split_checked(x, n_heads).transpose(-3, -2)


@bug(
    "split_heads",
    "numpy_with_requires_grad",
    "split in NumPy, wrapped with requires_grad=x.requires_grad: the flag, but no graph",
)
def _(x, n_heads):
    array = _split_checked(x.detach(), n_heads).numpy().swapaxes(-3, -2)
    return torch.tensor(array, dtype=x.dtype, requires_grad=x.requires_grad)


@bug(
    "split_heads",
    "float_for_integers",
    "x * 1.0 'to be safe' before the split: integer features come out float",
)
def _(x, n_heads):
    return _split_checked(x * 1.0, n_heads).transpose(-3, -2)


@correct("scaled_dot_product_attention", "loop_over_queries")
def _(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(k.shape[-1]))
    if mask is not None:
        scores = torch.where(mask, scores, -math.inf)
    rows = []
    for t in range(scores.shape[-2]):
        row = scores[..., t, :]
        top = row.amax(dim=-1, keepdim=True)
        e = torch.exp(row - torch.where(top == -math.inf, torch.zeros_like(top), top))
        total = e.sum(dim=-1, keepdim=True)
        rows.append(e / total.clamp_min(torch.finfo(e.dtype).tiny))
    weights = torch.stack(rows, dim=-2) if rows else torch.softmax(scores, dim=-1)
    return weights @ v, weights


@correct("causal_mask", "triu_complement")
def _(size, padding=None):
    if size < 0 or (padding is not None and padding.shape[1] != size):
        raise ValueError("size must be >= 0 and padding (B, size)")
    future = torch.ones(size, size, dtype=torch.bool).triu(diagonal=1)
    if padding is None:
        return ~future
    return ~future.expand(padding.shape[0], size, size) & padding.unsqueeze(-2)


@correct("split_heads", "permute_view")
def _(x, n_heads):
    if not isinstance(n_heads, int) or n_heads < 1 or x.shape[-1] % n_heads:
        raise ValueError("n_heads must divide d")
    n = x.dim()
    order = [*range(n - 2), n - 1, n - 2, n]
    return x.reshape(*x.shape[:-1], n_heads, x.shape[-1] // n_heads).permute(*order)
