"""The nbgrader round trip of every assignment, with real nbgrader commands and a real gradebook.

Each assignment in solutions/ gets its own temporary course directory (the repository's
nbgrader_config.py, its solutions/ folder, a fresh SQLite gradebook), where these learners hand
in:

* ``solver``  -- the solution notebook itself: full marks on every autograded part;
* ``blank``   -- the release, untouched: zero on every part;
* ``halfway`` -- the release with the first half of the parts filled in with the solution's
  code: exactly the points of those parts;
* ``bug-<part>-<bug id>`` -- the solution with one part replaced by a known-buggy implementation
  from ``tests/buggy/<assignment>.py``, the first one of that part that the visible tests let
  through (so only the hidden tests can catch it): that part scores 0, every other part full
  marks.

One ``nbgrader autograde`` grades all submissions of an assignment; ``generate_feedback`` writes
the HTML and ``export`` the CSV. The courses are graded side by side. Expected scores come from
the notebook's nbgrader metadata (the points of each test cell), never typed in.
"""

from __future__ import annotations

import csv
import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from _exercise_helpers import (
    ASSIGNMENTS,
    BUGGY,
    EXERCISES,
    SOLUTIONS,
    autograded_tests,
    bug_module,
    cell_by_grade_id,
    check_failure,
    graded_parts,
    losing_cell,
    manual_answers,
    nbgrader,
    new_course,
    notebook_path,
    part_test_cells,
    read,
    reference_answer,
    split_test_cell,
)
from nbgrader.api import Gradebook


def _solution(assignment: str):
    return read(notebook_path(SOLUTIONS, assignment))


