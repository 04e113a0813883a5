"""`make lab` as learners and instructors use it, in headless Chromium on 127.0.0.1.

A course like the repository's (ch01_bigrams, one learner ``writer`` who handed in the solution)
is graded with `mini-llm grade`; then `make lab COURSE=...` starts JupyterLab in it. In the
browser: a notebook opens with its math typeset by JupyterLab; the learner's Assignment List
shows no error; formgrader loads (it hangs on "Loading" without `alembic` on PATH), shows the
submission with math typeset by the book's MathJax (no request leaves 127.0.0.1), and a score
typed into the written answer's box is saved to the gradebook; after `mini-llm grade
--feedback-only` the CSV and the feedback page, opened from disk, carry the new total with its
math typeset; formgrader's Autograde button grades through `mini-llm grade --student`.
Screenshots go to test-artifacts/screenshots/lab-*.png.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request

import nbformat
import pytest
from _exercise_helpers import REPO, SOLUTIONS, new_course, notebook_path
from nbgrader.api import Gradebook
from test_browser import SCREENSHOTS, browser  # noqa: F401 (a fixture)
from test_grading_manual import ASSIGNMENT, AUTO, QUESTION, WRITTEN, csv_row, grade

GIVEN = WRITTEN - 1  # what the instructor types into formgrader
HOSTILE_TEX = (
    "Chemistry: $\\require{mhchem}\\ce{H2O}$, a cancel $\\cancel{x}$, a macro nobody "
    "defined $\\nosuchmacro{y}$.\n\n"
)
"""TeX in the written answer that asks for extensions offline MathJax cannot load: the rest of
the page's math must still be typeset, and nothing fetched"""
HOSTILE_ID = "<img src=x onerror=window.HOSTILE_ID=1>"
"""a submission folder whose name is markup (formgrader's templates print student ids as they are)"""
LOAD_MS = 120_000  # a busy 2-core machine: JupyterLab's first load takes a while


@pytest.fixture(scope="module")
def course(tmp_path_factory, grader_path, bubblewrap):
    course = new_course(tmp_path_factory.mktemp("lab") / "course", [ASSIGNMENT])
    target = course / "submitted" / "writer" / ASSIGNMENT
    target.mkdir(parents=True)
    notebook = nbformat.read(notebook_path(SOLUTIONS, ASSIGNMENT), as_version=4)
    written = next(
        c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == QUESTION
    )
    written.source = HOSTILE_TEX + written.source
    nbformat.write(notebook, target / f"{ASSIGNMENT}.ipynb")
    hostile = course / "submitted" / HOSTILE_ID / ASSIGNMENT  # refused: it never reaches formgrader
    hostile.mkdir(parents=True)
    nbformat.write(notebook, hostile / f"{ASSIGNMENT}.ipynb")
    grade(course)
    return course


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def lab(course):
    """`make lab` in the course, on a free port of 127.0.0.1; yields (base URL, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    options = f"--no-browser --port={port} --ServerApp.port_retries=0 --ServerApp.token={token}"
    log = open(course / "lab.log", "w")  # noqa: SIM115 - closed after the server stops
    server = subprocess.Popen(
        [
            "make",
            "-s",
            "-C",
            str(REPO),
            "lab",
            f"COURSE={course}",
            f"LAB_ARGS={options} --LabApp.expose_app_in_browser=True",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (course / "lab.log").read_text()[-3000:]
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                assert time.monotonic() < deadline, (course / "lab.log").read_text()[-3000:]
                time.sleep(1)
        yield base, token
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        log.close()


class Tab:
    """A browser tab that refuses and records any request that leaves the lab's server."""

    def __init__(self, browser, base: str):  # noqa: F811 - the fixture's value
        self.base, self.outside, self.errors = base, [], []
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.set_default_timeout(LOAD_MS)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else 0)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _route(self, route):
        url = route.request.url
        if url.startswith((self.base, "data:", "blob:", "file:")):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort()

    def typeset(self) -> int:
        """The number of formulas MathJax typeset, once it has typeset any."""
        self.page.wait_for_selector("mjx-container", state="attached")
        return self.page.locator("mjx-container").count()

    def open_assignment_list(self, token: str) -> None:
        """JupyterLab with nbgrader's Assignment List panel open."""
        self.page.goto(f"{self.base}/lab?token={token}")
        command = "'nbgrader:open-assignment-list'"  # nbgrader's JupyterLab extension's
        self.page.wait_for_function(f"window.jupyterapp?.commands.hasCommand({command})")
        # Opened before JupyterLab has restored its layout, the panel can be added and then
        # hidden behind the restored tabs (CI saw its heading "resolved to hidden" for two
        # minutes).
        self.page.evaluate(
            f"async () => {{ await window.jupyterapp.restored;"
            f" await window.jupyterapp.commands.execute({command}); }}"
        )

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"lab-{name}.png"))

    def close(self):
        self.context.close()


@pytest.fixture
def tab(browser, lab):  # noqa: F811
    opened = Tab(browser, lab[0])
    yield opened
    opened.close()


def _submission_id(course) -> str:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, "writer").id


def test_a_notebook_opens_with_typeset_math(lab, tab):
    base, token = lab
    tab.page.goto(f"{base}/lab/tree/solutions/{ASSIGNMENT}/{ASSIGNMENT}.ipynb?token={token}")
    tab.page.wait_for_selector(".jp-Notebook .jp-MarkdownCell")
    assert tab.typeset() > 0
    tab.shot("notebook")
    assert not tab.outside


def test_the_assignment_list_shows_no_error(lab, tab):
    _, token = lab
    tab.open_assignment_list(token)
    tab.page.wait_for_selector("text=Released assignments")
    tab.page.wait_for_timeout(2000)  # the course list is fetched after the panel appears
    text = tab.page.inner_text("body")
    tab.shot("assignment-list")
    for error in ("Error fetching courses", "does not exist", "Unwritable directory"):
        assert error not in text, text[-500:]


