"""Mistakes an instructor makes with `mini-llm grade`, each a short message that loses nothing.

A damaged gradebook stops the command before anything is graded or written (nbgrader would fail
later with pages of traceback); a notebook of another assignment is one problem in the summary,
not a line for every cell.
"""

from __future__ import annotations

import shutil

import nbformat
from _exercise_helpers import EXERCISES, SOLUTIONS, new_course, notebook_path

from mini_llm.cli import main
from mini_llm.grading.notebook import load_assignment, read_submission

ASSIGNMENT = "ch01_bigrams"


def _files(course) -> list:
    """What is in the course folder, but the exchange folder its nbgrader_config.py makes."""
    return sorted(p.relative_to(course) for p in course.rglob("*") if ".exchange" not in p.parts)


def test_a_notebook_of_another_assignment_is_one_problem(tmp_path):
    assignment = load_assignment(notebook_path(SOLUTIONS, ASSIGNMENT))
    submitted = tmp_path / f"{ASSIGNMENT}.ipynb"
    shutil.copy(notebook_path(EXERCISES, "ch02_ngrams"), submitted)
    read = read_submission(submitted, assignment, {})
    assert read.answers == {}
    (problem,) = read.problems
    assert f"{submitted.name} is not a notebook of {ASSIGNMENT}" in problem
    assert "another assignment's notebook submitted? graded as empty" in problem

    nb = nbformat.read(notebook_path(EXERCISES, ASSIGNMENT), as_version=4)
    for cell in nb.cells:  # the code pasted into a new notebook: no hidden ids
        cell.metadata.pop("nbgrader", None)
    nbformat.write(nb, submitted)
    read = read_submission(submitted, assignment, {})
    (problem,) = read.problems
    assert f"has none of the answer and test cells of {ASSIGNMENT}" in problem

    # one deleted test cell is still named on its own
    nb = nbformat.read(notebook_path(EXERCISES, ASSIGNMENT), as_version=4)
    nb.cells = [
        c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "average_nll_tests"
    ]
    nbformat.write(nb, submitted)
    problems = read_submission(submitted, assignment, {}).problems
    assert "test cell 'average_nll_tests' was deleted; the assignment's version was used" in (
        problems
    )
    assert not any("not a notebook of" in p for p in problems)


def test_an_unreadable_gradebook_stops_grading_before_anything_is_written(tmp_path, capsys):
    course = new_course(tmp_path / "course", [ASSIGNMENT])
    student = course / "submitted" / "ada" / ASSIGNMENT
    student.mkdir(parents=True)
    shutil.copy(notebook_path(EXERCISES, ASSIGNMENT), student)
    gradebook = course / "gradebook.db"
    gradebook.write_bytes(b"scores of last term, damaged\n")
    before = _files(course)
    grade = ["grade", ASSIGNMENT, "--course-dir", str(course), "--trusted-cohort"]
    for extra in ([], ["--feedback-only"]):
        assert main([*grade, *extra]) == 2, extra
        err = capsys.readouterr().err
        assert f"the gradebook {gradebook} cannot be read (file is not a database)" in err
        assert "nothing was graded or written" in err and len(err.splitlines()) == 1, err
        assert gradebook.read_bytes() == b"scores of last term, damaged\n"
        assert _files(course) == before
    gradebook.unlink()
    assert main([*grade, "--feedback-only"]) == 2
    err = capsys.readouterr().err
    assert f"no gradebook at {gradebook}: nothing was graded" in err, err
    assert not gradebook.exists()


def test_an_unknown_assignment_lists_the_courses(tmp_path, capsys):
    course = new_course(tmp_path / "course", [ASSIGNMENT, "ch02_ngrams"])
    assert main(["grade", "ch1_bigrams", "--course-dir", str(course), "--trusted-cohort"]) == 2
    err = capsys.readouterr().err
    assert (
        "no assignment 'ch1_bigrams'" in err and "the course has ch01_bigrams, ch02_ngrams" in err
    )
    assert not (course / "gradebook.db").exists()
