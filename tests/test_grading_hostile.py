"""`mini-llm grade` on broken and hostile submissions: one real run, one student per case.

The cases (tests/hostile/cases.py) are built from the released and the solution notebook of
ch01_bigrams. One grader run grades them all in parallel, with real nbgrader (its in-kernel run
included), the OS sandbox, a real SQLite gradebook and real feedback. Then, for every student:
the grader finished, the gradebook holds exactly the points honestly earned (computed from the
assignment's metadata), and the summary or the feedback names what went wrong. The course's
files, the Python environment, the processes left running, the CSV and the feedback HTML are
checked too, since several cases attack them.
"""

from __future__ import annotations

import csv
import html
import json
import re
import subprocess
import sys
import time

import psutil
import pytest
from _exercise_helpers import EXERCISES, SOLUTIONS, new_course, notebook_path, read
from hostile.cases import (
    ASSIGNMENT,
    CASES,
    DAEMON_MARKER,
    LEAK_MARKER,
    REFUSED_FOLDERS,
    SUBMITTED_AT,
    Kit,
    planted_pth,
    refused_folders,
)
from nbgrader.api import Gradebook

from mini_llm.grading import offline_math

GRADE = [sys.executable, "-m", "mini_llm.grading"]  # `mini-llm grade`

pytestmark = pytest.mark.timeout(2400)  # the one graded run of every case, on a loaded machine

TIMEOUTS = ["--timeout", "120", "--cell-timeout", "20", "--memory-mb", "1024"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory, grader_path, bubblewrap):
    course = new_course(tmp_path_factory.mktemp("hostile"), [ASSIGNMENT])
    kit = Kit(
        course,
        read(notebook_path(SOLUTIONS, ASSIGNMENT)),
        read(notebook_path(EXERCISES, ASSIGNMENT)),
    )
    expected = {case.__name__: case(kit, case.__name__) for case in CASES}
    refused_folders(kit)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:  # a record from before
        gb.add_student("alumnus", first_name="Ada", last_name="Lovelace")
    config = (course / "nbgrader_config.py").read_bytes()
    start = time.monotonic()
    try:
        run = subprocess.run(
            [
                *GRADE,
                ASSIGNMENT,
                "--course-dir",
                str(course),
                "--workers",
                "2",
                "--in-kernel",
                *TIMEOUTS,
            ],
            capture_output=True,
            text=True,
            timeout=2400,
            check=False,
        )
        seconds = time.monotonic() - start
        # 1: some submissions had no readable notebook (they are recorded as empty)
        assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-5000:]
        planted = planted_pth(kit).exists()
        yield course, kit, expected, run.stdout, seconds, config, planted
    finally:  # never leave the attack's file in the shared environment, whatever happened
        planted_pth(kit).unlink(missing_ok=True)


def _line(summary: str, student: str) -> str:
    found = [line for line in summary.splitlines() if line.split(" ", 1)[0] == student]
    assert len(found) == 1, f"no summary line for {student}:\n{summary}"
    return found[0]