def test_formgrader_grades_a_written_answer_with_typeset_math(course, lab, tab):
    base, token = lab
    tab.page.goto(f"{base}/formgrader/manage_assignments?token={token}")
    tab.page.wait_for_selector(f"text={ASSIGNMENT}")  # the table formgrader fills from its API
    assert "Loading, please wait" not in tab.page.inner_text("body")
    tab.page.goto(f"{base}/formgrader/submissions/{_submission_id(course)}/?token={token}")
    assert tab.typeset() > 0
    # typing before formgrader's script has loaded the grades is lost
    tab.page.wait_for_function("formgrader.grades && formgrader.grades.loaded")
    box = tab.page.locator(f"input.score.needs_manual_grade#{QUESTION}")  # ungraded, marked
    with tab.page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.ok):
        box.fill(f"{GIVEN:g}")
        box.press("Tab")
    tab.shot("formgrader")
    assert not tab.outside and not tab.errors, (tab.outside, tab.errors)
    assert tab.page.evaluate("formgrader.loaded")  # its set-up ran to the end
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        saved = gb.find_grade(QUESTION, ASSIGNMENT, ASSIGNMENT, "writer")
        assert saved.manual_score == GIVEN

    summary = grade(course, "--feedback-only")
    assert f"{AUTO + GIVEN:g}/{AUTO + WRITTEN:g}" in summary
    row = csv_row(course, "writer")
    assert (float(row["manual_score"]), float(row["score"])) == (GIVEN, AUTO + GIVEN)
    page = course / "feedback" / "writer" / ASSIGNMENT / f"{ASSIGNMENT}.html"
    tab.page.goto(page.as_uri())
    assert tab.typeset() > 0
    total = tab.page.inner_text("#total")
    assert f"{AUTO + GIVEN:.1f} / {AUTO + WRITTEN:.1f}" in total and "pending" not in total
    tab.shot("feedback")
    assert not tab.outside and not tab.errors, (tab.outside, tab.errors)


def test_formgraders_autograde_button_runs_the_hardened_grader(course, lab, tab):
    """Manage Submissions' Autograde button grades through `mini-llm grade --student` (the
    sandbox and the trusted replay), not nbgrader's plain kernel: the grader's report is
    written again, the functions' points come back, and a person's score is kept."""
    kept = WRITTEN - 2
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.find_grade(QUESTION, ASSIGNMENT, ASSIGNMENT, "writer").manual_score = kept
        gb.db.commit()
    report = course / f"grading-{ASSIGNMENT}.json"
    report.unlink()
    base, token = lab
    tab.page.goto(f"{base}/formgrader/manage_assignments?token={token}")  # logs the tab in
    tab.page.wait_for_selector(f"text={ASSIGNMENT}")
    tab.page.goto(f"{base}/formgrader/manage_submissions/{ASSIGNMENT}")
    tab.page.wait_for_selector("td.student-id:has-text('writer')")
    button = tab.page.locator("tr:has-text('writer') td.autograde a")
    with tab.page.expect_response(
        lambda r: r.url.endswith(f"/submission/{ASSIGNMENT}/writer/autograde"), timeout=900_000
    ) as answered:
        button.click()
    result = answered.value.json() if answered.value.ok else {}
    assert result.get("success"), result
    assert f"mini-llm grade {ASSIGNMENT} --student writer" in result["log"]
    tab.page.wait_for_selector("#success-modal")
    tab.page.wait_for_timeout(1000)  # the dialog fades in
    tab.shot("formgrader-autograde")
    assert json.loads(report.read_text())["students"]["writer"]["score"] == AUTO
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        assert gb.find_grade(QUESTION, ASSIGNMENT, ASSIGNMENT, "writer").manual_score == kept
        assert gb.find_submission(ASSIGNMENT, "writer").code_score == AUTO
    assert not tab.outside, tab.outside


HOSTILE_NAME = "<img src=x onerror=window.HOSTILE_NAME=1>"


def test_formgrader_shows_a_hostile_student_name_as_text(course, lab, tab):
    """A name in the gradebook (from a roster, or typed into Manage Students) that is markup:
    formgrader's pages show it as text and run none of it. A submission folder named as markup
    was refused by the grader: formgrader lists it, as text, with nothing graded to open (the
    page that printed an id as markup shows a graded submission)."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        gb.update_or_create_student("writer", first_name=HOSTILE_NAME, last_name="Doe")
    base, token = lab
    tab.page.goto(f"{base}/formgrader/manage_assignments?token={token}")  # logs the tab in
    tab.page.wait_for_selector(f"text={ASSIGNMENT}")
    for page, name in (("manage_students", "td.name"), (f"manage_submissions/{ASSIGNMENT}",
                                                      "td.student-name")):  # fmt: skip
        tab.page.goto(f"{base}/formgrader/{page}")
        tab.page.wait_for_selector(f"{name}:has-text('Doe')")
        assert HOSTILE_NAME in tab.page.inner_text(name), page  # shown, as text
        assert tab.page.evaluate("window.HOSTILE_NAME") is None, page  # and not run
        assert tab.page.evaluate("window.HOSTILE_ID") is None, page
        assert tab.page.locator("img[src=x]").count() == 0, page
        tab.shot(f"formgrader-hostile-name-{page.partition('/')[0]}")
    # formgrader lists the folders of submitted/ too: the refused one as text, never graded
    refused = tab.page.locator("tr", has_text=HOSTILE_ID)
    assert "needs autograding" in refused.inner_text()
    assert not tab.outside, tab.outside
