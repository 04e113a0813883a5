"""Chapter 2 -- N-grams, smoothing and perplexity: measuring a language model fairly, on
held-out splits, by perplexity.

A model is judged on text it did not learn from. ``split_documents`` keeps three disjoint
parts: *train* to fit, *validation* to choose settings (smoothing, weights, sizes), and *test*
to report once at the very end. ``perplexity`` turns the probabilities a model gave the tokens
that really came next into one number that every model of the course can be compared by.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def split_documents(
    documents: Sequence, fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0
) -> tuple[list, ...]:
    """The documents shuffled (seeded) and cut into consecutive parts of the given fractions."""
    fractions = np.asarray(fractions, dtype=np.float64)
    if (fractions <= 0).any() or not np.isclose(fractions.sum(), 1.0):
        raise ValueError(f"fractions must be positive and sum to 1, got {fractions.tolist()}")
    if len(documents) < len(fractions):
        raise ValueError(f"cannot split {len(documents)} documents into {len(fractions)} parts")
    order = np.random.default_rng(seed).permutation(len(documents))
    ends = np.round(np.cumsum(fractions) * len(documents)).astype(int)
    starts = np.concatenate([[0], ends[:-1]])
    return tuple([documents[i] for i in order[a:b]] for a, b in zip(starts, ends))


def perplexity(probabilities: Sequence[float] | np.ndarray) -> float:
    """exp of the average negative log-likelihood of the tokens that came next.

    ``probabilities[i]`` is the probability the model gave the ``i``-th actual next token. A
    perplexity of ``P`` means the model was, on average, as unsure as a fair choice among ``P``
    tokens; one probability of 0 makes it infinite.
    """
    probs = np.asarray(probabilities, dtype=np.float64).reshape(-1)
    if probs.size == 0:
        raise ValueError("no probabilities given: perplexity needs at least one predicted token")
    if np.isnan(probs).any() or (probs < 0).any() or (probs > 1).any():
        raise ValueError("probabilities must lie between 0 and 1")
    with np.errstate(divide="ignore"):
        average_nll = -np.log(probs).mean()
    return float(np.exp(average_nll))
