"""The book's own helpers (book/booklib): tables and accuracies as the pages show them."""

import numpy as np
from booklib.tables import accuracy_over_seeds, accuracy_percent, markdown_table


def test_markdown_table_rounds_and_shows_infinity():
    table = markdown_table(["n", "ppl"], [(2, np.inf), (3, 7.123)])
    assert table.splitlines() == ["| n | ppl |", "|---|---|", "| 2 | ∞ |", "| 3 | 7.12 |"]


def test_accuracy_percent_never_shows_a_miss_as_all_right():
    assert accuracy_percent(1.0) == "100.0%"
    assert accuracy_percent(0.9997) == "99.97%"  # one decimal would say 100.0%
    assert accuracy_percent(0.9649) == "96.5%"
    assert accuracy_percent(0.99) == "99.0%"


def test_accuracy_over_seeds_gives_mean_and_range():
    assert accuracy_over_seeds([1.0, 0.999, 1.0]) == "99.97% (99.9–100.0)"
    assert accuracy_over_seeds([0.95, 0.976, 0.9635]) == "96.3% (95.0–97.6)"
