"""Known-buggy answers to the ch02_ngrams exercise: mistakes learners really make.

Same layout as ``ch01_bigrams.py``: each function carries the name of the exercise function it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of
the notebook must fail every one of them while the reference passes.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from mini_llm import evaluation, smoothing

from ._registry import new_registry

REFERENCE = ("mini_llm.smoothing", "mini_llm.evaluation")
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()
derived = bug.derived


def checked_ids(ids, vocab_size: int) -> np.ndarray:
    """``ids`` as an int64 array, with ValueError for an id outside ``0 .. vocab_size - 1``
    (the registry's helper, restated: an answer cell of tests/test_grading_assignments.py
    drops only the line that imports ``new_registry``)."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError("token id outside the vocabulary")
    return ids


# ---------------------------------------------------------------------------- ngram_counts


def _table(grams, vocab_size):
    """The (contexts, counts) table of an (N, n) array of n-grams, counted correctly."""
    contexts, row = np.unique(grams[:, :-1], axis=0, return_inverse=True)
    counts = np.zeros((len(contexts), vocab_size), dtype=np.int64)
    np.add.at(counts, (row.reshape(-1), grams[:, -1]), 1)
    return contexts, counts


def _windows(padded_sequences, n):
    windows = [sliding_window_view(p, n) for p in padded_sequences if len(p) >= n]
    return np.concatenate(windows) if windows else np.empty((0, n), dtype=np.int64)


def _order(n):
    if n < 1:
        raise ValueError("n must be >= 1")


def _counts(sequences, n, vocab_size, bos_id=0, *, padding=None, keep_bos=False, last=True):
    """The right table; knobs: the ``padding`` (None: n - 1 extra <s>), the sequence's own <s>
    kept (``keep_bos``), and the ``last`` n-gram (False: the one ending in </s> is lost)."""
    _order(n)
    extra = n - 1 if padding is None else padding
    padded = [
        np.concatenate([np.full(extra, bos_id), checked_ids(s, vocab_size)[0 if keep_bos else 1 :]])
        for s in sequences
    ]
    return _table(_windows(padded if last else [p[:-1] for p in padded], n), vocab_size)


_counts_bug = bug.variants("ngram_counts", _counts, like=smoothing.ngram_counts)
_counts_bug(
    "no_padding",
    "keeps the single <s>: short names and first letters lose n-grams",
    padding=0,
    keep_bos=True,
)


@bug("ngram_counts", "across_sequences", "pads once and concatenates: n-grams span two names")
def _(sequences, n, vocab_size, bos_id=0):
    _order(n)
    ids = np.concatenate([checked_ids(s, vocab_size)[1:] for s in sequences])
    return _table(_windows([np.concatenate([np.full(n - 1, bos_id), ids])], n), vocab_size)


_counts_bug(
    "unigram_keeps_bos", "pads with n - 1 extra <s>, keeping the original one", keep_bos=True
)


@bug("ngram_counts", "fancy_index_increment", "counts[rows, targets] += 1: repeats add once")
def _(sequences, n, vocab_size, bos_id=0):
    _order(n)
    padded = [
        np.concatenate([np.full(n - 1, bos_id), checked_ids(s, vocab_size)[1:]]) for s in sequences
    ]
    grams = _windows(padded, n)
    contexts, row = np.unique(grams[:, :-1], axis=0, return_inverse=True)
    counts = np.zeros((len(contexts), vocab_size), dtype=np.int64)
    counts[row.reshape(-1), grams[:, -1]] += 1
    return contexts, counts


@bug("ngram_counts", "insertion_order", "a dict of contexts in the order first seen, not sorted")
def _(sequences, n, vocab_size, bos_id=0):
    _order(n)
    table: dict[tuple, np.ndarray] = {}
    for s in sequences:
        padded = [bos_id] * (n - 1) + checked_ids(s, vocab_size)[1:].tolist()
        for i in range(len(padded) - n + 1):
            row = table.setdefault(tuple(padded[i : i + n - 1]), np.zeros(vocab_size, np.int64))
            row[padded[i + n - 1]] += 1
    contexts = np.array(list(table), dtype=np.int64).reshape(len(table), n - 1)
    return contexts, np.array(list(table.values()))


