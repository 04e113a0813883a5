"""Measuring a language model fairly: held-out splits, perplexity, and a table of the results.

A model is judged on text it did not learn from. ``split_documents`` keeps three disjoint
parts: *train* to fit, *validation* to choose settings (smoothing, weights, sizes), and *test*
to report once at the very end. ``perplexity`` turns the probabilities a model gave the tokens
that really came next into one number that every model of the course can be compared by.
``accuracy_percent`` and ``accuracy_over_seeds`` write scores so that a miss never reads as
100.0%.
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


def markdown_table(header: Sequence[str], rows: Sequence[Sequence], digits: int = 2) -> str:
    """A Markdown table of results; floats are rounded to ``digits`` places, infinity is ∞."""

    def cell(value) -> str:
        if isinstance(value, (float, np.floating)):
            return "∞" if np.isinf(value) else f"{value:.{digits}f}"
        return str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def accuracy_percent(value: float) -> str:
    """A share as a percentage with one decimal, or two where one would round a score below 1 up
    to "100.0%": 99.97% of the test right is not all of it."""
    text = f"{value:.1%}"
    return f"{value:.2%}" if text == "100.0%" and value < 1 else text


def accuracy_over_seeds(values: Sequence[float]) -> str:
    """Accuracies of several seeds as a table cell, "mean% (lowest–highest)"."""
    low, high = (accuracy_percent(value)[:-1] for value in (min(values), max(values)))
    return f"{accuracy_percent(float(np.mean(values)))} ({low}–{high})"
