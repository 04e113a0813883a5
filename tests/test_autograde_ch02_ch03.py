"""The nbgrader round trip for ch02_ngrams and ch03_neural_lm, with a real gradebook.

The pattern of ``test_autograde.py`` (ch01), applied to the next two assignments. In a temporary
course directory each assignment receives:

* ``solver`` -- the solution notebook: full marks on every autograded cell;
* ``blank``  -- the release, untouched: zero everywhere;
* ``bug-<part>-<bug id>`` -- the solution notebook with one part replaced by a known-buggy
  implementation from ``tests/buggy/<assignment>.py`` (the one per part that the visible tests
  let through, so that only the hidden tests can catch it): that part scores 0, every other
  part full marks.

Expected scores come from the notebook's nbgrader metadata, never typed in.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import nbformat
import numpy as np
import pytest
from _exercise_helpers import (
    REPO,
    SOLUTIONS,
    autograded_tests,
    cell_by_grade_id,
    graded_parts,
    nbgrader,
    new_course,
    notebook_path,
    read,
    split_test_cell,
)
from nbgrader.api import Gradebook

pytestmark = pytest.mark.slow  # real nbgrader runs, a few seconds each

ASSIGNMENTS = ["ch02_ngrams", "ch03_neural_lm"]


def _bugs(assignment: str):
    path = REPO / "tests" / "buggy" / f"{assignment}.py"
    spec = importlib.util.spec_from_file_location(f"buggy_{assignment}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module.BUGS


def _passes(code: str, part: str, implementation) -> bool:
    with np.errstate(all="ignore"):
        try:
            exec(compile(code, f"<{part}_tests>", "exec"), {part: implementation})  # noqa: S102
        except AssertionError:
            return False
    return True


def _hidden_only_bugs(assignment: str) -> dict[str, str]:
    """part -> the first known bug that passes the visible tests of that part."""
    source = read(notebook_path(SOLUTIONS, assignment))
    _, bugs = _bugs(assignment)
    chosen = {}
    for part in graded_parts(source):
        visible, _ = split_test_cell(cell_by_grade_id(source, f"{part}_tests").source)
        chosen[part] = next(b for b, fn in bugs[part].items() if _passes(visible, part, fn))
    return chosen


STUDENTS = {a: ["solver", "blank", *(f"bug-{p}-{b}" for p, b in _hidden_only_bugs(a).items())]
            for a in ASSIGNMENTS}


def _hand_in(course: Path, assignment: str, student: str, nb, module: Path | None = None) -> None:
    """Put ``nb`` (and a Python file it imports, as ``buggy_<assignment>.py``) in submitted/."""
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{assignment}.ipynb")
    if module is not None:
        shutil.copy(module, folder / f"buggy_{assignment}.py")


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> Path:
    course = new_course(tmp_path_factory.mktemp("course"), ASSIGNMENTS)
    for assignment in ASSIGNMENTS:
        nbgrader(course, "generate_assignment", assignment)
        source = read(notebook_path(course / "solutions", assignment))
        _hand_in(course, assignment, "solver", source)
        _hand_in(course, assignment, "blank", read(notebook_path(course / "exercises", assignment)))
        bug_file, _ = _bugs(assignment)
        for part, bug_id in _hidden_only_bugs(assignment).items():
            buggy = read(notebook_path(course / "solutions", assignment))
            # The learner's answer cell: the buggy implementation, imported from a file that is
            # handed in beside the notebook.
            cell_by_grade_id(buggy, f"{part}_impl").source = (
                f"from buggy_{assignment} import BUGS\n{part} = BUGS[{part!r}][{bug_id!r}]\n")
            _hand_in(course, assignment, f"bug-{part}-{bug_id}", buggy, module=bug_file)
        nbgrader(course, "autograde", assignment, timeout=900)
    return course


def _auto_scores(course: Path, assignment: str, student: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(assignment, assignment, student)
        return {g.name: g.auto_score for g in notebook.grades if g.cell.name.endswith("_tests")}


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_four_autograded_parts_and_one_written_question(assignment):
    source = read(notebook_path(SOLUTIONS, assignment))
    assert len(autograded_tests(source)) == 4
    assert len(graded_parts(source)) == 4


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_scores_full_marks_and_release_zero(graded, assignment):
    points = autograded_tests(read(notebook_path(SOLUTIONS, assignment)))
    assert _auto_scores(graded, assignment, "solver") == points
    blank = _auto_scores(graded, assignment, "blank")
    assert set(blank) == set(points) and not any(blank.values()), blank


@pytest.mark.parametrize(("assignment", "student"),
                         [(a, s) for a in ASSIGNMENTS for s in STUDENTS[a] if s.startswith("bug-")])
def test_a_bug_only_the_hidden_tests_catch_costs_exactly_its_part(graded, assignment, student):
    points = autograded_tests(read(notebook_path(SOLUTIONS, assignment)))
    part = next(p for p in (gid.removesuffix("_tests") for gid in points)
                if student.startswith(f"bug-{p}-"))
    expected = {gid: (0.0 if gid == f"{part}_tests" else p) for gid, p in points.items()}
    assert _auto_scores(graded, assignment, student) == expected