_counts_bug(
    "drops_last_gram", "range(len(padded) - n): the n-gram ending in </s> is lost", last=False
)


# --------------------------------------------------------------------- add_k_probabilities


def _valid(counts, k):
    counts = np.asarray(counts, dtype=np.float64)
    if k < 0 or (counts < 0).any():
        raise ValueError("bad input")
    return counts


def _add_k(counts, k, *, checked=True, kv=True, axis=1, empty=None):
    """The right probabilities (``checked``: k and the counts not negative); knobs: the
    denominator c(h) + kV (``kv`` False: c(h) + k), the ``axis`` of the totals and the value of
    a row whose total is 0 (``empty``; None: the uniform 1 / V)."""
    counts = _valid(counts, k) if checked else np.asarray(counts, dtype=np.float64)
    smoothed = counts + k
    totals = (smoothed if kv else counts).sum(axis=axis, keepdims=True) + (0 if kv else k)
    fill = np.full_like(smoothed, 1.0 / smoothed.shape[1] if empty is None else empty)
    return np.divide(smoothed, totals, out=fill, where=totals > 0)


_add_k_bug = bug.variants("add_k_probabilities", _add_k, like=smoothing.add_k_probabilities)
_add_k_bug("denominator_plus_k", "divides by c(h) + k instead of c(h) + kV", kv=False)
_add_k_bug("normalises_columns", "divides by column totals (axis=0)", axis=0)
_add_k_bug("nan_on_unseen_rows", "plain division: k = 0 and an empty row give nan", empty=np.nan)


@bug("add_k_probabilities", "in_place", "counts += k: changes the caller's float array")
def _(counts, k):
    counts = _valid(counts, k)  # np.asarray does not copy an array that is already float
    counts += k
    totals = counts.sum(axis=1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / counts.shape[1])
    return np.divide(counts, totals, out=uniform, where=totals > 0)


@bug.input("add_k_probabilities", "no_validation", "accepts a negative k")
def _(counts, k):
    return _add_k(counts, k, checked=False)


# ------------------------------------------------------------------------------ interpolate


def _checked_weights(probabilities, weights):
    weights = np.asarray(weights, dtype=np.float64)
    if (
        len(weights) != len(probabilities)
        or (weights < 0).any()
        or not np.isclose(weights.sum(), 1.0)
    ):
        raise ValueError("bad weights")
    return weights


def _mix(probabilities, weights):
    """The right mixture, of the weights ``_checked_weights`` accepts."""
    weights = _checked_weights(probabilities, weights)
    return sum(w * np.asarray(p, dtype=np.float64) for w, p in zip(weights, probabilities))


bug.variant(
    "interpolate",
    "reversed_weights",
    "pairs weights[0] with the highest order",
    _mix,
    like=smoothing.interpolate,
    weights=derived(lambda a: np.asarray(a.weights, dtype=np.float64)[::-1]),
)


@bug.input(
    "interpolate", "renormalises", "divides by the sum of the weights instead of refusing bad ones"
)
def _(probabilities, weights):
    weights = np.asarray(weights, dtype=np.float64)
    if (weights < 0).any():
        raise ValueError("negative weight")
    mixture = sum(w * np.asarray(p, dtype=np.float64) for w, p in zip(weights, probabilities))
    return mixture / weights.sum()


@bug("interpolate", "plain_average", "averages the orders, ignoring the weights")
def _(probabilities, weights):
    _checked_weights(probabilities, weights)
    return np.mean([np.asarray(p, dtype=np.float64) for p in probabilities], axis=0)


@bug.input(
    "interpolate", "negative_weights", "checks only that the weights sum to 1, not their signs"
)
def _(probabilities, weights):
    weights = np.asarray(weights, dtype=np.float64)
    if len(weights) != len(probabilities) or not np.isclose(weights.sum(), 1.0):
        raise ValueError("bad weights")
    return sum(w * np.asarray(p, dtype=np.float64) for w, p in zip(weights, probabilities))


