"""Chapter 1 -- Bigram language models by counting.

Counting language models: n-gram counts, bigram probabilities, scoring and sampling.

Chapter 1 builds its bigram model from these functions. Everything is vectorised with NumPy:
an n-gram is a window of ``n`` consecutive token ids, windows are cut out of whole arrays at
once, and counting is a single ``bincount``/``unique`` instead of a Python loop over pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

SequenceLike = np.ndarray | Sequence[int]


def _as_sequences(sequences: SequenceLike | Iterable[SequenceLike]) -> list[np.ndarray]:
    """A list of 1-D int arrays, from one sequence of ids or an iterable of them."""
    if isinstance(sequences, np.ndarray) and sequences.ndim == 1:
        sequences = [sequences]
    arrays = [np.asarray(s, dtype=np.int64) for s in sequences]
    if not arrays or all(len(a) == 0 for a in arrays):
        raise ValueError("the corpus is empty: there is nothing to count")
    for a in arrays:
        if a.ndim != 1:
            raise ValueError(f"each sequence must be a 1-D array of token ids, got shape {a.shape}")
    return arrays


def _check_ids(ids: np.ndarray, vocab_size: int) -> None:
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = ids[(ids < 0) | (ids >= vocab_size)][0]
        raise ValueError(f"token id {bad} is outside the vocabulary (0..{vocab_size - 1})")


def ngram_windows(sequences: SequenceLike | Iterable[SequenceLike], n: int) -> np.ndarray:
    """All n-grams of the sequences as rows of an ``(N, n)`` array; none spans two sequences."""
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    windows = [sliding_window_view(s, n) for s in _as_sequences(sequences) if len(s) >= n]
    return np.concatenate(windows) if windows else np.empty((0, n), dtype=np.int64)


def count_ngrams(
    sequences: SequenceLike | Iterable[SequenceLike], n: int, vocab_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """The distinct n-grams (rows, sorted) and how often each occurs.

    Each window is packed into one integer (its digits in base ``vocab_size``) so that counting
    is a single ``np.unique``; when that number would not fit in 64 bits, rows are compared
    directly instead.
    """
    windows = ngram_windows(sequences, n)
    _check_ids(windows, vocab_size)
    if vocab_size**n >= 2**63:
        return np.unique(windows, axis=0, return_counts=True)
    place_values = vocab_size ** np.arange(n - 1, -1, -1, dtype=np.int64)
    codes, counts = np.unique(windows @ place_values, return_counts=True)
    digits = codes[:, None] // place_values % vocab_size
    return digits, counts


def count_bigrams(sequences: SequenceLike | Iterable[SequenceLike], vocab_size: int) -> np.ndarray:
    """The ``(V, V)`` matrix whose entry ``[a, b]`` counts how often token ``b`` follows ``a``."""
    pairs = ngram_windows(sequences, 2)
    _check_ids(pairs, vocab_size)
    flat = np.bincount(pairs[:, 0] * vocab_size + pairs[:, 1], minlength=vocab_size * vocab_size)
    return flat.reshape(vocab_size, vocab_size)


def unigram_probabilities(
    sequences: SequenceLike | Iterable[SequenceLike], vocab_size: int
) -> np.ndarray:
    """How often each token occurs, divided by the number of tokens (the MLE of P(w))."""
    ids = np.concatenate(_as_sequences(sequences))
    _check_ids(ids, vocab_size)
    return np.bincount(ids, minlength=vocab_size) / ids.size


def bigram_probabilities(counts: np.ndarray) -> np.ndarray:
    """Each row of a count matrix divided by its total: row ``a`` is P(next | a).

    A row with no counts (a token never seen as a context, such as ``</s>``) has no evidence
    at all; it becomes the uniform distribution so that every row is a valid distribution.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2 or counts.shape[0] != counts.shape[1]:
        raise ValueError(f"expected a square (V, V) count matrix, got shape {counts.shape}")
    if (counts < 0).any():
        raise ValueError("counts cannot be negative")
    totals = counts.sum(axis=1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / counts.shape[1])
    return np.divide(counts, totals, out=uniform, where=totals > 0)


def sequence_probability(
    ids: SequenceLike, transition_probs: np.ndarray, start_probs: np.ndarray | None = None
) -> float:
    """P(w1 .. wn) by the chain rule under the bigram (Markov) assumption.

    With ``start_probs`` (for example unigram probabilities) the first token is scored by it:
    P(w1) * P(w2|w1) * ... . Without it the first token is taken as given, which is the right
    reading when the sequence starts with ``<s>``.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.ndim != 1 or ids.size == 0:
        raise ValueError("a sequence needs at least one token")
    _check_ids(ids, transition_probs.shape[0])
    factors = transition_probs[ids[:-1], ids[1:]]
    if start_probs is not None:
        factors = np.concatenate([[start_probs[ids[0]]], factors])
    return float(np.prod(factors))


def sample_sequence(
    transition_probs: np.ndarray,
    generator: np.random.Generator,
    start_id: int,
    end_id: int,
    max_length: int = 100,
) -> list[int]:
    """Tokens drawn one at a time from P(next | previous), from ``start_id`` until ``end_id``.

    The caller passes a seeded ``numpy.random.Generator`` so that samples are reproducible.
    Neither boundary token is returned; at most ``max_length`` tokens are drawn.
    """
    if not isinstance(generator, np.random.Generator):
        raise TypeError("pass a seeded numpy.random.Generator, e.g. np.random.default_rng(0)")
    vocab_size = transition_probs.shape[0]
    out: list[int] = []
    current = start_id
    for _ in range(max_length):
        current = int(generator.choice(vocab_size, p=transition_probs[current]))
        if current == end_id:
            break
        out.append(current)
    return out


def average_nll(
    sequences: SequenceLike | Iterable[SequenceLike], transition_probs: np.ndarray
) -> float:
    """Mean of -log P(next | previous) over every bigram of the sequences, in nats.

    Lower is better; a bigram the model gives probability 0 makes it infinite (chapter 2 fixes
    that with smoothing).
    """
    pairs = ngram_windows(sequences, 2)
    if len(pairs) == 0:
        raise ValueError("no bigram to score: every sequence is shorter than two tokens")
    _check_ids(pairs, transition_probs.shape[0])
    with np.errstate(divide="ignore"):
        return float(-np.log(transition_probs[pairs[:, 0], pairs[:, 1]]).mean())