def _half_solved(assignment: str) -> list[str]:
    """The parts the ``halfway`` learner has written: the first half."""
    parts = graded_parts(_solution(assignment))
    return parts[: len(parts) // 2]


def _hidden_only_bugs(assignment: str) -> dict[str, str]:
    """part -> the first known bug that passes the visible tests of that part."""
    source = _solution(assignment)
    bugs = bug_module(assignment).BUGS
    chosen = {}
    for part in graded_parts(source):
        visible, _ = split_test_cell(cell_by_grade_id(source, f"{part}_tests").source)
        slipped = [
            b for b, fn in bugs.get(part, {}).items() if check_failure(visible, part, fn) is None
        ]
        if slipped:  # none: test_every_part_has_a_bug_only_the_hidden_tests_catch fails
            chosen[part] = slipped[0]
    return chosen


HIDDEN_ONLY = {a: _hidden_only_bugs(a) for a in ASSIGNMENTS if bug_module(a) is not None}
"""assignment -> part -> bug id (an assignment without tests/buggy fails test_hidden_tests.py)"""


def _bug_student(part: str, bug_id: str) -> str:
    return f"bug-{part}-{bug_id}"


def _students(assignment: str) -> list[str]:
    bugs = HIDDEN_ONLY.get(assignment, {})
    return ["solver", "blank", "halfway", *(_bug_student(p, b) for p, b in bugs.items())]


def _hand_in(course: Path, assignment: str, student: str, nb, with_bugs: bool = False) -> None:
    """Put ``nb`` in submitted/ (and, for a notebook that imports its answer from
    ``buggy.<name>``, a copy of tests/buggy beside it)."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    if with_bugs:
        shutil.copytree(BUGGY, folder / "buggy", ignore=shutil.ignore_patterns("__pycache__"))


def _grade(root: Path, assignment: str) -> Path:
    """A course for ``assignment`` after generate_assignment, autograde, feedback, export."""
    course = new_course(root, [assignment])
    nbgrader(course, "generate_assignment", assignment)
    source = read(notebook_path(course / "solutions", assignment))
    release = read(notebook_path(course / "exercises", assignment))

    _hand_in(course, assignment, "solver", source)
    _hand_in(course, assignment, "blank", release)
    halfway = read(notebook_path(course / "exercises", assignment))
    for part in _half_solved(assignment):
        cell_by_grade_id(halfway, f"{part}_impl").source = reference_answer(
            cell_by_grade_id(source, f"{part}_impl").source
        )
    _hand_in(course, assignment, "halfway", halfway)
    for part, bug_id in HIDDEN_ONLY.get(assignment, {}).items():
        buggy = read(notebook_path(course / "solutions", assignment))
        # The learner's answer cell: the buggy implementation, imported from tests/buggy,
        # handed in beside the notebook.
        module = bug_module(assignment).__name__
        answer = f"from {module} import BUGS\n{part} = BUGS[{part!r}][{bug_id!r}]\n"
        cell_by_grade_id(buggy, f"{part}_impl").source = answer
        _hand_in(course, assignment, _bug_student(part, bug_id), buggy, with_bugs=True)

    nbgrader(course, "autograde", assignment, timeout=900, trusted=True)
    nbgrader(course, "generate_feedback", assignment)
    nbgrader(course, "export", "--to", str(course / "grades.csv"))
    return course


@pytest.fixture(scope="module")
def graded(tmp_path_factory, grader_path) -> dict[str, Path]:
    """assignment -> its graded course directory; the assignments are graded side by side, a
    few at a time (twelve nbgrader runs at once on 2 cores only wait on each other, and start a
    dozen kernels at the same moment)."""
    roots = {a: tmp_path_factory.mktemp(f"course-{a}") for a in ASSIGNMENTS}
    with ThreadPoolExecutor(max_workers=min(4, len(ASSIGNMENTS))) as pool:
        futures = {a: pool.submit(_grade, roots[a], a) for a in ASSIGNMENTS}
        return {a: future.result() for a, future in futures.items()}


def _auto_scores(course: Path, assignment: str, student: str) -> dict[str, float]:
    """grade_id -> auto_score of each autograded test cell, read from the gradebook."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(assignment, assignment, student)
        return {g.name: g.auto_score for g in notebook.grades if g.cell.name.endswith("_tests")}


def _expected_scores(assignment: str, student: str) -> dict[str, float]:
    """grade_id -> the auto score ``student`` must get, from the notebook's metadata."""
    points = autograded_tests(_solution(assignment))
    if student == "solver":
        full = set(points)
    elif student == "blank":
        full = set()
    elif student == "halfway":
        solution = _solution(assignment)
        full = {
            cell for part in _half_solved(assignment) for cell in part_test_cells(solution, part)
        }
    else:
        bugged, bug_id = next(
            (p, b) for p, b in HIDDEN_ONLY[assignment].items() if student == _bug_student(p, b)
        )
        full = set(points) - {losing_cell(bugged, bug_module(assignment).BUGS[bugged][bug_id])}
    return {gid: (p if gid in full else 0.0) for gid, p in points.items()}


STUDENTS = [(a, s) for a in ASSIGNMENTS for s in _students(a)]


# ----------------------------------------------------------------------------- the notebooks


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_autograded_parts_and_one_written_question(assignment):
    source = _solution(assignment)
    auto, manual = autograded_tests(source), manual_answers(source)
    parts = graded_parts(source)
    assert len(parts) >= 2
    # every test cell checks one part: its own cell, or (graded apart) its input checks
    assert sorted(auto) == sorted(cell for part in parts for cell in part_test_cells(source, part))
    assert len(manual) == 1
    assert all(p > 0 for p in [*auto.values(), *manual.values()])
    module = bug_module(assignment)
    assert module is not None and list(module.BUGS) == parts


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_part_has_a_bug_only_the_hidden_tests_catch(assignment):
    assert assignment in HIDDEN_ONLY, f"add tests/buggy/{assignment}.py"
    assert list(HIDDEN_ONLY[assignment]) == graded_parts(_solution(assignment))


# ------------------------------------------------------------------------------ the grading


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_generated_here_equals_exercises(graded, assignment):
    """A second, independent generate_assignment gives the committed release again."""
    fresh = notebook_path(graded[assignment] / "exercises", assignment).read_text()
    committed = notebook_path(EXERCISES, assignment).read_text()
    assert json.loads(fresh) == json.loads(committed)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_gradebook_knows_every_graded_cell(graded, assignment):
    source = _solution(assignment)
    with Gradebook(f"sqlite:///{graded[assignment] / 'gradebook.db'}") as gb:
        notebook = gb.find_notebook(assignment, assignment)
        assert {c.name: c.max_score for c in notebook.grade_cells} == {
            **autograded_tests(source),
            **manual_answers(source),
        }


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_scores_full_marks(graded, assignment):
    expected = autograded_tests(_solution(assignment))
    assert _auto_scores(graded[assignment], assignment, "solver") == expected
    with Gradebook(f"sqlite:///{graded[assignment] / 'gradebook.db'}") as gb:
        submission = gb.find_submission(assignment, "solver")
        assert submission.score == sum(expected.values())
        assert submission.max_score == sum(expected.values()) + sum(
            manual_answers(_solution(assignment)).values()
        )
        # the written answer waits for a person
        assert submission.needs_manual_grade


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_untouched_release_scores_zero_everywhere(graded, assignment):
    scores = _auto_scores(graded[assignment], assignment, "blank")
    assert set(scores) == set(autograded_tests(_solution(assignment)))
    assert all(score == 0 for score in scores.values()), scores


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_half_solved_scores_exactly_its_parts(graded, assignment):
    expected = _expected_scores(assignment, "halfway")
    assert _auto_scores(graded[assignment], assignment, "halfway") == expected
    points = autograded_tests(_solution(assignment))
    assert 0 < sum(expected.values()) < sum(points.values())


@pytest.mark.parametrize(
    ("assignment", "student"),
    [(a, s) for a, s in STUDENTS if s.startswith("bug-")],
    ids=[f"{a}-{s.removeprefix('bug-')}" for a, s in STUDENTS if s.startswith("bug-")],
)
def test_a_bug_only_the_hidden_tests_catch_costs_exactly_its_part(graded, assignment, student):
    expected = _expected_scores(assignment, student)
    assert sorted(expected.values()).count(0.0) == 1
    assert _auto_scores(graded[assignment], assignment, student) == expected


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_feedback_html_is_generated(graded, assignment):
    parts = graded_parts(_solution(assignment))
    feedback = graded[assignment] / "feedback"
    texts = {}
    for student in _students(assignment):
        html = feedback / student / assignment / f"{assignment}.html"
        assert html.is_file(), f"no feedback for {student}"
        texts[student] = text = html.read_text(encoding="utf-8")
        assert "Score" in text and all(part in text for part in parts), student
    for student, text in texts.items():
        if student.startswith("bug-"):
            # the hidden test's teaching message reaches the learner (the solver's feedback
            # has these words only where the notebook's own text explains a failure)
            for label in ("expected:", "got:", "Hint:"):
                assert text.count(label) > texts["solver"].count(label), (student, label)
    # the blank notebook's feedback tells the learner what to do
    assert "not written yet" in texts["blank"]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_csv_export_has_the_scores(graded, assignment):
    source = _solution(assignment)
    total = sum(autograded_tests(source).values()) + sum(manual_answers(source).values())
    expected = {s: sum(_expected_scores(assignment, s).values()) for s in _students(assignment)}
    with open(graded[assignment] / "grades.csv", newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert set(rows) == set(expected)
    for student, score in expected.items():
        assert rows[student]["assignment"] == assignment
        assert float(rows[student]["score"]) == score
        assert float(rows[student]["max_score"]) == total
