"""book/exercises.md shows learners what they will see: its examples must be what they get."""

from __future__ import annotations

import itertools
import re

import nbformat
import numpy as np
import pytest
from _exercise_helpers import EXERCISES, REPO, cell_by_grade_id, notebook_path

from mini_llm.checks import CheckFailed

GUIDE = REPO / "book" / "exercises.md"


def _text_block_after(heading: str) -> str:
    section = GUIDE.read_text(encoding="utf-8").split(f"## {heading}\n", 1)[1]
    return re.search(r"```text\n(.*?)```", section, re.DOTALL).group(1)


def count_bigrams(sequences, vocab_size):
    """count_bigrams with the mistake the guide's example shows: the last pair is not counted."""
    counts = np.zeros((vocab_size, vocab_size), dtype=int)
    for sequence in sequences:
        for a, b in itertools.pairwise(sequence[:-1]):
            counts[a, b] += 1
    return counts


def test_the_guides_test_message_is_what_the_visible_test_prints():
    shown = _text_block_after("Reading a test message")
    nb = nbformat.read(notebook_path(EXERCISES, "ch01_bigrams"), as_version=4)
    tests = cell_by_grade_id(nb, "count_bigrams_tests").source
    with pytest.raises(CheckFailed) as failed:
        exec(tests, {"count_bigrams": count_bigrams})  # noqa: S102 - the release's test
    # a notebook shows the exception's type, then its message (mini_llm.checks.CheckFailed)
    assert shown == f"AssertionError: {failed.value}\n"
