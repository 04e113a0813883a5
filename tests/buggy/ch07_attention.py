"""Known-buggy answers to the ch07_attention exercise: mistakes learners really make.

Same layout as ``ch06_lstm.py``: each function carries the name of the exercise part it answers
and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the notebook
must fail every one of them while the reference passes. ``ALTERNATIVES`` (at the end) holds
correct answers written differently (a recursive speller, an explicit stable softmax, a loop
over the batch, a vectorised exact match), which the hidden tests must accept.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from mini_llm import seq2seq

from ._registry import new_registry

REFERENCE = ("mini_llm.seq2seq",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()

_ONES = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _group(m, ones=_ONES, tens=_TENS, *, ones_always=False, teens=True):
    """1 .. 999 in words, from the tables ``ones`` and ``tens``; knobs: the ones word said
    even when it is zero (``ones_always``), and ``teens`` (False: 13 is "ten three")."""
    words = []
    if m >= 100:
        words += [ones[m // 100], "hundred"]
        m %= 100
    if m >= 20 or (m >= 10 and not teens):
        words.append(tens[m // 10] if m >= 20 else "ten")
        m %= 10
    if m or ones_always:
        words.append(ones[m])
    return words


def _words(n, *, spell=_group, thousands_below=1000, rest_or_zero=False):
    """number_to_words, with the groups spelled by ``spell``; knobs: only the thousands below
    ``thousands_below`` are spelled, and the rest is said even when it is zero."""
    if not 0 <= n < 1_000_000:
        raise ValueError(n)
    if n == 0:
        return ["zero"]
    thousands, rest = divmod(n, 1000)
    head = spell(thousands % thousands_below) + ["thousand"] if thousands else []
    return head + (spell(rest) if rest else ["zero"] if rest_or_zero else [])


def _replaced(table, old, new):
    return [new if word == old else word for word in table]


# ---------------------------------------------------------------------------- number_to_words

_words_bug = bug.variants("number_to_words", _words, like=seq2seq.number_to_words)
_words_bug(
    "zero_after_round",
    "the ones word is always said: 40 -> forty zero, 300 -> three hundred zero",
    spell=functools.partial(_group, ones_always=True),
)
_words_bug(
    "teens_as_ten_plus",
    "10..19 said as 'ten' and a ones word: 13 -> ten three",
    spell=functools.partial(_group, teens=False),
)
_words_bug(
    "thousand_zero",
    "the rest is always said after 'thousand': 1000 -> one thousand zero",
    rest_or_zero=True,
)
_words_bug(
    "misspelled_fourteen",
    "'forteen' in the table of ones: 14 -> forteen",
    spell=functools.partial(_group, ones=_replaced(_ONES, "fourteen", "forteen")),
)
_words_bug(
    "misspelled_eighteen",
    "'eightteen' in the table of ones",
    spell=functools.partial(_group, ones=_replaced(_ONES, "eighteen", "eightteen")),
)
_words_bug(
    "seventy_pasted_as_sixty",
    "the tens table has 'sixty' twice: 70 -> sixty",
    spell=functools.partial(_group, tens=_replaced(_TENS, "seventy", "sixty")),
)


@bug.input(
    "number_to_words", "range_off_by_one", "accepts n = 1,000,000 (the check is n <= 1_000_000)"
)
def _(n):
    if not 0 <= n <= 1_000_000:
        raise ValueError(n)
    if n == 0:
        return ["zero"]
    thousands, rest = divmod(n, 1000)
    head = ["one", "million"] if thousands == 1000 else _group(thousands)
    return (head + (["thousand"] if thousands < 1000 else []) if thousands else []) + _group(rest)


_words_bug(
    "drops_hundred_thousands",
    "the thousands group only spelled below 100: 312005 -> twelve thousand five",
    thousands_below=100,
)


# ----------------------------------------------------------------------------- masked_softmax


@bug(
    "masked_softmax",
    "mask_after_softmax",
    "softmax of all scores, then multiplied by the mask: rows no longer sum to 1",
)
def _(scores, mask):
    return torch.softmax(scores, dim=-1) * mask


@bug(
    "masked_softmax",
    "negative_added_after",
    "a large negative added to the masked weights after the softmax",
)
def _(scores, mask):
    return torch.softmax(scores, dim=-1) + (~mask) * -1e9


@bug(
    "masked_softmax",
    "mask_inverted",
    "masked_fill(mask, -inf): the real positions are the ones removed",
)
def _(scores, mask):
    weights = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
    return torch.nan_to_num(weights)


@bug("masked_softmax", "dim_one", "softmax over dim=1, the last axis only for 2-D scores")
def _(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=1)


@bug(
    "masked_softmax",
    "no_max_shift",
    "exp of the raw scores without subtracting the maximum: overflows for large scores",
)
def _(scores, mask):
    e = torch.exp(scores) * mask
    return e / e.sum(dim=-1, keepdim=True)


@bug(
    "masked_softmax",
    "zero_fill",
    "masked scores set to 0 instead of -inf, so they keep a weight e^0",
)
def _(scores, mask):
    return torch.softmax(scores * mask, dim=-1)


@bug(
    "masked_softmax",
    "fills_scores_in_place",
    "masked_fill_ on the argument: right weights, but the caller's scores now hold -inf",
)
def _(scores, mask):
    return torch.softmax(scores.masked_fill_(~mask, float("-inf")), dim=-1)


@bug("masked_softmax", "always_float64", "scores.double() 'for precision': float32 in, float64 out")
def _(scores, mask):
    return torch.softmax(scores.double().masked_fill(~mask, float("-inf")), dim=-1)


@bug(
    "masked_softmax",
    "through_numpy",
    "the softmax in NumPy and wrapped back in a tensor: right values, no gradient",
)
def _(scores, mask):
    values = scores.detach().numpy().copy()
    values[~mask.numpy()] = -np.inf
    e = np.exp(values - values.max(axis=-1, keepdims=True))
    return torch.from_numpy(e / e.sum(axis=-1, keepdims=True))


@bug("masked_softmax", "squeezed", "a .squeeze() at the end: a batch of one loses its batch axis")
def _(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1).squeeze()


# ------------------------------------------------------------------------- additive_attention


def _softmax(scores, mask):
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)


def _scores(query, keys, W_q, W_k, v):
    return torch.tanh((query @ W_q.T)[:, None, :] + keys @ W_k.T) @ v


def _summed(weights, scores, keys, mask):
    return (weights[:, :, None] * keys).sum(dim=1)


def _einsum(weights, scores, keys, mask):
    return torch.einsum("bs,bsk->bk", weights, keys)


def _attention(query, keys, mask, W_q, W_k, v, *, scores=_scores, weigh=_softmax, context=_summed):
    """Right attention, in three steps a bug changes one of: ``scores(query, keys, W_q, W_k,
    v)``, the weights ``weigh(scores, mask)``, ``context(weights, scores, keys, mask)``."""
    s = scores(query, keys, W_q, W_k, v)
    weights = weigh(s, mask)
    return context(weights, s, keys, mask), weights


_attention_bug = bug.variants("additive_attention", _attention, like=seq2seq.additive_attention)
_attention_bug(
    "dot_product",
    "dot product of the two projections instead of v . tanh(sum)",
    scores=lambda q, k, W_q, W_k, v: ((k @ W_k.T) * (q @ W_q.T)[:, None, :]).sum(dim=-1),
)
_attention_bug(
    "no_tanh",
    "the tanh is missing: v . (W_q s + W_k h_j), a linear score",
    scores=lambda q, k, W_q, W_k, v: ((q @ W_q.T)[:, None, :] + k @ W_k.T) @ v,
)
_attention_bug(
    "weights_not_transposed",
    "query @ W_q and keys @ W_k: the (out, in) weights used untransposed",
    scores=lambda q, k, W_q, W_k, v: torch.tanh((q @ W_q)[:, None, :] + k @ W_k) @ v,
)
_attention_bug(
    "no_mask",
    "plain softmax: the padding positions get weight too",
    weigh=lambda s, mask: torch.softmax(s, dim=-1),
)
_attention_bug(
    "context_from_scores",
    "the context weighs the keys by the raw scores, not the softmax weights",
    context=lambda w, s, k, mask: (s.masked_fill(~mask, 0.0)[:, :, None] * k).sum(dim=1),
)
_attention_bug(
    "sum_wrong_axis",
    "the weighted keys summed over the feature axis: context (B, S)",
    context=lambda w, s, k, mask: (w[:, :, None] * k).sum(dim=-1),
)
_attention_bug(
    "squeezed_context",
    "context.squeeze(): right for two sentences or more, a batch of one loses its batch axis",
    context=_einsum,
    returns=lambda cw, a: (cw[0].squeeze(), cw[1].squeeze()),
)
_attention_bug(
    "detached_scores",
    "scores taken with .detach() (to 'save memory'): right values, W_q, W_k and v never learn",
    scores=lambda *args: _scores(*args).detach(),
    context=lambda w, s, k, mask: torch.einsum("bs,bsk->bk", w, k.detach()),
)


@bug("additive_attention", "float64_buffers", "context filled into a new float64 buffer")
def _(query, keys, mask, W_q, W_k, v):
    _, weights = _attention(query, keys, mask, W_q, W_k, v)
    context = torch.zeros(keys.shape[0], keys.shape[2], dtype=torch.float64)
    for j in range(keys.shape[1]):
        context = context + weights[:, j, None] * keys[:, j]
    return context, weights


# -------------------------------------------------------------------------------- exact_match


def _exact(predicted, target, eos, *, cut=lambda row, gold, eos: gold.index(eos) + 1, share=True):
    """The right score, comparing each row up to ``cut(row, gold, eos)`` (None: the whole
    row); ``share`` False: the number of rows that match."""
    hits = 0
    for row, gold in zip(predicted.tolist(), target.tolist()):
        end = cut(row, gold, eos)
        hits += row[:end] == gold[:end]
    return hits / len(target) if share else float(hits)


_exact_bug = bug.variants("exact_match", _exact, like=seq2seq.exact_match)
_exact_bug(
    "whole_rows",
    "compares the whole padded rows, so anything after </s> counts",
    cut=lambda row, gold, eos: None,
)
_exact_bug(
    "stops_before_eos",
    "compares the digits before the target's </s> only: a missing </s> goes unnoticed",
    cut=lambda row, gold, eos: gold.index(eos),
)
_exact_bug(
    "predicted_eos",
    "cuts both rows at the PREDICTION's first </s> (or its end): a translation cut short counts as right",
    cut=lambda row, gold, eos: row.index(eos) + 1 if eos in row else len(row),
)
_exact_bug("count_not_share", "returns the number of matching rows, not their share", share=False)


@bug(
    "exact_match",
    "per_token_accuracy",
    "the share of correct tokens up to </s>, not of correct rows",
)
def _(predicted, target, eos):
    right = total = 0
    for row, gold in zip(predicted.tolist(), target.tolist()):
        gold = gold[: gold.index(eos) + 1]
        right += sum(p == g for p, g in zip(row, gold))
        total += len(gold)
    return right / total


@bug(
    "exact_match",
    "pads_target_in_place",
    "writes padding after each </s> into the caller's tensors to compare whole rows",
)
def _(predicted, target, eos):
    width = max(predicted.shape[1], target.shape[1])
    for rows in (predicted, target):
        for row in rows:
            ends = (row == eos).nonzero()
            if len(ends):
                row[int(ends[0]) + 1 :] = -1
    gold = torch.nn.functional.pad(target, (0, width - target.shape[1]), value=-1)
    guess = torch.nn.functional.pad(predicted, (0, width - predicted.shape[1]), value=-1)
    return float((gold == guess).all(dim=1).float().mean())


# ------------------------------------------------------------------------------ alternatives


@correct("number_to_words", "recursive")
def _(n):
    small = dict(enumerate(_ONES))
    decades = dict(enumerate(_TENS[2:], start=2))
    if not isinstance(n, (int, np.integer)) or n < 0 or n > 999_999:
        raise ValueError("out of range")
    if n < 20:
        return [small[n]]
    if n < 100:
        return [decades[n // 10]] + (number_to_words(n % 10) if n % 10 else [])
    if n < 1000:
        return [small[n // 100], "hundred"] + (number_to_words(n % 100) if n % 100 else [])
    return (
        number_to_words(n // 1000) + ["thousand"] + (number_to_words(n % 1000) if n % 1000 else [])
    )


number_to_words = ALTERNATIVES["number_to_words"]["recursive"]  # the recursion calls itself


@correct("number_to_words", "digit_strings")
def _(n):
    if n not in range(1_000_000):
        raise ValueError(n)
    out = []
    for group, label in ((n // 1000, ["thousand"]), (n % 1000, [])):
        if group == 0:
            continue
        h, t, o = group // 100, group // 10 % 10, group % 10
        if h:
            out += [_ONES[h], "hundred"]
        if t == 1:
            out.append(_ONES[10 + o])
        else:
            if t:
                out.append(_TENS[t])
            if o:
                out.append(_ONES[o])
        out += label
    return out or ["zero"]


@correct("masked_softmax", "explicit_stable")
def _(scores, mask):
    top = scores.masked_fill(~mask, float("-inf")).amax(dim=-1, keepdim=True)
    e = torch.exp((scores - top).masked_fill(~mask, float("-inf")))
    return e / e.sum(dim=-1, keepdim=True)


@correct("masked_softmax", "where_log_softmax")
def _(scores, mask):
    filled = torch.where(mask, scores, torch.full_like(scores, -torch.inf))
    return torch.log_softmax(filled, dim=-1).exp()


@correct("additive_attention", "loop_over_positions")
def _(query, keys, mask, W_q, W_k, v):
    q = W_q @ query.T  # (A, B)
    scores = torch.stack(
        [torch.tanh(q + W_k @ keys[:, j].T).T @ v for j in range(keys.shape[1])], dim=1
    )
    scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype))
    weights = torch.softmax(scores, dim=1)
    return torch.bmm(weights[:, None, :], keys)[:, 0], weights


@correct("additive_attention", "linear_functional")
def _(query, keys, mask, W_q, W_k, v):
    hidden = torch.tanh(
        torch.nn.functional.linear(query, W_q).unsqueeze(1) + torch.nn.functional.linear(keys, W_k)
    )
    scores = (hidden * v).sum(-1)
    e = torch.exp(scores - scores.max(dim=1, keepdim=True).values) * mask
    weights = e / e.sum(dim=1, keepdim=True)
    return (weights.unsqueeze(-1) * keys).sum(1), weights


@correct("exact_match", "vectorised")
def _(predicted, target, eos):
    width = max(predicted.shape[1], target.shape[1])
    pad = -1  # no real id: a prediction that stops early never matches
    p = torch.nn.functional.pad(predicted, (0, width - predicted.shape[1]), value=pad)
    t = torch.nn.functional.pad(target, (0, width - target.shape[1]), value=pad)
    end = (t == eos).int().argmax(dim=1)  # first </s> of the target
    inside = torch.arange(width)[None, :] <= end[:, None]
    return ((p == t) | ~inside).all(dim=1).double().mean().item()


@correct("exact_match", "numpy_rows")
def _(predicted, target, eos):
    predicted, target = np.asarray(predicted), np.asarray(target)
    matches = []
    for row, gold in zip(predicted, target):
        end = int(np.flatnonzero(gold == eos)[0]) + 1
        matches.append(len(row) >= end and bool(np.array_equal(row[:end], gold[:end])))
    return float(np.mean(matches))


# ------------------------------------------------------------------ more realistic mistakes
# Written from the classes the hidden tests used to miss: invalid input beyond one value,
# faked autograd, a finite mask fill against very low scores, one shape or dtype only, data
# that never exercises the rule (an end token that is always 2).


@bug.input(
    "number_to_words",
    "negatives_accepted",
    "only n >= 1,000,000 is refused: a negative n is spelled as n % 1,000,000",
)
def _(n):
    if n >= 1_000_000:
        raise ValueError(n)
    return _words(n % 1_000_000)


@bug.input(
    "number_to_words",
    "abs_of_negative",
    "n = abs(n) 'to be safe': -42 is spelled forty two instead of refused",
)
def _(n):
    return _words(abs(n))


def _filled(scores, mask, fill):
    return torch.softmax(scores.masked_fill(~mask, fill), dim=-1)


@bug(
    "masked_softmax",
    "fill_minus_1e9",
    "masked scores set to -1e9: real scores below -1e9 lose to the padding",
)
def _(scores, mask):
    return _filled(scores, mask, -1e9)


@bug(
    "masked_softmax",
    "numpy_with_requires_grad",
    "the softmax in NumPy, wrapped with requires_grad=True: the flag, but no graph",
)
def _(scores, mask):
    values = scores.detach().numpy().copy()
    values[~np.broadcast_to(mask.numpy(), values.shape)] = -np.inf
    e = np.exp(values - values.max(axis=-1, keepdims=True))
    return torch.tensor(e / e.sum(axis=-1, keepdims=True), dtype=scores.dtype, requires_grad=True)


@bug(
    "masked_softmax",
    "global_max_shift",
    "subtracts the largest score of the whole tensor, not of each row: far-apart rows underflow",
)
def _(scores, mask):
    e = torch.exp(scores - scores.max()) * mask
    return e / e.sum(dim=-1, keepdim=True)


@bug(
    "masked_softmax",
    "float32_always",
    "scores.float() 'to save memory': float64 scores come out float32",
)
def _(scores, mask):
    return _filled(scores.float(), mask, float("-inf"))


_attention_bug(
    "fill_minus_1e9",
    "masked scores set to -1e9: real scores below -1e9 lose to the padding",
    weigh=lambda s, mask: _filled(s, mask, -1e9),
)
_attention_bug(
    "squeezed_scores",
    "(tanh(...) @ v[:, None]).squeeze(): one source position loses its axis",
    scores=lambda q, k, W_q, W_k, v: (
        torch.tanh((q @ W_q.T)[:, None, :] + k @ W_k.T) @ v[:, None]
    ).squeeze(),
)


@bug(
    "additive_attention",
    "numpy_with_requires_grad",
    "computed in NumPy, wrapped with requires_grad=True: right values, nothing learns",
)
def _(query, keys, mask, W_q, W_k, v):
    q, k, wq, wk, a = (t.detach().numpy() for t in (query, keys, W_q, W_k, v))
    scores = np.tanh((q @ wq.T)[:, None, :] + k @ wk.T) @ a
    scores = np.where(mask.numpy(), scores, -np.inf)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights = e / e.sum(axis=1, keepdims=True)
    context = (weights[:, :, None] * k).sum(axis=1)
    return (
        torch.tensor(context, dtype=keys.dtype, requires_grad=True),
        torch.tensor(weights, dtype=keys.dtype, requires_grad=True),
    )


@bug(
    "additive_attention",
    "float32_context_buffer",
    "context summed into torch.zeros(B, K), float32 by default: float64 keys give float32",
)
def _(query, keys, mask, W_q, W_k, v):
    _, weights = _attention(query, keys, mask, W_q, W_k, v)
    context = torch.zeros(keys.shape[0], keys.shape[2])
    for j in range(keys.shape[1]):
        context += weights[:, j, None] * keys[:, j]
    return context, weights


_exact_bug(
    "eos_is_two",
    "the end token written as 2, the id of every example, instead of the eos given",
    cut=lambda row, gold, eos: gold.index(2) + 1 if 2 in gold else len(gold),
)
_exact_bug(
    "last_eos",
    "cuts at the target's LAST </s>: a target padded with </s> is compared too far",
    cut=lambda row, gold, eos: len(gold) - gold[::-1].index(eos),
)


@correct("masked_softmax", "logsumexp")
def _(scores, mask):
    filled = scores.masked_fill(mask.logical_not(), -torch.inf)
    shifted = filled - filled.amax(dim=-1, keepdim=True)
    return torch.exp(shifted - torch.logsumexp(shifted, dim=-1, keepdim=True))


masked_softmax = ALTERNATIVES["masked_softmax"]["logsumexp"]  # called by a later part


@correct("additive_attention", "calls_masked_softmax")
def _(query, keys, mask, W_q, W_k, v):
    # a later part may call the learner's own earlier one (graded with the reference's)
    scores = torch.einsum(
        "bsa,a->bs",
        torch.tanh(
            torch.einsum("aq,bq->ba", W_q, query)[:, None] + torch.einsum("ak,bsk->bsa", W_k, keys)
        ),
        v,
    )
    weights = masked_softmax(scores, mask)
    return torch.bmm(weights.unsqueeze(1), keys).squeeze(1), weights


@correct("exact_match", "string_rows")
def _(predicted, target, eos):
    def text(row, end):
        return ",".join(str(t) for t in row[:end])

    rows = []
    for guess, gold in zip(predicted.tolist(), target.tolist()):
        end = next(i for i, t in enumerate(gold) if t == eos) + 1
        rows.append(len(guess) >= end and text(guess, end) == text(gold, end))
    return sum(rows) / len(rows)