@bug.input("interpolate", "zip_truncates", "no length check: zip drops the arrays without a weight")
def _(probabilities, weights):
    weights = np.asarray(weights, dtype=np.float64)
    if (weights < 0).any() or not np.isclose(weights.sum(), 1.0):
        raise ValueError("bad weights")
    return sum(w * np.asarray(p, dtype=np.float64) for w, p in zip(weights, probabilities))


# ------------------------------------------------------------------------------- perplexity


def _probs(probabilities, *, nan=False):
    """The probabilities as float64, refused when empty, outside [0, 1] or (``nan`` False)
    nan."""
    probs = np.asarray(probabilities, dtype=np.float64)
    if probs.size == 0 or (probs < 0).any() or (probs > 1).any():
        raise ValueError("bad probabilities")
    if not nan and np.isnan(probs).any():
        raise ValueError("nan is not a probability")
    return probs


def _perplexity(probabilities, *, log=np.log, reduce=np.mean):
    """exp(-reduce(log p)) of the probabilities ``_probs`` accepts."""
    with np.errstate(divide="ignore"):
        return float(np.exp(-reduce(log(_probs(probabilities)))))


_perplexity_bug = bug.variants("perplexity", _perplexity, like=evaluation.perplexity)
_perplexity_bug("sum_not_mean", "exp of the total NLL instead of the average", reduce=np.sum)


@bug("perplexity", "arithmetic_mean", "1 / mean(p) instead of 1 / geometric mean")
def _(probabilities):
    return float(1 / _probs(probabilities).mean())


_perplexity_bug("mixed_bases", "np.log2 with np.exp", log=np.log2)
_perplexity_bug(
    "epsilon",
    "np.log(p + 1e-10): a zero probability gives a finite perplexity",
    log=lambda p: np.log(p + 1e-10),
)


@bug("perplexity", "product_underflows", "prod(p) ** (-1 / N): 0.1 ** 5000 underflows to 0")
def _(probabilities):
    probs = _probs(probabilities)
    with np.errstate(divide="ignore"):
        return float(np.prod(probs) ** (-1 / probs.size))


@bug.input("perplexity", "no_validation", "accepts an empty list (nan) and values above 1")
def _(probabilities):
    probs = np.asarray(probabilities, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.exp(-np.log(probs).sum() / probs.size))


# ----------------------------- the caller's data, special tokens, dtypes, a batch of one (issue 18)


_counts_bug("pads_with_zero", "pads with a hard-coded 0 instead of bos_id", bos_id=0)


@bug("ngram_counts", "pads_the_callers_lists", "inserts the extra <s> into the caller's lists")
def _(sequences, n, vocab_size, bos_id=0):
    _order(n)
    padded = []
    for sequence in sequences:
        checked_ids(sequence, vocab_size)
        ids = sequence if isinstance(sequence, list) else list(sequence)
        if n == 1:
            ids.pop(0)
        ids[:0] = [bos_id] * (n - 2)
        padded.append(np.asarray(ids, dtype=np.int64))
    return _table(_windows(padded, n), vocab_size)


@bug(
    "interpolate",
    "zeros_like_first",
    "np.zeros_like(probabilities[0]): integer tables stay integer",
)
def _(probabilities, weights):
    weights = _checked_weights(probabilities, weights)
    mixture = np.zeros_like(probabilities[0])
    for weight, probs in zip(weights, probabilities):
        mixture += weight * probs
    return mixture


@bug.input("perplexity", "nan_accepted", "checks p < 0 and p > 1 only: nan slips through as nan")
def _(probabilities):
    with np.errstate(divide="ignore"):
        return float(np.exp(-np.mean(np.log(_probs(probabilities, nan=True)))))


@bug("perplexity", "squeezed", "np.squeeze then len(): a single probability crashes")
def _(probabilities):
    probs = np.squeeze(_probs(probabilities))
    with np.errstate(divide="ignore"):
        return float(np.exp(-np.log(probs).sum() / len(probs)))