def _feedback(course, student: str) -> str:
    return html.unescape(
        (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    )


def _scores(course, student: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
        return {
            g.name: g.auto_score for g in notebook.grades if not g.cell.name.endswith("_answer")
        }


@pytest.mark.parametrize("case", [c.__name__ for c in CASES])
def test_each_case_is_scored_honestly_and_explained(graded, case):
    course, kit, expected, summary, *_ = graded
    line = _line(summary, case)
    total = sum(_scores(course, case).get(g, 0) or 0 for g in kit.tests)
    assert total == expected[case].score, line
    assert f"{expected[case].score:g}/{kit.total + kit.written_points:g}" in line
    said = expected[case].says.lower()
    if said == "-":  # nothing wrong
        assert line.rstrip().endswith("-"), f"no problem expected for {case}: {line}"
    else:
        assert said in line.lower() or said in _feedback(course, case).lower(), line


@pytest.mark.parametrize("case", ["os_exit", "segfault"])
def test_a_dead_kernel_leaves_no_later_test_passed(graded, case):
    course, kit, *_ = graded
    scores = _scores(course, case)
    crash = {"os_exit": kit.answers[len(kit.answers) // 2], "segfault": kit.answers[1]}[case]
    later = [g for g in kit.tests if kit.order.index(g) > kit.order.index(crash)]
    assert later and all(scores[g] == 0 for g in later)


def test_the_course_and_the_environment_are_untouched(graded):
    """writes_course_files, plants_code_for_later_steps and daemon_rewrites_gradebook aimed
    at these: the sandbox gives them no view of the course and a read-only environment."""
    course, kit, _, summary, _, config, planted = graded
    assert read(notebook_path(course / "solutions", ASSIGNMENT)) == kit.source
    honest = course / "submitted" / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert read(honest) == kit.solved()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_student("alumnus").first_name == "Ada"
    assert (course / "nbgrader_config.py").read_bytes() == config
    assert not planted, "a submission planted a .pth file in the Python environment"
    assert "restored" not in summary


def test_no_process_a_submission_started_outlives_the_run(graded):
    survivors = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if DAEMON_MARKER in " ".join(p.info["cmdline"] or [])
    ]
    assert not survivors


def test_recorded_scores_are_the_reported_scores(graded):
    """Gradebook, CSV export, JSON report and printed summary agree for every student."""
    course, kit, expected, summary, *_ = graded
    report = json.loads((course / f"grading-{ASSIGNMENT}.json").read_text())["students"]
    with open(course / f"grades-{ASSIGNMENT}.csv", newline="") as handle:
        exported = {
            row["student_id"]: float(row["raw_score"])
            for row in csv.DictReader(handle)
            if row["assignment"] == ASSIGNMENT
        }
    for student in expected:
        recorded = sum(_scores(course, student).get(g, 0) or 0 for g in kit.tests)
        printed = float(_line(summary, student).split()[1].split("/")[0])
        assert recorded == exported[student] == report[student]["score"] == printed, student


def test_feedback_html_keeps_an_answer_s_markup_as_text(graded):
    course, *_ = graded
    page = (
        course / "feedback" / "script_in_written_answer" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    ).read_text()
    assert "HOSTILE_SCRIPT" in page and "HOSTILE_ONERROR" in page  # shown, as text
    assert not re.search(r"<script[^>]*>\s*window\.HOSTILE", page)
    assert not re.search(r"<[a-z]+[^>]*\sonerror\s*=", page, re.IGNORECASE)
    assert not re.search(r"href\s*=\s*[\"']?javascript:", page, re.IGNORECASE)


def test_every_feedback_page_carries_the_book_s_mathjax_once_in_its_head(graded):
    """The grader puts MathJax into each page after nbgrader made it (offline_math)."""
    course, _, expected, *_ = graded
    for student in expected:
        page = (course / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        head = page.split("</head>", 1)[0]
        assert offline_math.MARKER not in page, student
        assert page.count("window.MathJax = ") == head.count("window.MathJax = ") == 1, student


def test_the_submission_time_is_recorded_as_nbgrader_reads_it(graded):
    course, *_ = graded
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        recorded = gb.find_submission(ASSIGNMENT, "honest").timestamp
    assert recorded.strftime("%Y-%m-%d %H:%M:%S") == SUBMITTED_AT[:19]


def test_the_instructor_report_keeps_the_full_message(graded):
    course, *_ = graded
    report = json.loads((course / f"grading-{ASSIGNMENT}.json").read_text())
    cells = report["students"]["hidden_failure"]["cells"]
    failed = [c for c in cells if c["kind"] == "test" and not c["passed"]]
    assert len(failed) == 1 and "expected:" in failed[0]["message"]


def test_grades_csv_lists_every_student(graded):
    course, _, expected, *_ = graded
    text = (course / f"grades-{ASSIGNMENT}.csv").read_text()
    for student in expected:
        assert f",{student}," in text


EMPTY = ["missing_notebook", "named_pipe_notebook", "not_json", "symlinked_notebook"]


def test_a_submission_without_a_readable_notebook_is_named_by_the_run_and_the_csv(graded):
    course, _, _, summary, *_ = graded
    (line,) = [line for line in summary.splitlines() if "graded as empty, from no" in line]
    named = line.partition(": ")[2].partition(" (")[0].split(", ")
    assert set(EMPTY) <= set(named) and "honest" not in named
    with (course / f"grades-{ASSIGNMENT}.csv").open(newline="") as file:
        rows = {row["student_id"]: row for row in csv.DictReader(file)}
    assert rows["not_json"]["status"] == "empty"
    assert "not a readable notebook" in rows["not_json"]["problems"]
    assert rows["honest"]["status"] == "pending" and rows["honest"]["problems"] == ""
    assert "failed: " in rows["hidden_failure"]["problems"]
    assert rows["alumnus"]["status"] == "missing"  # in the gradebook, never handed in


def _hidden_lines(kit) -> set[str]:
    """Lines of hidden test code that appear nowhere in the learner's release notebook."""
    released = "\n".join(c.source for c in kit.release.cells)
    lines = set()
    for cell in kit.source.cells:
        _, marker, rest = cell.source.partition("### BEGIN HIDDEN TESTS")
        if marker:
            hidden = rest.partition("### END HIDDEN TESTS")[0]
            lines |= {
                line.strip()
                for line in hidden.splitlines()
                if len(line.strip()) > 12 and line.strip() not in released
            }
    assert lines, "the assignment has no hidden tests to protect"
    return lines


def test_feedback_never_shows_hidden_tests(graded):
    course, kit, expected, *_ = graded
    hidden = _hidden_lines(kit)
    for student in expected:
        page = _feedback(course, student)
        leaked = [line for line in hidden if line in page]
        assert not leaked, f"{student}'s feedback shows hidden test code: {leaked[:3]}"


def test_feedback_names_a_failed_hidden_check_without_its_values(graded):
    course, *_ = graded
    page = re.sub(r"<[^>]+>", "", _feedback(course, "hidden_failure"))
    messages = [line for line in page.splitlines() if "A hidden check failed" in line]
    assert messages, "the failed hidden check is not named"
    for message in messages:
        assert "Hint:" in message
        assert "expected" not in message and "got" not in message.split("Hint:")[0]


def test_folders_that_are_not_submissions_are_refused_and_the_run_goes_on(graded):
    """A student id outside the safe alphabet (markup, terminal control codes) or a folder that
    links into the course is not graded: one line says so, nothing of it is recorded, and
    nothing it names reaches the terminal raw."""
    course, _, _, summary, *_ = graded
    run_lines = [line for line in summary.splitlines() if line.startswith("run: ")]
    assert sum("was not graded" in line for line in run_lines) == len(REFUSED_FOLDERS)
    assert "\x1b" not in summary and "\\x1b" in summary  # written as an escape
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        ids = {s.id for s in gb.students}
    assert not ids & set(REFUSED_FOLDERS.values())
    assert not any((course / "feedback" / name).exists() for name in REFUSED_FOLDERS.values())


def test_what_an_answer_saw_of_a_hidden_check_never_reaches_its_feedback(graded):
    """The learner's cells run before any check calls their code: a record of the calls it
    got is empty when it is printed; an exception named after a hidden call's arguments
    reaches the feedback neither by its name nor by a hint its message forged."""
    course, *_ = graded
    printed = _feedback(course, "prints_what_its_code_saw")
    assert f"{LEAK_MARKER} 0 []" in printed
    named = _feedback(course, "names_its_error_after_what_it_saw")
    assert "A hidden check failed" in named
    assert not re.search(r"Leak\d", named), re.findall(r".{80}Leak\d.{80}", named)
