"""Chapter 2 -- N-grams, smoothing and perplexity.

N-gram models of any order, made usable on unseen text by add-k smoothing and interpolation.

Chapter 2 builds on the counting of chapter 1 (``mini_llm.ngram``). An order-``n`` model predicts
a token from the ``n - 1`` tokens before it, its *context*. A model is a table: one row per
context seen in training, one column per token of the vocabulary, each cell a count. Only seen
contexts get a row, so the table stays small even when ``V ** (n - 1)`` possible contexts
would not fit in memory.

Every sequence is padded with ``n - 1`` begin tokens, so that models of every order predict the
same tokens (each real token and the end token) and their perplexities can be compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from mini_llm.ngram import SequenceLike, count_ngrams, ngram_windows


def pad_sequences(sequences: Iterable[SequenceLike], n: int, bos_id: int) -> list[np.ndarray]:
    """Each ``<s> w1 .. wm </s>`` sequence with ``n - 1`` begin tokens in front instead of one.

    The first real token then has a full context of ``n - 1`` tokens (all ``<s>``); for ``n = 1``
    the begin token is dropped, because a unigram model has no context and never predicts ``<s>``.
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n!r}")
    padded = []
    for ids in sequences:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size < 2 or ids[0] != bos_id:
            raise ValueError(
                "each sequence must be a 1-D array of ids that starts with the begin token "
                f"(id {bos_id}) and has at least one more token, as Vocabulary."
                "encode_with_boundaries makes it"
            )
        padded.append(np.concatenate([np.full(n - 1, bos_id, dtype=np.int64), ids[1:]]))
    if not padded:
        raise ValueError("there are no sequences: the corpus is empty")
    return padded


