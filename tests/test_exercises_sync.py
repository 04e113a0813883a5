"""exercises/ is exactly what `nbgrader generate_assignment` makes from solutions/ today.

Each assignment is regenerated in a temporary course directory (a copy of the repository's
nbgrader_config.py and solutions/, with its own throw-away gradebook) and compared with the
committed release.

What is compared: every file of the release folder, and for notebooks the parsed JSON, i.e.
all cells (type, id, source, outputs, metadata including nbgrader's checksums) and the
notebook metadata. What is ignored: only JSON layout (indentation, key order, trailing
newline), which is not content and which an editor may rewrite. No field is ignored, because
nbgrader 0.9 varies none: cell ids are kept from the source notebook, checksums are hashes of
the cell content, and no timestamp is written. test_autograde.py generates the release a
second time in its own course directory and compares it too, so a future nbgrader that starts
writing a varying field is noticed rather than hidden.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _exercise_helpers import (
    ASSIGNMENTS,
    EXERCISES,
    SOLUTIONS,
    autograded_tests,
    grader_meta,
    manual_answers,
    nbgrader,
    new_course,
    notebook_path,
    read,
)


@pytest.fixture(scope="module")
def generated(tmp_path_factory, grader_path) -> Path:
    """The release folder made by nbgrader from the current solutions/."""
    course = new_course(tmp_path_factory.mktemp("course"))
    for name in ASSIGNMENTS:
        nbgrader(course, "generate_assignment", name)
    return course / "exercises"


def _files(folder: Path) -> list[str]:
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and ".ipynb_checkpoints" not in p.parts
    )


def test_there_are_assignments():
    assert "ch01_bigrams" in ASSIGNMENTS


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_committed_release_equals_generated(generated, assignment):
    committed_dir, generated_dir = EXERCISES / assignment, generated / assignment
    assert _files(committed_dir) == _files(generated_dir), (
        "exercises/ has different files from what nbgrader generates; run `make exercises`"
    )
    for name in _files(generated_dir):
        committed, fresh = committed_dir / name, generated_dir / name
        if name.endswith(".ipynb"):
            same = json.loads(committed.read_text()) == json.loads(fresh.read_text())
        else:
            same = committed.read_bytes() == fresh.read_bytes()
        assert same, f"exercises/{assignment}/{name} is out of date: run `make exercises`"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_has_no_solutions_or_hidden_tests(assignment):
    source = read(notebook_path(SOLUTIONS, assignment))
    release = read(notebook_path(EXERCISES, assignment))
    text = json.dumps(release.cells)
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    # every graded cell of the source is in the release, with the same points
    assert autograded_tests(release) == autograded_tests(source)
    assert manual_answers(release) == manual_answers(source)
    answers = [c for c in release.cells if grader_meta(c).get("solution")]
    assert answers and all(
        "raise NotImplementedError()" in c.source or c.source.strip() == "YOUR ANSWER HERE"
        for c in answers
    )
