"""`mini-llm grade` works for every assignment: its solution earns every automatic point, its
untouched release earns none, and the gradebook says the same (no score hard-coded). For the
assignments in REGISTRY_GRADED, every known bug and correct alternative of tests/buggy is graded
through the command too."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
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
    losing_cell,
    new_course,
    notebook_path,
    read,
)
from nbgrader.api import Gradebook

pytestmark = [
    pytest.mark.usefixtures("bubblewrap"),  # `mini-llm grade` runs in its sandbox
    pytest.mark.timeout(3000),  # a whole registry is 20-40 submissions (the subprocess's limit)
]

GRADE = [sys.executable, "-m", "mini_llm.cli", "grade"]
"""`mini-llm grade` with this interpreter (the console script's shebang names the interpreter of
whichever checkout last installed the package)"""


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_solution_gets_every_point_and_release_none(tmp_path, grader_path, assignment):
    course = new_course(tmp_path / "course", [assignment])
    for student, folder in (("solver", SOLUTIONS), ("untouched", EXERCISES)):
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True)
        shutil.copy(notebook_path(folder, assignment), target)
    run = subprocess.run(
        [
            *GRADE,
            assignment,
            "--course-dir",
            str(course),
            "--timeout",
            "300",
            "--cell-timeout",
            "60",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    points = autograded_tests(read(notebook_path(SOLUTIONS, assignment)))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, expected in (("solver", sum(points.values())), ("untouched", 0.0)):
            grades = gb.find_submission_notebook(assignment, assignment, student).grades
            assert sum(g.auto_score or 0 for g in grades if g.name in points) == expected
    assert "solver" in run.stdout and (course / f"grading-{assignment}.json").exists()
    report = json.loads((course / f"grading-{assignment}.json").read_text())
    fallback = [p for p in report["run_problems"] if "trusted replay cannot check" in p]
    assert fallback == [], fallback  # the replay judges every test cell of every assignment


REGISTRY_GRADED = ASSIGNMENTS
"""assignments whose whole known-bug registry is also graded by `mini-llm grade`: all of them"""


def _self_contained_answer(module, table: str, part: str, key: str) -> str:
    """An answer cell that defines ``part`` as ``module.<table>[part][key]`` with no import of
    tests/buggy (the sandbox sees no file beside the notebook): the registry and the bug file's
    text, then the choice."""

    def body(path) -> str:
        text = re.sub(r"(?m)^from \._registry import .*$", "", path.read_text())
        return text.replace("from __future__ import annotations", "")

    registry, bugs = body(BUGGY / "_registry.py"), body(Path(module.__file__))
    return f"{registry}\n{bugs}\n{part} = {table}[{part!r}][{key!r}]\n"


@pytest.mark.parametrize("assignment", [a for a in ASSIGNMENTS if a in REGISTRY_GRADED])
def test_known_bugs_lose_their_part_and_alternatives_keep_every_point(
    tmp_path, grader_path, assignment
):
    """Every known bug, handed in as a learner's answer, loses exactly its part's points when
    graded by `mini-llm grade` (the grader and the notebook can disagree; the grader decides),
    and every correct alternative gets every point."""
    module = bug_module(assignment)
    source = read(notebook_path(SOLUTIONS, assignment))
    points = autograded_tests(source)
    students = {
        f"{kind}-{part}-{key}": (part, table, key)
        for kind, table in (("bug", "BUGS"), ("alt", "ALTERNATIVES"))
        for part, entries in getattr(module, table).items()
        for key in entries
    }
    course = new_course(tmp_path / "course", [assignment])
    for student, (part, table, key) in students.items():
        nb = read(notebook_path(SOLUTIONS, assignment))
        answer = _self_contained_answer(module, table, part, key)
        cell_by_grade_id(nb, f"{part}_impl").source = answer
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True)
        nbformat.write(nb, target / f"{assignment}.ipynb")
    # `python -m mini_llm.cli grade` is `mini-llm grade` with this interpreter: the console
    # script's shebang names the interpreter of whichever checkout last installed the package.
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mini_llm.cli",
            "grade",
            assignment,
            "--course-dir",
            str(course),
            "--workers",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=3000,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    wrong = []
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student, (part, table, key) in students.items():
            grades = gb.find_submission_notebook(assignment, assignment, student).grades
            got = {g.name: g.auto_score for g in grades if g.name in points}
            fn = getattr(module, table)[part][key]
            lost = {losing_cell(part, fn)} if table == "BUGS" else set()
            want = {g: (0.0 if g in lost else p) for g, p in points.items()}
            if got != want:
                wrong.append(f"{student}: {got}")
    assert not wrong, "\n".join(wrong)


def test_a_test_cell_the_replay_cannot_judge_takes_the_in_kernel_score_flagged(
    tmp_path, grader_path
):
    """A test cell that inspects the learner's function object itself passes in a notebook but
    not in the replay (there the name is a stub that calls into the sandbox). The reference
    solution fails it in the replay, so before any submission runs the grader names it, turns
    nbgrader's in-kernel run on and takes that score for the cell, flagged for a person."""
    assignment, cell_id = "ch01_bigrams", "count_bigrams_tests"
    course = new_course(tmp_path / "course", [assignment])
    source = notebook_path(course / "solutions", assignment)
    nb = read(source)
    cell_by_grade_id(nb, cell_id).source += "\nassert type(count_bigrams).__name__ == 'function'\n"
    nbformat.write(nb, source)
    target = course / "submitted" / "solver" / assignment
    target.mkdir(parents=True)
    shutil.copy(source, target)
    run = subprocess.run(
        [*GRADE, assignment, "--course-dir", str(course), "--timeout", "300"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = json.loads((course / f"grading-{assignment}.json").read_text())
    assert any(f"trusted replay cannot check {cell_id} (" in p for p in report["run_problems"])
    solver = report["students"]["solver"]
    assert solver["in_kernel_score"] == solver["score"] == sum(autograded_tests(nb).values())
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grades = gb.find_submission_notebook(assignment, assignment, "solver").grades
        flagged = {g.name for g in grades if g.needs_manual_grade}
    assert cell_id in flagged and "bigram_probabilities_tests" not in flagged
