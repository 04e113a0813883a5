"""`mini-llm grade` works for every assignment: its solution earns every automatic point, its
untouched release earns none, and the gradebook says the same (no score hard-coded)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from _exercise_helpers import (
    ASSIGNMENTS,
    BIN,
    EXERCISES,
    SOLUTIONS,
    autograded_tests,
    new_course,
    notebook_path,
    read,
)
from nbgrader.api import Gradebook


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_gets_every_point_and_release_none(tmp_path, assignment):
    os.environ["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"  # nbgrader: alembic
    course = new_course(tmp_path / "course", [assignment])
    for student, folder in (("solver", SOLUTIONS), ("untouched", EXERCISES)):
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True)
        shutil.copy(notebook_path(folder, assignment), target)
    run = subprocess.run([str(BIN / "mini-llm"), "grade", assignment, "--course-dir", str(course),
                          "--timeout", "300", "--cell-timeout", "60"], capture_output=True,
                         text=True, timeout=900, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    points = autograded_tests(read(notebook_path(SOLUTIONS, assignment)))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, expected in (("solver", sum(points.values())), ("untouched", 0.0)):
            grades = gb.find_submission_notebook(assignment, assignment, student).grades
            assert sum(g.auto_score or 0 for g in grades if g.name in points) == expected
    assert "solver" in run.stdout and (course / f"grading-{assignment}.json").exists()
