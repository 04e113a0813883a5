"""Handing in through nbgrader's exchange, on one machine, with nbgrader's own commands.

A course like the repository's (its nbgrader_config.py, which names the course and puts the
exchange in ``.exchange/``) releases ch01_bigrams; a learner, working in a folder of their own
whose nbgrader_config.py names the same course and exchange (as book/exercises.md tells them),
fetches it, writes one function, submits; the instructor collects, grades with `mini-llm grade`
in the sandbox and releases the feedback, which the learner fetches. nbgrader's files beside
the collected notebook are not taken for the learner's extra files. The scores are read from
the gradebook and the points from the notebook's metadata, never typed in.
"""

from __future__ import annotations

import html
import json
import re
import subprocess

import nbformat
import pytest
from _exercise_helpers import (
    BIN,
    SOLUTIONS,
    autograded_tests,
    cell_by_grade_id,
    graded_parts,
    nbgrader,
    new_course,
    notebook_path,
    part_test_cells,
    read,
    reference_answer,
)
from nbgrader.api import Gradebook

from mini_llm.grading import runner

ASSIGNMENT = "ch01_bigrams"
COURSE_ID = "mini_llm"  # nbgrader_config.py's, as book/exercises.md gives it to learners
LEARNER = "ada"
SOURCE = read(notebook_path(SOLUTIONS, ASSIGNMENT))
PART = graded_parts(SOURCE)[0]  # the one function the learner writes
ANSWER = reference_answer(cell_by_grade_id(SOURCE, f"{PART}_impl").source)


def learner_folder(root, exchange):
    """A learner's working folder: its nbgrader_config.py names the course and the exchange."""
    root.mkdir()
    (root / "nbgrader_config.py").write_text(
        "c = get_config()\n"
        f"c.CourseDirectory.course_id = {COURSE_ID!r}\n"
        f"c.Exchange.root = {str(exchange)!r}\n"
    )
    return root


def write_answer(notebook, source: str) -> None:
    """What the learner does in JupyterLab: their code in the part's answer cell, saved."""
    nb = read(notebook)
    cell_by_grade_id(nb, f"{PART}_impl").source = source
    nbformat.write(nb, notebook)


def scores(course) -> dict[str, float]:
    """grade_id -> score of each autograded test cell of the learner's submission."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, LEARNER)
        return {g.name: g.score for g in notebook.grades if g.name in autograded_tests(SOURCE)}


def shown_scores(page: str) -> dict[str, tuple[float, float]]:
    """grade_id -> (score, points) as the feedback page heads each test cell."""
    found = {}
    for grade_id in autograded_tests(SOURCE):
        heading = re.search(
            rf'<a name="{grade_id}"></a>\s*<div class="panel-heading">(?:(?!</div>).)*?'
            r"Score: ([\d.]+) / ([\d.]+)",
            page,
            re.DOTALL,
        )
        assert heading, f"the feedback has no score for {grade_id}"
        found[grade_id] = (float(heading[1]), float(heading[2]))
    return found


def text_of(page: str) -> str:
    """The page as a reader sees its text: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


@pytest.fixture
def isolated_jupyter(tmp_path, monkeypatch):
    """nbgrader's learner cache and Jupyter's config in the test's folder, not the home's."""
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "jupyter-config"))


def test_release_fetch_submit_collect_grade_and_return_feedback(
    tmp_path, grader_path, bubblewrap, isolated_jupyter
):
    course = new_course(tmp_path / "course", [ASSIGNMENT])
    nbgrader(course, "generate_assignment", ASSIGNMENT)
    nbgrader(course, "release_assignment", ASSIGNMENT)
    released = course / ".exchange" / COURSE_ID / "outbound" / ASSIGNMENT
    assert (released / f"{ASSIGNMENT}.ipynb").is_file(), "released under another course id"

    learner = learner_folder(tmp_path / "learner", course / ".exchange")
    nbgrader(learner, "fetch_assignment", ASSIGNMENT)
    mine = notebook_path(learner, ASSIGNMENT)
    assert mine.read_bytes() == notebook_path(course / "exercises", ASSIGNMENT).read_bytes()
    write_answer(mine, ANSWER)
    nbgrader(learner, "submit", ASSIGNMENT, f"--student={LEARNER}")

    nbgrader(course, "collect", ASSIGNMENT)
    handed_in = notebook_path(course / "submitted" / LEARNER, ASSIGNMENT)
    assert cell_by_grade_id(read(handed_in), f"{PART}_impl").source == ANSWER
    graded = subprocess.run(
        [str(BIN / "mini-llm"), "grade", ASSIGNMENT, "--course-dir", str(course)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    points = autograded_tests(SOURCE)
    earned = set(part_test_cells(SOURCE, PART))
    expected = {gid: (p if gid in earned else 0.0) for gid, p in points.items()}
    assert scores(course) == expected
    report = json.loads((course / f"grading-{ASSIGNMENT}.json").read_text())
    problems = " ".join(report["students"][LEARNER]["problems"])
    assert all(name not in problems for name in runner.EXCHANGE_FILES), problems
    nbgrader(course, "release_feedback", ASSIGNMENT)

    nbgrader(learner, "fetch_feedback", ASSIGNMENT)
    stamp = (course / "submitted" / LEARNER / ASSIGNMENT / "timestamp.txt").read_text()
    received = learner / ASSIGNMENT / "feedback" / stamp / f"{ASSIGNMENT}.html"
    assert received.is_file(), f"no feedback where nbgrader files it: {received}"
    written = course / "feedback" / LEARNER / ASSIGNMENT / f"{ASSIGNMENT}.html"
    assert received.read_bytes() == written.read_bytes()
    page = received.read_text()
    assert shown_scores(page) == {gid: (expected[gid], points[gid]) for gid in points}
    shown = text_of(page)
    assert all(line in shown for line in ANSWER.splitlines() if line.strip())


def test_plain_nbgrader_autograde_is_refused_and_runs_nothing(tmp_path, grader_path):
    """Formgrader's instructions say to grade everyone with `nbgrader autograde`; in this course
    that would run each submission unsandboxed, as the instructor. The command stops, names
    `mini-llm grade`, and runs no cell of the submission."""
    course = new_course(tmp_path / "course", [ASSIGNMENT])
    nbgrader(course, "generate_assignment", ASSIGNMENT)
    marker = tmp_path / "the submission ran"
    handed_in = read(notebook_path(course / "exercises", ASSIGNMENT))
    answer = f"open({str(marker)!r}, 'w').close()\n{ANSWER}"
    cell_by_grade_id(handed_in, f"{PART}_impl").source = answer
    folder = course / "submitted" / LEARNER / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(handed_in, folder / f"{ASSIGNMENT}.ipynb")
    refused = subprocess.run(
        [str(BIN / "nbgrader"), "autograde", ASSIGNMENT],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"mini-llm grade {ASSIGNMENT} --student ID" in refused.stderr
    assert "unsandboxed" in refused.stderr
    assert not marker.exists() and not (course / "autograded").exists()
    # told it trusts the notebooks, nbgrader's own autograde runs them: the refusal is all
    # that stood in the way
    nbgrader(course, "autograde", ASSIGNMENT, trusted=True)
    assert marker.exists() and (course / "autograded" / LEARNER / ASSIGNMENT).is_dir()
