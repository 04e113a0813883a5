"""The exercise notebooks keep the book's rule: no code line is longer than 88 characters.

A learner works in the exercise notebook itself, so a longer line means scrolling sideways
in JupyterLab's main view. Every code cell of the nbgrader source counts, solutions and
hidden tests included: the hidden tests are shown in the feedback. Markdown cells wrap by
themselves and are not checked. Fast: it only reads the JSON, nothing is run or graded.
"""

from __future__ import annotations

import nbformat
import pytest
from _exercise_helpers import SOLUTIONS, grader_meta, read

MAX_LINE = 88
NOTEBOOKS = sorted(SOLUTIONS.glob("*/*.ipynb"))


def long_code_lines(nb, limit: int = MAX_LINE) -> list[str]:
    """One line of text for each code-cell line of ``nb`` longer than ``limit``."""
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        name = grader_meta(cell).get("grade_id") or cell.get("id") or f"cell {index}"
        for number, line in enumerate(cell.source.splitlines(), start=1):
            if len(line) > limit:
                found.append(f"{name} line {number}: {len(line)} characters: {line.strip()}")
    return found


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 12


def test_long_code_lines_finds_a_long_line_and_only_that():
    """The check itself: a line of 89 characters is reported, one of 88 is not."""
    nb = nbformat.v4.new_notebook()
    code = nbformat.v4.new_code_cell("x = 1\n" + "y = " + "1" * 84 + "\n" + "z = " + "2" * 85)
    code.metadata["nbgrader"] = {"grade_id": "demo_tests"}
    text = nbformat.v4.new_markdown_cell("a" * 200)
    nb.cells = [text, code]
    assert long_code_lines(nb) == [f"demo_tests line 3: 89 characters: z = {'2' * 85}"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_lines_fit_in_88_characters(path):
    found = long_code_lines(read(path))
    assert not found, (
        f"{path.relative_to(SOLUTIONS.parent)}: {len(found)} code line(s) over {MAX_LINE} "
        "characters (a learner would scroll sideways); wrap them:\n" + "\n".join(found)
    )
