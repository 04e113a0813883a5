"""Results as the pages show them: Markdown tables, and accuracies that never read a miss as
100.0%."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


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
