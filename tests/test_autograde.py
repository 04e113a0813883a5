"""The nbgrader round trip for ch01_bigrams, with real nbgrader commands and a real gradebook.

In a temporary course directory (the repository's nbgrader_config.py, solutions/, a fresh
SQLite gradebook) three learners hand in:

* ``solver``  -- the solution notebook itself;
* ``blank``   -- the release, untouched;
* ``halfway`` -- the release with two parts (count_bigrams, bigram_probabilities) filled in
  with the reference code and the rest untouched.

``nbgrader autograde`` grades them all, ``generate_feedback`` writes the HTML, and ``export``
writes the CSV. Expected scores are computed from the notebook's nbgrader metadata (the points
of each test cell), never typed in.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import nbformat
import pytest
from _exercise_helpers import (
    EXERCISES,
    SOLUTIONS,
    autograded_tests,
    cell_by_grade_id,
    manual_answers,
    nbgrader,
    new_course,
    notebook_path,
    read,
    reference_answer,
)
from nbgrader.api import Gradebook

pytestmark = pytest.mark.slow  # real nbgrader runs, a few seconds each

ASSIGNMENT = "ch01_bigrams"
HALF_SOLVED = ["count_bigrams", "bigram_probabilities"]


def _hand_in(course: Path, student: str, nb) -> None:
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{ASSIGNMENT}.ipynb")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    """A course directory after generate_assignment, autograde, generate_feedback, export."""
    course = new_course(tmp_path_factory.mktemp("course"), [ASSIGNMENT])
    nbgrader(course, "generate_assignment", ASSIGNMENT)

    source = read(notebook_path(course / "solutions", ASSIGNMENT))
    release = read(notebook_path(course / "exercises", ASSIGNMENT))
    halfway = read(notebook_path(course / "exercises", ASSIGNMENT))
    for part in HALF_SOLVED:
        cell_by_grade_id(halfway, f"{part}_impl").source = reference_answer(
            cell_by_grade_id(source, f"{part}_impl").source
        )
    _hand_in(course, "solver", source)
    _hand_in(course, "blank", release)
    _hand_in(course, "halfway", halfway)

    nbgrader(course, "autograde", ASSIGNMENT)
    nbgrader(course, "generate_feedback", ASSIGNMENT)
    nbgrader(course, "export", "--to", str(course / "grades.csv"))
    return course


def _solution():
    return read(notebook_path(SOLUTIONS, ASSIGNMENT))


def _auto_scores(course: Path, student: str) -> dict[str, float]:
    """grade_id -> auto_score of each autograded test cell, read from the gradebook."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
        return {g.name: g.auto_score for g in notebook.grades if g.cell.name.endswith("_tests")}


def test_the_assignment_has_five_parts_and_a_written_question():
    source = _solution()
    auto, manual = autograded_tests(source), manual_answers(source)
    assert len(auto) == 5 and len(manual) == 1
    assert all(p > 0 for p in [*auto.values(), *manual.values()])


def test_release_generated_here_equals_exercises(graded):
    """A second, independent generate_assignment gives the committed release again."""
    fresh = notebook_path(graded / "exercises", ASSIGNMENT).read_text()
    committed = notebook_path(EXERCISES, ASSIGNMENT).read_text()
    assert json.loads(fresh) == json.loads(committed)


def test_gradebook_knows_every_graded_cell(graded):
    source = _solution()
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        notebook = gb.find_notebook(ASSIGNMENT, ASSIGNMENT)
        assert {c.name: c.max_score for c in notebook.grade_cells} == {
            **autograded_tests(source),
            **manual_answers(source),
        }


def test_solution_scores_full_marks(graded):
    expected = autograded_tests(_solution())
    assert _auto_scores(graded, "solver") == expected
    with Gradebook(f"sqlite:///{graded / 'gradebook.db'}") as gb:
        submission = gb.find_submission(ASSIGNMENT, "solver")
        assert submission.score == sum(expected.values())
        assert submission.max_score == sum(expected.values()) + sum(
            manual_answers(_solution()).values()
        )
        # the written answer waits for a person
        assert submission.needs_manual_grade


def test_untouched_release_scores_zero_everywhere(graded):
    scores = _auto_scores(graded, "blank")
    assert set(scores) == set(autograded_tests(_solution()))
    assert all(score == 0 for score in scores.values()), scores


def test_half_solved_scores_exactly_its_parts(graded):
    points = autograded_tests(_solution())
    expected = {
        gid: (p if gid.removesuffix("_tests") in HALF_SOLVED else 0.0) for gid, p in points.items()
    }
    assert _auto_scores(graded, "halfway") == expected
    assert 0 < sum(expected.values()) < sum(points.values())


def test_feedback_html_is_generated(graded):
    for student in ("solver", "blank", "halfway"):
        html = graded / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html"
        assert html.is_file(), f"no feedback for {student}"
        text = html.read_text(encoding="utf-8")
        assert "count_bigrams" in text and "Score" in text
    # the blank notebook's feedback tells the learner what to do
    assert "not written yet" in (
        graded / "feedback" / "blank" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    ).read_text(encoding="utf-8")


def test_csv_export_has_the_scores(graded):
    source = _solution()
    auto = autograded_tests(source)
    total = sum(auto.values()) + sum(manual_answers(source).values())
    expected = {
        "solver": sum(auto.values()),
        "blank": 0.0,
        "halfway": sum(p for gid, p in auto.items() if gid.removesuffix("_tests") in HALF_SOLVED),
    }
    with open(graded / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(expected)
    for student, score in expected.items():
        assert rows[student]["assignment"] == ASSIGNMENT
        assert float(rows[student]["score"]) == score
        assert float(rows[student]["max_score"]) == total