def ngram_counts(
    sequences: Iterable[SequenceLike], n: int, vocab_size: int, bos_id: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """The table of an order-``n`` model: ``(contexts, counts)``.

    ``contexts`` is a ``(C, n - 1)`` array of the distinct contexts seen in the padded
    sequences, in sorted (lexicographic) order; row ``i`` of the ``(C, V)`` array ``counts``
    says how often each token followed ``contexts[i]``. For ``n = 1`` there is one empty context
    and its row holds the unigram counts.
    """
    grams, gram_counts = count_ngrams(pad_sequences(sequences, n, bos_id), n, vocab_size)
    # Distinct n-grams come sorted, so equal contexts sit next to each other.
    contexts, row_of_gram = np.unique(grams[:, :-1], axis=0, return_inverse=True)
    counts = np.zeros((len(contexts), vocab_size), dtype=np.int64)
    counts[row_of_gram.reshape(-1), grams[:, -1]] = gram_counts
    return contexts, counts


def lookup_counts(contexts: np.ndarray, counts: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The count rows of the ``(N, n - 1)`` query contexts; a context never seen gets zeros."""
    queries = np.asarray(queries, dtype=np.int64)
    if queries.ndim != 2 or queries.shape[1] != contexts.shape[1]:
        raise ValueError(
            f"queries must have shape (N, {contexts.shape[1]}) to match the table's contexts, "
            f"got {queries.shape}"
        )
    found = np.zeros((len(queries), counts.shape[1]), dtype=counts.dtype)
    if contexts.shape[1] == 0:  # unigram: every query is the one empty context
        found[:] = counts[0]
        return found
    # One integer per context (its digits in base V): a sorted 1-D array can be binary-searched.
    if counts.shape[1] ** contexts.shape[1] >= 2**63:
        raise ValueError(
            "contexts this long over this vocabulary do not fit in 64-bit codes; "
            "use a smaller n or a smaller vocabulary"
        )
    place_values = counts.shape[1] ** np.arange(contexts.shape[1] - 1, -1, -1, dtype=np.int64)
    table_codes, query_codes = contexts @ place_values, queries @ place_values
    rows = np.searchsorted(table_codes, query_codes).clip(max=len(table_codes) - 1)
    seen = table_codes[rows] == query_codes
    found[seen] = counts[rows[seen]]
    return found


def add_k_probabilities(counts: np.ndarray, k: float) -> np.ndarray:
    """P(w | context) = (c(context, w) + k) / (c(context) + k V), row by row.

    Every token gets ``k`` pretend counts before dividing, so nothing has probability 0.
    ``k = 0`` is the unsmoothed maximum-likelihood estimate. A row with no counts at all (a
    context never seen) becomes uniform, whatever ``k``: there is no evidence to prefer a token.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 2:
        raise ValueError(f"expected a 2-D (contexts, vocabulary) count array, got {counts.shape}")
    if (counts < 0).any():
        raise ValueError("counts cannot be negative")
    if not k >= 0:
        raise ValueError(f"k must be >= 0 (k = 0 means no smoothing), got {k!r}")
    smoothed = counts + k
    totals = smoothed.sum(axis=1, keepdims=True)
    uniform = np.full_like(smoothed, 1.0 / counts.shape[1])
    return np.divide(smoothed, totals, out=uniform, where=totals > 0)


def interpolate(probabilities: Sequence[np.ndarray], weights: Sequence[float]) -> np.ndarray:
    """The mixture sum_j weights[j] * probabilities[j] of the distributions of several orders.

    ``probabilities[j]`` holds one distribution per row (all of the same shape); the weights
    must be non-negative and sum to 1, so that the mixture is a distribution too.
    """
    stacked = np.stack([np.asarray(p, dtype=np.float64) for p in probabilities])
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (len(stacked),):
        raise ValueError(f"need one weight per distribution ({len(stacked)}), got {weights.shape}")
    if (weights < 0).any() or not np.isclose(weights.sum(), 1.0):
        raise ValueError(f"weights must be >= 0 and sum to 1, got {weights.tolist()}")
    return np.tensordot(weights, stacked, axes=1)


class NGramModel:
    """Count tables of orders ``1 .. n`` from training sequences, and the probabilities they give.

    ``probabilities_of_next(sequences, order, k)`` and the interpolation helpers return, for
    every position of every sequence, the probability the model gave the token that came next:
    exactly what perplexity needs.
    """

    def __init__(
        self, train_sequences: Sequence[SequenceLike], n: int, vocab_size: int, bos_id: int = 0
    ):
        self.n, self.vocab_size, self.bos_id = n, vocab_size, bos_id
        self.tables = [
            ngram_counts(train_sequences, order, vocab_size, bos_id) for order in range(1, n + 1)
        ]

    def __repr__(self) -> str:
        rows = ", ".join(str(len(contexts)) for contexts, _ in self.tables)
        return f"NGramModel(n={self.n}, vocab_size={self.vocab_size}, contexts per order: {rows})"

    def _windows(self, sequences: Sequence[SequenceLike]) -> np.ndarray:
        return ngram_windows(pad_sequences(sequences, self.n, self.bos_id), self.n)

    def distributions(self, sequences: Sequence[SequenceLike], order: int, k: float = 0.0):
        """``(targets, P)``: each next token and the ``(N, V)`` add-k distribution before it."""
        if not 1 <= order <= self.n:
            raise ValueError(f"order must be between 1 and {self.n}, got {order}")
        windows = self._windows(sequences)
        contexts, counts = self.tables[order - 1]
        context_counts = lookup_counts(contexts, counts, windows[:, self.n - order : -1])
        return windows[:, -1], add_k_probabilities(context_counts, k)

    def probabilities_of_next(
        self, sequences: Sequence[SequenceLike], order: int | None = None, k: float = 0.0
    ) -> np.ndarray:
        """P(actual next token | context) at every position, under the add-k model of ``order``."""
        targets, probs = self.distributions(sequences, order or self.n, k)
        return probs[np.arange(len(targets)), targets]

    def probabilities_by_order(self, sequences: Sequence[SequenceLike]) -> np.ndarray:
        """``(n, N)``: row ``j`` is P(next token) under the unsmoothed model of order ``j + 1``."""
        return np.stack(
            [self.probabilities_of_next(sequences, order, k=0.0) for order in range(1, self.n + 1)]
        )

    def interpolated_probabilities_of_next(
        self, sequences: Sequence[SequenceLike], weights: Sequence[float]
    ) -> np.ndarray:
        """P(next token) under the mixture of the unsmoothed models of orders ``1 .. n``."""
        return interpolate(self.probabilities_by_order(sequences), weights)


def unseen_ngram_fraction(
    train_sequences: Sequence[SequenceLike],
    eval_sequences: Sequence[SequenceLike],
    n: int,
    vocab_size: int,
    bos_id: int = 0,
) -> float:
    """The share of the n-grams of ``eval_sequences`` that never occur in ``train_sequences``."""
    contexts, counts = ngram_counts(train_sequences, n, vocab_size, bos_id)
    windows = ngram_windows(pad_sequences(eval_sequences, n, bos_id), n)
    seen = lookup_counts(contexts, counts, windows[:, :-1])[np.arange(len(windows)), windows[:, -1]]
    return float((seen == 0).mean())


def fit_interpolation_weights(probabilities_by_order: np.ndarray, steps: int = 100) -> np.ndarray:
    """Weights that maximise the likelihood of held-out data under the interpolated model.

    Expectation-maximisation: each order gets the share of the probability of every held-out
    token that it contributed, averaged over the tokens; repeated, the shares converge to the
    best mixture. Pass probabilities of *validation* data, never of test data.
    """
    probs = np.asarray(probabilities_by_order, dtype=np.float64)
    weights = np.full(len(probs), 1.0 / len(probs))
    for _ in range(steps):
        contributions = weights[:, None] * probs
        weights = (contributions / contributions.sum(axis=0)).mean(axis=1)
    return weights
