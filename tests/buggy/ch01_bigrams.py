"""Known-buggy answers to the ch01_bigrams exercise: mistakes learners really make.

Each function carries the name of the exercise function it answers (``__name__``), as a
learner's own function would, and is registered in ``BUGS[name]`` with a one-line description.
``tests/test_hidden_tests.py`` checks that the notebook's hidden tests fail every one of
them with a teaching message, while the reference implementation passes. ``ALTERNATIVES`` (at
the end) holds correct answers written differently from the reference (plain loops, log space,
an inverse-CDF sampler), which the hidden tests must accept.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from mini_llm import ngram

from ._registry import new_registry

REFERENCE = ("mini_llm.ngram",)
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


# --------------------------------------------------------------------------- count_bigrams


@bug("count_bigrams", "drops_last_pair", "range(len(ids) - 2): the last pair is never counted")
def _(sequences, vocab_size):
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    for sequence in sequences:
        ids = checked_ids(sequence, vocab_size)
        for t in range(len(ids) - 2):
            counts[ids[t], ids[t + 1]] += 1
    return counts


@bug("count_bigrams", "across_sequences", "concatenates the sequences, counting boundary pairs")
def _(sequences, vocab_size):
    ids = checked_ids(
        np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences]), vocab_size
    )
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    np.add.at(counts, (ids[:-1], ids[1:]), 1)
    return counts


def _count(sequences, vocab_size, *, checked=True, transposed=False):
    """The right counts (with ``checked`` ids); ``transposed``: counts[next, previous]."""
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    for sequence in sequences:
        ids = checked_ids(sequence, vocab_size) if checked else np.asarray(sequence, np.int64)
        np.add.at(counts, (ids[1:], ids[:-1]) if transposed else (ids[:-1], ids[1:]), 1)
    return counts


_count_bug = bug.variants("count_bigrams", _count, like=ngram.count_bigrams)


_count_bug(
    "transposed", "counts[next, previous] instead of counts[previous, next]", transposed=True
)


@bug(
    "count_bigrams", "fancy_index_increment", "counts[a, b] += 1 on index arrays: repeats add once"
)
def _(sequences, vocab_size):
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    for sequence in sequences:
        ids = checked_ids(sequence, vocab_size)
        counts[ids[:-1], ids[1:]] += 1
    return counts


@bug.input(
    "count_bigrams", "no_id_check", "no range check: a negative id is counted in the last row"
)
def _(sequences, vocab_size):
    return _count(sequences, vocab_size, checked=False)


# --------------------------------------------------------------------- bigram_probabilities


def _square(counts):
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1] or (counts < 0).any():
        raise ValueError("expected a square matrix of non-negative counts")
    return counts


def _probabilities(counts, *, axis=1, empty=None):
    """The right probabilities, as float64, from the totals along ``axis``; an empty row
    gets ``empty`` (None: the uniform 1 / V)."""
    counts = _square(counts).astype(np.float64)
    totals = counts.sum(axis=axis, keepdims=True)
    fill = np.full_like(counts, 1.0 / counts.shape[0] if empty is None else empty)
    return np.divide(counts, totals, out=fill, where=totals > 0)


_probabilities_bug = bug.variants(
    "bigram_probabilities", _probabilities, like=ngram.bigram_probabilities
)


_probabilities_bug("normalises_columns", "divides by column totals (axis=0)", axis=0)
_probabilities_bug("nan_on_empty_rows", "plain row division: 0/0 gives nan rows", empty=np.nan)
_probabilities_bug("zero_empty_rows", "empty rows left all zero instead of uniform", empty=0.0)


@bug("bigram_probabilities", "no_normalisation", "returns the counts as floats, never divided")
def _(counts):
    return _square(counts).astype(np.float64)


@bug("bigram_probabilities", "in_place", "counts /= totals: changes the caller's float array")
def _(counts):
    counts = _square(counts)
    if counts.dtype.kind != "f":
        counts = counts.astype(np.float64)
    totals = counts.sum(axis=1, keepdims=True)
    empty = totals[:, 0] == 0
    counts[empty] = 1.0
    counts /= counts.sum(axis=1, keepdims=True)
    return counts


@bug("bigram_probabilities", "integer_result", "np.zeros_like(counts) keeps an integer dtype")
def _(counts):
    counts = _square(counts)
    probs = np.zeros_like(counts)
    for a in range(counts.shape[0]):
        total = counts[a].sum()
        probs[a] = counts[a] / total if total > 0 else 1 / counts.shape[0]
    return probs


# --------------------------------------------------------------------- sequence_probability


def _seq(ids, transition_probs):
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0 or ids.min() < 0 or ids.max() >= transition_probs.shape[0]:
        raise ValueError("bad sequence")
    return ids


def _probability(
    ids, transition_probs, start_probs=None, *, checked=True, transposed=False, first=0
):
    """The right probability (with ``checked`` ids); knobs: the matrix read ``transposed``,
    and the token that start_probs scores (``first``: its index)."""
    if checked:
        ids = _seq(ids, transition_probs)
    else:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            raise ValueError("empty")
    p = 1.0 if start_probs is None else float(start_probs[ids[first]])
    pairs = (ids[1:], ids[:-1]) if transposed else (ids[:-1], ids[1:])
    return float(p * np.prod(transition_probs[pairs]))


_probability_bug = bug.variants(
    "sequence_probability", _probability, like=ngram.sequence_probability
)


_probability_bug(
    "forgets_start", "ignores start_probs: P(w1) is never multiplied in", start_probs=None
)


@bug("sequence_probability", "drops_last_pair", "loops over range(len(ids) - 2)")
def _(ids, transition_probs, start_probs=None):
    ids = _seq(ids, transition_probs)
    p = 1.0 if start_probs is None else float(start_probs[ids[0]])
    for t in range(len(ids) - 2):
        p *= transition_probs[ids[t], ids[t + 1]]
    return float(p)


_probability_bug("transposed", "reads transition_probs[next, previous]", transposed=True)
_probability_bug("start_on_last", "scores the last token with start_probs", first=-1)


@bug.input("sequence_probability", "no_id_check", "accepts negative ids (NumPy reads the last row)")
def _(ids, transition_probs, start_probs=None):
    return _probability(ids, transition_probs, start_probs, checked=False)


# -------------------------------------------------------------------------- sample_sequence


def _sample(
    transition_probs,
    generator,
    start_id,
    end_id,
    max_length=100,
    *,
    at_end="stop",
    greedy=False,
    from_start=False,
):
    """The right sampler; knobs: what it does ``at_end`` ("stop"; "keep": appends end_id, then
    stops; "skip": leaves it out and draws on), ``greedy`` (the most likely token, not a draw)
    and ``from_start`` (every draw from the start row)."""
    out, current = [], start_id
    for _ in range(max_length):
        row = transition_probs[start_id if from_start else current]
        if greedy:
            current = int(np.argmax(row))
        else:
            current = int(generator.choice(transition_probs.shape[0], p=row))
        if current == end_id and at_end != "keep":
            if at_end == "stop":
                break
            continue
        out.append(current)
        if current == end_id:
            break
    return out


_sample_bug = bug.variants("sample_sequence", _sample, like=ngram.sample_sequence)


_sample_bug(
    "ignores_generator",
    "draws with np.random.choice: the seed has no effect",
    generator=np.random,
)
_sample_bug(
    "own_generator",
    "makes np.random.default_rng(0) inside: same every seed",
    generator=derived(lambda a: np.random.default_rng(0)),
)
_sample_bug("never_stops", "does not stop at end_id: runs to max_length", at_end="skip")
_sample_bug("keeps_end", "appends end_id before stopping", at_end="keep")
_sample_bug("greedy", "takes the most likely next token instead of sampling", greedy=True)
_sample_bug(
    "one_too_many",
    "while len(out) <= max_length: one token too many",
    max_length=derived(lambda a: a.max_length + 1),
)
_sample_bug("stuck_at_start", "always draws from the start row", from_start=True)


# ------------------------------------------------------------------------------ average_nll


def _pairs_per_sequence(sequences, vocab_size=None):
    """(previous, next) ids of each sequence; with ``vocab_size``, ids outside it refused."""
    for sequence in sequences:
        ids = np.asarray(sequence, dtype=np.int64)
        if vocab_size is not None and len(ids) > 1:
            checked_ids(ids, vocab_size)
        yield ids[:-1], ids[1:]


def _nll(sequences, transition_probs, *, log=np.log, reduce=np.mean, kept=None):
    """-``reduce``(``log``(p)) over the probabilities of every pair (those ``kept(p)`` picks)."""
    pairs = _pairs_per_sequence(sequences, len(transition_probs))
    probs = np.concatenate([[], *(transition_probs[a, b] for a, b in pairs)])
    if probs.size == 0:
        raise ValueError("no bigram")
    return float(-reduce(log(probs if kept is None else probs[kept(probs)])))


_nll_bug = bug.variants("average_nll", _nll, like=ngram.average_nll)


_nll_bug("log10", "uses np.log10 instead of the natural log", log=np.log10)
_nll_bug("sum_not_mean", "returns the total NLL instead of the mean", reduce=np.sum)
_nll_bug("skips_zeros", "drops probability-0 pairs instead of returning inf", kept=lambda p: p > 0)
_nll_bug(
    "epsilon",
    "np.log(p + 1e-10): a zero probability gives a finite NLL",
    log=lambda p: np.log(p + 1e-10),
)


@bug("average_nll", "mean_of_means", "averages per-sequence means, weighting short sequences up")
def _(sequences, transition_probs):
    means = []
    for a, b in _pairs_per_sequence(sequences, len(transition_probs)):
        if a.size:
            with np.errstate(divide="ignore"):
                means.append(-np.log(transition_probs[a, b]).mean())
    if not means:
        raise ValueError("no bigram")
    return float(np.mean(means))


@bug("average_nll", "across_sequences", "concatenates the sequences, scoring boundary pairs")
def _(sequences, transition_probs):
    ids = np.concatenate([[], *(np.asarray(s, dtype=np.int64) for s in sequences)])
    ids = checked_ids(ids, len(transition_probs))
    if all(len(s) < 2 for s in sequences):
        raise ValueError("no bigram")
    with np.errstate(divide="ignore"):
        return float(-np.log(transition_probs[ids[:-1], ids[1:]]).mean())


@bug("average_nll", "math_log", "math.log in a loop: crashes on a probability of 0")
def _(sequences, transition_probs):
    total, n = 0.0, 0
    for sequence in sequences:
        if len(sequence) > 1:
            checked_ids(sequence, len(transition_probs))
        for a, b in itertools.pairwise(sequence):
            total -= math.log(transition_probs[a, b])
            n += 1
    if n == 0:
        raise ValueError("no bigram")
    return total / n


def _total_and_count(sequences, transition_probs):
    """The summed NLL of every pair (no check of the ids) and the number of pairs."""
    total, n = 0.0, 0
    for a, b in _pairs_per_sequence(sequences):
        with np.errstate(divide="ignore"):
            total -= float(np.log(transition_probs[a, b]).sum())
        n += a.size
    return total, n


@bug.input("average_nll", "divides_by_zero", "no check for an empty corpus: 0 / 0")
def _(sequences, transition_probs):
    total, n = _total_and_count(sequences, transition_probs)
    with np.errstate(invalid="ignore", divide="ignore"):
        return float(np.float64(total) / n)


# ------------------------- the caller's data, degenerate inputs, dtypes (the classes of issue 18)


@bug(
    "count_bigrams",
    "pops_the_callers_lists",
    "consumes each sequence with pop(0): the caller's lists end up empty",
)
def _(sequences, vocab_size):
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    for sequence in sequences:
        checked_ids(sequence, vocab_size)
        if not isinstance(sequence, list):
            sequence = list(sequence)
        while len(sequence) > 1:
            previous = sequence.pop(0)
            counts[previous, sequence[0]] += 1
    return counts


@bug(
    "sequence_probability",
    "pops_first_id",
    "first = ids.pop(0): the caller's list loses its first token",
)
def _(ids, transition_probs, start_probs=None):
    _seq(ids, transition_probs)
    ids = ids if isinstance(ids, list) else list(ids)
    previous = ids.pop(0)
    p = 1.0 if start_probs is None else float(start_probs[previous])
    for current in ids:
        p *= float(transition_probs[previous, current])
        previous = current
    return p


@bug(
    "sample_sequence",
    "length_checked_after_append",
    "stops when len(out) == max_length after appending: max_length=0 never stops early",
)
def _(transition_probs, generator, start_id, end_id, max_length=100):
    out, current = [], start_id
    while True:
        current = int(generator.choice(transition_probs.shape[0], p=transition_probs[current]))
        if current == end_id:
            break
        out.append(current)
        if len(out) == max_length:
            break
    return out


def _renormalised_in_place(transition_probs, start_id):
    transition_probs[:, start_id] = 0.0
    transition_probs /= transition_probs.sum(axis=1, keepdims=True)
    return transition_probs


_sample_bug(
    "renormalises_in_place",
    "zeroes P(<s>) in the caller's matrix and renormalises its rows in place",
    transition_probs=derived(lambda a: _renormalised_in_place(a.transition_probs, a.start_id)),
)


@bug.input("average_nll", "no_id_check", "no range check: a negative id quietly reads the last row")
def _(sequences, transition_probs):
    total, n = _total_and_count(sequences, transition_probs)
    if n == 0:
        raise ValueError("no bigram")
    return total / n


# ------------------------------------------------------- correct, but not like the reference
# Plain-Python versions a learner may well write: the hidden tests must accept them too.


@correct("count_bigrams", "nested_lists")
def _(sequences, vocab_size):
    counts = [[0] * vocab_size for _ in range(vocab_size)]
    for sequence in sequences:
        for token in sequence:
            if not 0 <= token < vocab_size:
                raise ValueError(f"token id {token} is not in 0..{vocab_size - 1}")
        for a, b in itertools.pairwise(sequence):
            counts[a][b] += 1
    return np.array(counts)


@correct("bigram_probabilities", "row_loop")
def _(counts):
    counts = np.array(counts, dtype=float)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError("counts must be square")
    if (counts < 0).any():
        raise ValueError("negative count")
    probs = np.empty_like(counts)
    for a, row in enumerate(counts):
        total = row.sum()
        probs[a] = row / total if total else 1 / len(row)
    return probs


@correct("sequence_probability", "log_space")
def _(ids, transition_probs, start_probs=None):
    ids = list(ids)
    vocab_size = len(transition_probs)
    if not ids or any(not 0 <= i < vocab_size for i in ids):
        raise ValueError("need at least one token, each in the vocabulary")
    factors = [transition_probs[a][b] for a, b in itertools.pairwise(ids)]
    if start_probs is not None:
        factors.insert(0, start_probs[ids[0]])
    if any(f == 0 for f in factors):
        return 0.0
    return math.exp(sum(math.log(f) for f in factors))


@correct("sample_sequence", "inverse_cdf")
def _(transition_probs, generator, start_id, end_id, max_length=100):
    out, current = [], start_id
    while len(out) < max_length:
        cdf = np.cumsum(transition_probs[current])
        current = int(min(np.searchsorted(cdf, generator.random(), side="right"), len(cdf) - 1))
        if current == end_id:
            break
        out.append(current)
    return out


@correct("average_nll", "python_loop")
def _(sequences, transition_probs):
    total, n = 0.0, 0
    for sequence in sequences:
        if any(not 0 <= token < len(transition_probs) for token in sequence):
            raise ValueError("token id outside the model")
        for a, b in itertools.pairwise(sequence):
            p = transition_probs[a][b]
            total += math.inf if p == 0 else -math.log(p)
            n += 1
    if n == 0:
        raise ValueError("no bigram to score")
    return total / n


# ------------------------------------- issue 31: what the generated hidden cases catch
# dtype, invalid input beyond the first kind, argument values other than the visible tests'
# (start_id, end_id), data that never exercises a rule (tiny totals, zeros the data never use).


@bug(
    "count_bigrams", "float_counts", "np.zeros((V, V)) without a dtype: counts come back as floats"
)
def _(sequences, vocab_size):
    counts = np.zeros((vocab_size, vocab_size))
    for sequence in sequences:
        ids = checked_ids(sequence, vocab_size)
        np.add.at(counts, (ids[:-1], ids[1:]), 1)
    return counts


@bug("count_bigrams", "bincount_without_minlength", "np.bincount(a * V + b) without minlength")
def _(sequences, vocab_size):
    codes = [np.zeros(0, dtype=np.int64)]
    for sequence in sequences:
        ids = checked_ids(sequence, vocab_size)
        codes.append(ids[:-1] * vocab_size + ids[1:])
    # too short to reshape when the last pairs (high ids) never occur
    return np.bincount(np.concatenate(codes)).reshape(vocab_size, vocab_size)


@bug.input("count_bigrams", "upper_bound_only", "checks max(ids) >= V but not negative ids")
def _(sequences, vocab_size):
    for sequence in sequences:
        if len(sequence) and max(sequence) >= vocab_size:
            raise ValueError("token id too large")
    return _count(sequences, vocab_size, checked=False)


@bug.input("count_bigrams", "first_sequence_checked", "checks the ids of sequences[0] only")
def _(sequences, vocab_size):
    if len(sequences):
        checked_ids(sequences[0], vocab_size)
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    for sequence in sequences:
        ids = np.asarray(sequence, dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < vocab_size)]  # quietly drops what it cannot count
        np.add.at(counts, (ids[:-1], ids[1:]), 1)
    return counts


@bug.input("count_bigrams", "index_error", "refuses a bad id with IndexError, not ValueError")
def _(sequences, vocab_size):
    for sequence in sequences:
        for token in sequence:
            if not 0 <= token < vocab_size:
                raise IndexError(f"token id {token} is outside the vocabulary")
    return _count(sequences, vocab_size, checked=False)


@bug("bigram_probabilities", "float32_result", "builds the result with np.zeros(..., np.float32)")
def _(counts):
    counts = _square(counts)
    probs = np.zeros(counts.shape, dtype=np.float32)
    for a in range(counts.shape[0]):
        total = counts[a].sum()
        probs[a] = counts[a] / total if total > 0 else 1 / counts.shape[0]
    return probs


@bug(
    "bigram_probabilities",
    "tiny_total_as_empty",
    "np.isclose(total, 0) finds empty rows: a row of tiny counts becomes uniform",
)
def _(counts):
    counts = _square(counts).astype(np.float64)
    totals = counts.sum(axis=1, keepdims=True)
    empty = np.isclose(totals, 0.0)
    return np.where(empty, 1.0 / counts.shape[1], counts / np.where(empty, 1.0, totals))


@bug.input(
    "bigram_probabilities",
    "square_check_by_index",
    "checks counts.shape[0] != counts.shape[1] only: a 3-D cube passes, 1-D gives IndexError",
)
def _(counts):
    counts = np.asarray(counts)
    if counts.shape[0] != counts.shape[1] or (counts < 0).any():
        raise ValueError("expected a square matrix of non-negative counts")
    return _probabilities(counts) if counts.ndim == 2 else counts / counts.sum()


@bug.input(
    "bigram_probabilities",
    "negative_totals_only",
    "refuses rows whose total is negative instead of any negative count",
)
def _(counts):
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError("expected a square (V, V) count matrix")
    totals = counts.sum(axis=1, keepdims=True)
    if (totals < 0).any():
        raise ValueError("counts cannot be negative")
    uniform = np.full_like(counts, 1.0 / counts.shape[1])
    return np.divide(counts, totals, out=uniform, where=totals > 0)


@bug(
    "sequence_probability",
    "one_token_is_certain",
    "if len(ids) == 1: return 1.0, even when start_probs is given",
)
def _(ids, transition_probs, start_probs=None):
    ids = _seq(ids, transition_probs)
    if len(ids) == 1:
        return 1.0
    return _probability(ids, transition_probs, start_probs)


@bug.input(
    "sequence_probability",
    "transitions_checked_only",
    "checks the ids of the transitions only: one bad token alone is scored",
)
def _(ids, transition_probs, start_probs=None):
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        raise ValueError("a sequence needs at least one token")
    if ids.size > 1:
        checked_ids(ids, len(transition_probs))
    p = 1.0 if start_probs is None else float(start_probs[ids[0]])
    return float(p * np.prod(transition_probs[ids[:-1], ids[1:]]))


@bug.input("sequence_probability", "empty_is_certain", "an empty sequence gets the empty product 1")
def _(ids, transition_probs, start_probs=None):
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return 1.0
    return _probability(ids, transition_probs, start_probs)


_sample_bug(
    "end_id_is_one",
    "stops at token 1 (</s> in the course's vocabularies) instead of at end_id",
    end_id=1,
)
_sample_bug(
    "starts_at_zero",
    "starts from token 0 (<s> in the course's vocabularies) instead of start_id",
    start_id=0,
)


@bug(
    "average_nll",
    "count_matrix_nan",
    "-(counts * log P).sum() / N: 0 * log 0 gives nan where the data never uses a zero",
)
def _(sequences, transition_probs):
    vocab_size = len(transition_probs)
    counts = np.zeros((vocab_size, vocab_size))
    for a, b in _pairs_per_sequence(sequences, vocab_size):
        np.add.at(counts, (a, b), 1)
    if counts.sum() == 0:
        raise ValueError("no bigram")
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(-(counts * np.log(transition_probs)).sum() / counts.sum())


@bug(
    "average_nll",
    "total_reset_per_sequence",
    "total = 0 inside the loop over sequences: only the last one is summed",
)
def _(sequences, transition_probs):
    n = 0
    total = 0.0
    for a, b in _pairs_per_sequence(sequences, len(transition_probs)):
        if a.size:
            with np.errstate(divide="ignore"):
                total = -float(np.log(transition_probs[a, b]).sum())
        n += a.size
    if n == 0:
        raise ValueError("no bigram")
    return total / n


@bug.input(
    "average_nll",
    "zero_division",
    "no check for an empty corpus: total / 0 raises ZeroDivisionError",
)
def _(sequences, transition_probs):
    total, n = 0.0, 0
    for a, b in _pairs_per_sequence(sequences, len(transition_probs)):
        with np.errstate(divide="ignore"):
            total -= float(np.log(transition_probs[a, b]).sum())
        n += int(a.size)
    return total / n


@bug.input("average_nll", "upper_bound_only", "checks ids >= V but lets negative ids through")
def _(sequences, transition_probs):
    for sequence in sequences:
        if len(sequence) > 1 and max(sequence) >= len(transition_probs):
            raise ValueError("token id too large")
    total, n = _total_and_count(sequences, transition_probs)
    if n == 0:
        raise ValueError("no bigram")
    return total / n


# ------------------------------------------ issue 31: more correct answers, written otherwise


@correct("count_bigrams", "bincount_codes")
def _(sequences, vocab_size):
    codes = []
    for sequence in sequences:
        ids = np.asarray(sequence, dtype=np.int64).reshape(-1)
        bad = ids[(ids < 0) | (ids >= vocab_size)]
        if bad.size:
            raise ValueError(f"token id {bad[0]} is not in 0..{vocab_size - 1}")
        codes.append(ids[:-1] * vocab_size + ids[1:])  # the pair (a, b) as one number
    flat = np.bincount(
        np.concatenate([np.zeros(0, np.int64), *codes]), minlength=vocab_size * vocab_size
    )
    return flat.reshape(vocab_size, vocab_size)


@correct("bigram_probabilities", "where_broadcast")
def _(counts):
    table = np.array(counts, dtype=np.float64, copy=True)
    if table.ndim != 2 or len(set(table.shape)) != 1:
        raise ValueError("a bigram count matrix is square")
    if table.min(initial=0) < 0:
        raise ValueError("a count is negative")
    totals = table.sum(axis=1)[:, None]
    safe = np.where(totals > 0, totals, 1.0)
    return np.where(totals > 0, table / safe, 1.0 / table.shape[1])


@correct("sequence_probability", "dict_lookup")
def _(ids, transition_probs, start_probs=None):
    tokens = [int(t) for t in ids]
    size = np.shape(transition_probs)[0]
    if len(tokens) == 0 or min(tokens) < 0 or max(tokens) >= size:
        raise ValueError("need one token or more, each in 0..V-1")
    pairs = [(tokens[t - 1], tokens[t]) for t in range(1, len(tokens))]
    p = {pair: float(transition_probs[pair]) for pair in pairs}
    result = 1.0 if start_probs is None else float(start_probs[tokens[0]])
    for pair in pairs:
        result *= p[pair]
    return result


@correct("average_nll", "count_matrix")
def _(sequences, transition_probs):
    vocab_size = len(transition_probs)
    counts = np.zeros((vocab_size, vocab_size), dtype=np.int64)
    for sequence in sequences:
        ids = np.asarray(sequence, dtype=np.int64)
        if len(ids) < 2:
            continue
        if ids.min() < 0 or ids.max() >= vocab_size:
            raise ValueError("token id outside the model")
        np.add.at(counts, (ids[:-1], ids[1:]), 1)
    if counts.sum() == 0:
        raise ValueError("no bigram to score")
    used = counts > 0  # 0 * log 0 would be nan: only the pairs that occur
    with np.errstate(divide="ignore"):
        return float(-(counts[used] * np.log(transition_probs[used])).sum() / counts.sum())


@bug.input("bigram_probabilities", "no_validation", "divides row by row and checks nothing")
def _(counts):
    counts = np.asarray(counts, dtype=np.float64)
    totals = counts.sum(axis=-1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / counts.shape[-1])
    return np.divide(counts, totals, out=uniform, where=totals > 0)
