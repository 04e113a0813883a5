"""A written answer from hand-in to final grade: pending until a person scores it, then counted.

`mini-llm grade` grades a course where ``writer`` handed in the solution (every test passes, a
written answer) and ``blank`` the untouched release. The written answer's points are pending in
the summary, the CSV and the feedback alike; an instructor then scores it in the gradebook the
way formgrader does (the browser test in test_lab.py does it through formgrader itself), and
``mini-llm grade --feedback-only`` brings the summary, CSV and feedback to the same total. A
second grading run keeps the score the person gave. The feedback shows what the set-up code
printed in the replay. Points come from the notebook's metadata.
"""

from __future__ import annotations

import csv
import re
import shutil
import subprocess

import pytest
from _exercise_helpers import (
    BIN,
    EXERCISES,
    SOLUTIONS,
    autograded_tests,
    manual_answers,
    new_course,
    notebook_path,
    read,
)
from nbgrader.api import Gradebook

from mini_llm.corpus import load_corpus

ASSIGNMENT = "ch01_bigrams"  # the quickest to grade; every assignment has a written answer
SOURCE = read(notebook_path(SOLUTIONS, ASSIGNMENT))
AUTO = sum(autograded_tests(SOURCE).values())
((QUESTION, WRITTEN),) = manual_answers(SOURCE).items()
TOTAL = AUTO + WRITTEN
GIVEN = WRITTEN / 2  # what the instructor awards the written answer


def grade(course, *args: str) -> str:
    run = subprocess.run(
        [str(BIN / "mini-llm"), "grade", ASSIGNMENT, "--course-dir", str(course), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run.stdout


def line(summary: str, student: str) -> str:
    (found,) = [row for row in summary.splitlines() if row.split(" ", 1)[0] == student]
    return found


def csv_row(course, student: str) -> dict[str, str]:
    with open(course / f"grades-{ASSIGNMENT}.csv", newline="") as handle:
        (row,) = [r for r in csv.DictReader(handle) if r["student_id"] == student]
    return row


def feedback(course, student: str) -> str:
    return (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()


def score_by_hand(course, student: str, points: float, comment: str) -> None:
    """What formgrader's save does: the manual score and comment of one answer."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        args = (QUESTION, ASSIGNMENT, ASSIGNMENT, student)
        grade_row = gb.find_grade(*args)
        grade_row.manual_score = points
        grade_row.needs_manual_grade = False
        gb.find_comment(*args).manual_comment = comment
        gb.db.commit()


@pytest.fixture(scope="module")
def course(tmp_path_factory, grader_path, bubblewrap):
    course = new_course(tmp_path_factory.mktemp("manual") / "course", [ASSIGNMENT])
    for student, folder in (("writer", SOLUTIONS), ("blank", EXERCISES)):
        target = course / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        shutil.copy(notebook_path(folder, ASSIGNMENT), target)
    return course


@pytest.fixture(scope="module")
def before(course):
    return grade(course)


def test_an_ungraded_written_answer_is_pending_everywhere(course, before):
    assert f"{AUTO:g}/{TOTAL:g} ({WRITTEN:g} pending)" in line(before, "writer")
    assert "--feedback-only" in before  # says what to do next
    row = csv_row(course, "writer")
    assert float(row["auto_score"]) == float(row["raw_score"]) == AUTO
    assert float(row["pending_points"]) == WRITTEN and row["status"] == "pending"
    assert float(row["max_score"]) == TOTAL
    page = feedback(course, "writer")
    assert f"{WRITTEN:g} points pending" in page.replace(f"{WRITTEN:.1f}", f"{WRITTEN:g}")
    assert f"Score: 0.0 / {WRITTEN:.1f}" not in page
    # the set-up cell's output, as the grader's replay printed it (no kernel output is kept)
    assert f"{len(load_corpus('names'))} names, e.g." in page
    # a written answer left as released is 0, not pending
    assert line(before, "blank").split()[1] == f"0/{TOTAL:g}"
    assert csv_row(course, "blank")["status"] == "graded"


def test_a_person_s_score_reaches_the_summary_csv_and_feedback(course, before):
    score_by_hand(course, "writer", GIVEN, "Right idea; say **which** count is zero.")
    after = grade(course, "--feedback-only")
    assert line(after, "writer").split()[1:] == [f"{AUTO + GIVEN:g}/{TOTAL:g}"]
    row = csv_row(course, "writer")
    assert float(row["manual_score"]) == GIVEN and float(row["pending_points"]) == 0
    assert float(row["score"]) == AUTO + GIVEN and row["status"] == "graded"
    page = feedback(course, "writer")
    total = re.search(r'<h4 id="total">[^:]*: ([\d.]+) / ([\d.]+)', page)
    assert (float(total[1]), float(total[2])) == (AUTO + GIVEN, TOTAL)
    assert "<strong>which</strong>" in page and 'class="pending"' not in page


def test_grading_again_keeps_the_person_s_score(course, before):
    score_by_hand(course, "writer", GIVEN, "kept")
    again = grade(course, "--student", "writer")
    assert line(again, "writer").split()[1:2] == [f"{AUTO + GIVEN:g}/{TOTAL:g}"]
    assert float(csv_row(course, "writer")["manual_score"]) == GIVEN