# ------------------------------------------------------- correct, but not like the reference
# Answers a learner may well write: dictionaries and loops, integer codes instead of np.unique,
# another but equal formula, log base 2. The hidden tests must accept them too.


@correct("ngram_counts", "dict_of_tuples")
def _(sequences, n, vocab_size, bos_id=0):
    if n < 1:
        raise ValueError("n must be at least 1")
    table: dict[tuple[int, ...], list[int]] = {}
    for sequence in sequences:
        tokens = [int(t) for t in sequence]
        for t in tokens:
            if t < 0 or t >= vocab_size:
                raise ValueError(f"token id {t} is not in 0..{vocab_size - 1}")
        padded = [bos_id] * (n - 1) + tokens[1:]
        for end in range(n - 1, len(padded)):
            context = tuple(padded[end - n + 1 : end])
            table.setdefault(context, [0] * vocab_size)[padded[end]] += 1
    keys = sorted(table)
    contexts = np.array(keys, dtype=np.int64).reshape(len(keys), n - 1)
    counts = np.array([table[key] for key in keys], dtype=np.int64).reshape(len(keys), vocab_size)
    return contexts, counts


@correct("ngram_counts", "base_v_codes")
def _(sequences, n, vocab_size, bos_id=0):
    if n < 1:
        raise ValueError(f"n = {n}: need n >= 1")
    codes = []  # each n-gram as one whole number: n digits in base V
    for sequence in sequences:
        ids = np.array(sequence, dtype=np.int64)
        if ((ids < 0) | (ids >= vocab_size)).any():
            raise ValueError("a token id is outside the vocabulary")
        padded = [bos_id] * (n - 1) + ids[1:].tolist()
        for start in range(len(padded) - n + 1):
            code = 0
            for token in padded[start : start + n]:
                code = code * vocab_size + token
            codes.append(code)
    # The context is the code without its last digit; sorting codes sorts the tuples.
    context_codes = sorted({code // vocab_size for code in codes})
    row_of = {code: row for row, code in enumerate(context_codes)}
    counts = np.zeros((len(context_codes), vocab_size), dtype=np.int64)
    for code in codes:
        counts[row_of[code // vocab_size], code % vocab_size] += 1
    contexts = np.zeros((len(context_codes), n - 1), dtype=np.int64)
    for row, code in enumerate(context_codes):
        for column in range(n - 2, -1, -1):  # the digits back, last one first
            code, contexts[row, column] = divmod(code, vocab_size)
    return contexts, counts


@correct("add_k_probabilities", "row_loop")
def _(counts, k):
    if k < 0:
        raise ValueError("k cannot be negative")
    table = np.array(counts, dtype=float)  # a copy: the caller's array stays
    if (table < 0).any():
        raise ValueError("a count is negative")
    vocab_size = table.shape[1]
    probs = np.empty_like(table)
    for i, row in enumerate(table):
        denominator = row.sum() + k * vocab_size
        if denominator == 0:
            probs[i] = 1 / vocab_size
        else:
            probs[i] = (row + k) / denominator
    return probs


@correct("add_k_probabilities", "shrink_towards_uniform")
def _(counts, k):
    # (c + k) / (c(h) + kV) = lam * c / c(h) + (1 - lam) / V with lam = c(h) / (c(h) + kV)
    counts = np.asarray(counts).astype(np.float64)
    if not k >= 0 or np.any(counts < 0):
        raise ValueError("k and the counts must be >= 0")
    vocab_size = counts.shape[1]
    totals = counts.sum(axis=1)
    probs = np.full(counts.shape, 1.0 / vocab_size)
    for i in np.flatnonzero(totals + k * vocab_size > 0):
        lam = totals[i] / (totals[i] + k * vocab_size)
        maximum_likelihood = counts[i] / totals[i] if totals[i] > 0 else 0.0
        probs[i] = lam * maximum_likelihood + (1 - lam) / vocab_size
    return probs


@correct("interpolate", "python_loop")
def _(probabilities, weights):
    weights = [float(w) for w in weights]
    if len(weights) != len(probabilities):
        raise ValueError("one weight per array, please")
    if min(weights) < 0 or abs(sum(weights) - 1) > 1e-9:
        raise ValueError("the weights must be >= 0 and add up to 1")
    mixture = None
    for weight, probs in zip(weights, probabilities):
        term = weight * np.asarray(probs, dtype=float)
        mixture = term if mixture is None else mixture + term
    return mixture


@correct("interpolate", "einsum")
def _(probabilities, weights):
    stacked = np.array([np.asarray(p, dtype=np.float64) for p in probabilities])
    lambdas = np.array(weights, dtype=np.float64).reshape(-1)
    if lambdas.size != stacked.shape[0]:
        raise ValueError(f"{stacked.shape[0]} arrays but {lambdas.size} weights")
    if np.any(lambdas < 0) or not np.isclose(lambdas.sum(), 1):
        raise ValueError("weights must be non-negative and sum to 1")
    return np.einsum("j,j...->...", lambdas, stacked)


@correct("perplexity", "math_loop")
def _(probabilities):
    probs = [float(p) for p in probabilities]
    if not probs:
        raise ValueError("empty input")
    for p in probs:
        if not 0 <= p <= 1:  # also refuses nan
            raise ValueError(f"{p} is not a probability")
    if 0.0 in probs:
        return math.inf
    nll = -sum(math.log(p) for p in probs) / len(probs)
    return math.exp(nll)


@correct("perplexity", "log2")
def _(probabilities):
    probs = np.array(probabilities, dtype=float).ravel()
    if len(probs) == 0 or not np.all((probs >= 0) & (probs <= 1)):
        raise ValueError("need at least one probability, each between 0 and 1")
    with np.errstate(divide="ignore"):
        bits = -np.mean(np.log2(probs))  # the average surprise in bits
    return float(2.0**bits)


# ------------------------------------- issue 31: what the generated hidden cases catch
# dtype and type, a begin token that is not 0 or that recurs, widths other than the visible
# tests', invalid input beyond the first kind, an ordering rule that needs three columns.


@bug("ngram_counts", "float_counts", "np.zeros((C, V)) without a dtype: float counts")
def _(sequences, n, vocab_size, bos_id=0):
    contexts, counts = _counts(sequences, n, vocab_size, bos_id)
    return contexts, counts.astype(np.float64)


@bug("ngram_counts", "returns_list", "return [contexts, counts]: a list, not the tuple asked for")
def _(sequences, n, vocab_size, bos_id=0):
    return list(_counts(sequences, n, vocab_size, bos_id))


@bug(
    "ngram_counts",
    "drops_every_bos",
    "ids[ids != bos_id] removes every begin token, not only the first one",
)
def _(sequences, n, vocab_size, bos_id=0):
    _order(n)
    padded = []
    for sequence in sequences:
        ids = checked_ids(sequence, vocab_size)
        padded.append(np.concatenate([np.full(n - 1, bos_id), ids[ids != bos_id]]))
    return _table(_windows(padded, n), vocab_size)


@bug(
    "ngram_counts",
    "lexsort_last_column_first",
    "np.lexsort(contexts.T) to sort: the LAST column decides first",
)
def _(sequences, n, vocab_size, bos_id=0):
    contexts, counts = _counts(sequences, n, vocab_size, bos_id)
    order = np.lexsort(contexts.T) if n > 1 else np.arange(len(contexts))
    return contexts[order], counts[order]


@bug.input(
    "ngram_counts", "upper_bound_only", "checks ids >= vocab_size, lets negative ids through"
)
def _(sequences, n, vocab_size, bos_id=0):
    _order(n)
    kept = []
    for sequence in sequences:
        ids = np.asarray(sequence, dtype=np.int64)
        if ids.max() >= vocab_size:
            raise ValueError("token id too large")
        kept.append(ids % vocab_size)  # a negative id quietly becomes a high one
    return _counts(kept, n, vocab_size, bos_id)


@bug.input("ngram_counts", "order_zero_only", "if n == 0: raise; a negative n is counted anyway")
def _(sequences, n, vocab_size, bos_id=0):
    if n == 0:
        raise ValueError("n must be at least 1")
    return _counts(sequences, max(n, 1), vocab_size, bos_id)


@bug(
    "add_k_probabilities",
    "float32_probabilities",
    "counts.astype(np.float32): probabilities rounded to float32",
)
def _(counts, k):
    smoothed = _valid(counts, k).astype(np.float32) + np.float32(k)
    totals = smoothed.sum(axis=1, keepdims=True)
    uniform = np.full_like(smoothed, 1.0 / smoothed.shape[1])
    return np.divide(smoothed, totals, out=uniform, where=totals > 0)


@bug("add_k_probabilities", "k_times_rows", "c(h) + k * len(counts): the number of rows for V")
def _(counts, k):
    counts = _valid(counts, k)
    totals = counts.sum(axis=1, keepdims=True) + k * counts.shape[0]
    uniform = np.full_like(counts, 1.0 / counts.shape[1])
    return np.divide(counts + k, totals, out=uniform, where=totals > 0)


@bug.input("add_k_probabilities", "k_checked_only", "refuses a negative k, not a negative count")
def _(counts, k):
    if k < 0:
        raise ValueError("k must be >= 0")
    return _add_k(counts, k, checked=False)


@bug.input(
    "add_k_probabilities",
    "negative_totals_only",
    "refuses rows whose smoothed total is negative instead of any negative count",
)
def _(counts, k):
    counts = np.asarray(counts, dtype=np.float64)
    if k < 0 or ((counts + k).sum(axis=1) < 0).any():
        raise ValueError("bad input")
    return _add_k(counts, k, checked=False)


@bug("interpolate", "float32_mixture", "np.zeros(shape, dtype=np.float32) as the accumulator")
def _(probabilities, weights):
    weights = _checked_weights(probabilities, weights)
    mixture = np.zeros(np.shape(probabilities[0]), dtype=np.float32)
    for weight, probs in zip(weights, probabilities):
        mixture += weight * np.asarray(probs, dtype=np.float32)
    return mixture


@bug("interpolate", "exact_sum", "sum(weights) != 1 refuses weights that sum to 1 up to rounding")
def _(probabilities, weights):
    weights = _checked_weights(probabilities, weights)
    if sum(weights.tolist()) != 1:
        raise ValueError("weights must sum to 1")
    return _mix(probabilities, weights)


@bug(
    "interpolate",
    "two_dimensional_only",
    "np.zeros((len(p), len(p[0]))): only 2-D tables of distributions work",
)
def _(probabilities, weights):
    weights = _checked_weights(probabilities, weights)
    first = np.asarray(probabilities[0])
    mixture = np.zeros((first.shape[0], first.shape[-1]) if first.ndim else ())
    for weight, probs in zip(weights, probabilities):
        mixture = mixture + weight * np.asarray(probs, dtype=np.float64).reshape(mixture.shape)
    return mixture


@bug.input("interpolate", "fewer_weights_only", "refuses too few weights; zip drops the extra ones")
def _(probabilities, weights):
    weights = np.asarray(weights, dtype=np.float64)
    if len(weights) < len(probabilities) or (weights < 0).any():
        raise ValueError("bad weights")
    if not np.isclose(weights[: len(probabilities)].sum(), 1.0):
        raise ValueError("bad weights")
    return sum(w * np.asarray(p, dtype=np.float64) for w, p in zip(weights, probabilities))


@bug.input("interpolate", "loose_sum", "abs(sum(weights) - 1) < 0.2 accepts sums of 0.9 and 1.1")
def _(probabilities, weights):
    weights = np.asarray(weights, dtype=np.float64)
    if len(weights) != len(probabilities) or (weights < 0).any():
        raise ValueError("bad weights")
    if abs(weights.sum() - 1) >= 0.2:
        raise ValueError("weights must sum to 1")
    return sum(w * np.asarray(p, dtype=np.float64) for w, p in zip(weights, probabilities))


@bug("perplexity", "math_log", "math.log in a loop: a probability of 0 raises instead of inf")
def _(probabilities):
    probs = _probs(probabilities)
    return math.exp(-sum(math.log(p) for p in probs.reshape(-1)) / probs.size)


@bug.input("perplexity", "clipped", "np.clip(p, 0, 1) instead of refusing values outside [0, 1]")
def _(probabilities):
    probs = np.clip(np.asarray(probabilities, dtype=np.float64), 0, 1)
    if probs.size == 0 or np.isnan(probs).any():
        raise ValueError("bad probabilities")
    with np.errstate(divide="ignore"):
        return float(np.exp(-np.log(probs).mean()))


@bug.input("perplexity", "nan_by_equality", "(probs == np.nan).any() is never True: nan accepted")
def _(probabilities):
    probs = np.asarray(probabilities, dtype=np.float64)
    if probs.size == 0 or (probs < 0).any() or (probs > 1).any() or (probs == np.nan).any():  # noqa: PLW0177
        raise ValueError("bad probabilities")
    with np.errstate(divide="ignore"):
        return float(np.exp(-np.log(probs).mean()))


@bug.input("perplexity", "zero_division", "sum / len with no check: [] raises ZeroDivisionError")
def _(probabilities):
    probs = [float(p) for p in probabilities]
    if any(not 0 <= p <= 1 for p in probs):
        raise ValueError("not a probability")
    with np.errstate(divide="ignore"):
        return float(np.exp(-sum(np.log(probs)) / len(probs)))


# ------------------------------------------ issue 31: more correct answers, written otherwise


@correct("ngram_counts", "sorted_tuples_and_counter")
def _(sequences, n, vocab_size, bos_id=0):
    if not n >= 1:
        raise ValueError("n must be 1 or more")
    grams = []
    for sequence in sequences:
        tokens = [int(t) for t in sequence]
        if any(t < 0 or t >= vocab_size for t in tokens):
            raise ValueError("a token id is outside the vocabulary")
        padded = (bos_id,) * (n - 1) + tuple(tokens[1:])
        grams += [padded[i : i + n] for i in range(len(padded) - n + 1)]
    contexts = sorted({gram[:-1] for gram in grams})
    row = {context: i for i, context in enumerate(contexts)}
    counts = np.zeros((len(contexts), vocab_size), dtype=np.int64)
    for gram in grams:
        counts[row[gram[:-1]], gram[-1]] += 1
    return np.array(contexts, dtype=np.int64).reshape(len(contexts), n - 1), counts


@correct("add_k_probabilities", "keepdims_where")
def _(counts, k):
    table = np.array(counts, dtype=np.float64)
    if np.any(table < 0) or k < 0:
        raise ValueError("counts and k must not be negative")
    numerators = table + k
    denominators = table.sum(axis=1, keepdims=True) + k * table.shape[1]
    safe = np.where(denominators > 0, denominators, 1.0)
    return np.where(denominators > 0, numerators / safe, 1.0 / table.shape[1])


@correct("interpolate", "matrix_product")
def _(probabilities, weights):
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.size != len(probabilities) or w.min(initial=0.0) < 0 or not np.isclose(w.sum(), 1):
        raise ValueError("need one non-negative weight per array, summing to 1")
    first = np.asarray(probabilities[0])
    flat = np.stack([np.asarray(p, dtype=np.float64).reshape(-1) for p in probabilities])
    return (w @ flat).reshape(first.shape)


@correct("perplexity", "nll_then_exp")
def _(probabilities):
    probs = np.array(probabilities, dtype=np.float64).flatten()
    valid = (probs >= 0) & (probs <= 1)  # False for nan
    if probs.size == 0 or not valid.all():
        raise ValueError("need at least one probability, each in [0, 1]")
    if (probs == 0).any():
        return float("inf")
    nll = float(np.sum(-np.log(probs))) / probs.size
    return math.exp(nll)
