"""nbgrader's exchange round trip in `make lab`, in headless Chromium: release to returned feedback.

One machine, one user who is instructor and learner (nbgrader's one-machine setup; the learner's
id is the OS user's name). A course like the repository's (its nbgrader_config.py puts the
exchange in ``.exchange/`` under the course id ``mini_llm``) holds ch01_bigrams' source; `make
lab COURSE=...` serves it on 127.0.0.1. In the browser, the instructor generates and releases
the assignment in formgrader's Manage Assignments; the learner fetches it from JupyterLab's
Assignment List (into the lab's root, the course folder), writes one function (saved through
Jupyter's contents API, as JupyterLab saves) and submits; the instructor collects, autogrades
the submission from Manage Submissions (through `mini-llm grade --student`), generates and
releases its feedback; the learner fetches the feedback. The gradebook gives the answered
part's points (read from the notebook's metadata), and the feedback page shows them.
test_exchange.py makes the same trip with nbgrader's commands. Screenshots go to
test-artifacts/screenshots/lab-exchange-*.png.
"""

from __future__ import annotations

import getpass
import json
import urllib.request

import nbformat
import pytest
from _exercise_helpers import (
    autograded_tests,
    cell_by_grade_id,
    manual_answers,
    new_course,
    notebook_path,
    part_test_cells,
    read,
)
from nbgrader.api import Gradebook
from test_browser import browser  # noqa: F401 (a fixture)
from test_exchange import ANSWER, ASSIGNMENT, COURSE_ID, PART, SOURCE, shown_scores
from test_lab import Tab, lab  # noqa: F401 (a fixture, which starts `make lab` in `course` below)

STUDENT = getpass.getuser()  # nbgrader's student id on one machine
POINTS = autograded_tests(SOURCE)
EARNED = set(part_test_cells(SOURCE, PART))
(WRITTEN,) = manual_answers(SOURCE).values()  # the written answer's points: left blank here
EXPECTED = {gid: (p if gid in EARNED else 0.0) for gid, p in POINTS.items()}
GRADE_MS = 900_000  # the hardened grader's run on a busy 2-core machine


@pytest.fixture(scope="module")
def course(tmp_path_factory, grader_path, bubblewrap):
    """A course with ch01_bigrams' source only; the lab started in it keeps nbgrader's learner
    cache (which lists submissions) and Jupyter's settings in the test's folder."""
    root = tmp_path_factory.mktemp("lab-exchange")
    folder = new_course(root / "course", [ASSIGNMENT])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_DATA_DIR", str(root / "jupyter-data"))
        patch.setenv("JUPYTER_CONFIG_DIR", str(root / "jupyter-config"))
        yield folder


def shot(tab: Tab, step: int, what: str) -> None:
    tab.shot(f"exchange-{step}-{what}")  # lab-exchange-<step>-<what>.png


def formgrader_click(tab: Tab, cell, endpoint: str, step: int, what: str) -> dict:
    """Click the link in a formgrader table cell, wait for its API call and success dialog
    (screenshot), close the dialog; the API's answer."""
    with tab.page.expect_response(
        lambda r: r.url.endswith(endpoint) and r.request.method == "POST", timeout=GRADE_MS
    ) as answered:
        cell.locator("a").click()
    assert answered.value.ok, (endpoint, answered.value.status)
    result = json.loads(answered.value.text())
    assert result.get("success"), (endpoint, result.get("log"), result.get("error"))
    tab.page.wait_for_selector("#success-modal")
    tab.page.wait_for_timeout(1000)  # the dialog fades in
    shot(tab, step, what)
    tab.page.click("#success-modal .modal-footer button")
    tab.page.wait_for_selector("#success-modal", state="detached")
    tab.page.wait_for_selector(".modal-backdrop", state="detached")
    return result


def assignment_row(tab: Tab):
    return tab.page.locator("#main-table tr", has_text=ASSIGNMENT)


def open_manage_assignments(tab: Tab, base: str, token: str):
    tab.page.goto(f"{base}/formgrader/manage_assignments?token={token}")
    tab.page.wait_for_selector(f"#main-table td.name:has-text('{ASSIGNMENT}')")
    return assignment_row(tab)


def learner_list(tab: Tab, name: str):
    """The Assignment List's row of ch01_bigrams under released, fetched or submitted."""
    return tab.page.locator(f"#{name}_assignments_list > .list_item", has_text=ASSIGNMENT)


def save_answer(base: str, token: str, path: str) -> None:
    """The learner's code in the part's answer cell, saved through Jupyter's contents API."""
    url = f"{base}/api/contents/{path}"
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as got:
        notebook = nbformat.from_dict(json.load(got)["content"])
    cell_by_grade_id(notebook, f"{PART}_impl").source = ANSWER
    body = json.dumps({"type": "notebook", "format": "json", "content": notebook}).encode()
    put = urllib.request.Request(url, data=body, headers=headers, method="PUT")
    with urllib.request.urlopen(put, timeout=60) as saved:
        assert saved.status == 200, saved.status


def gradebook_scores(course) -> tuple[dict[str, float], float, float]:
    """grade_id -> score of each autograded test cell of the learner's submission; the
    submission's score and maximum."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, STUDENT)
        cells = {g.name: g.score for g in notebook.grades if g.name in POINTS}
        return cells, notebook.score, notebook.max_score


def test_release_to_returned_feedback_in_the_lab(course, lab, browser):  # noqa: F811
    base, token = lab
    instructor, learner = Tab(browser, base), Tab(browser, base)
    try:
        # 1. instructor, formgrader's Manage Assignments: generate the release, then release it
        row = open_manage_assignments(instructor, base, token)
        if row.locator("td.release a").count() == 0:  # no release folder yet
            formgrader_click(
                instructor, row.locator("td.assign"), f"/{ASSIGNMENT}/assign", 1, "generated"
            )
            row.locator("td.release a").wait_for()
        formgrader_click(
            instructor, row.locator("td.release"), f"/{ASSIGNMENT}/release", 1, "released"
        )
        released = course / ".exchange" / COURSE_ID / "outbound" / ASSIGNMENT
        assert (released / f"{ASSIGNMENT}.ipynb").is_file()
        row.locator("td.status:has-text('released')").wait_for()
        shot(instructor, 1, "manage-assignments")

        # 2. learner, JupyterLab's Assignment List: fetch, answer one part, submit
        learner.open_assignment_list(token)
        learner.page.wait_for_selector(f"#course_list_default:has-text('{COURSE_ID}')")
        fetch = learner_list(learner, "released").locator(".item_status button")
        fetch.filter(has_text="Fetch").wait_for()
        shot(learner, 2, "released")
        with learner.page.expect_response(lambda r: "/assignments/fetch" in r.url) as answered:
            fetch.click()
        assert json.loads(answered.value.text()).get("success"), answered.value.text()
        fetched = learner_list(learner, "fetched")
        fetched.wait_for()
        shot(learner, 2, "fetched")
        mine = notebook_path(course, ASSIGNMENT)  # the lab's root is the course folder
        assert mine.read_bytes() == notebook_path(course / "exercises", ASSIGNMENT).read_bytes()

        save_answer(base, token, f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb")
        assert cell_by_grade_id(read(mine), f"{PART}_impl").source == ANSWER
        submit = fetched.locator(".item_status button", has_text="Submit").first
        with learner.page.expect_response(lambda r: "/assignments/submit" in r.url) as answered:
            submit.click()
        assert json.loads(answered.value.text()).get("success"), answered.value.text()
        learner_list(learner, "submitted").wait_for()
        shot(learner, 2, "submitted")

        # 3. instructor: collect; on Manage Submissions autograde, generate and release feedback
        row = open_manage_assignments(instructor, base, token)
        formgrader_click(
            instructor, row.locator("td.collect"), f"/{ASSIGNMENT}/collect", 3, "collected"
        )
        handed_in = notebook_path(course / "submitted" / STUDENT, ASSIGNMENT)
        assert cell_by_grade_id(read(handed_in), f"{PART}_impl").source == ANSWER

        instructor.page.goto(f"{base}/formgrader/manage_submissions/{ASSIGNMENT}")
        mine_row = instructor.page.locator(
            "#main-table tr", has=instructor.page.locator(f"td.student-id:text-is('{STUDENT}')")
        )
        mine_row.wait_for()
        graded = formgrader_click(
            instructor,
            mine_row.locator("td.autograde"),
            f"/submission/{ASSIGNMENT}/{STUDENT}/autograde",
            3,
            "autograded",
        )
        assert f"mini-llm grade {ASSIGNMENT} --student {STUDENT}" in graded["log"]
        cells, score, max_score = gradebook_scores(course)
        assert cells == EXPECTED
        assert (score, max_score) == (sum(EXPECTED.values()), sum(POINTS.values()) + WRITTEN)
        for action, what in (
            ("generate_feedback", "generate-feedback"),
            ("release_feedback", "release-feedback"),
        ):
            cell = mine_row.locator(f"td.{what}")
            cell.locator("a").wait_for()  # the row is drawn again after each action
            formgrader_click(instructor, cell, f"/{ASSIGNMENT}/{STUDENT}/{action}", 3, what)
        mine_row.locator("td.generate-feedback a").wait_for()  # drawn again
        assert mine_row.locator("td.score").inner_text() == f"{score:g} / {max_score:g}"
        shot(instructor, 3, "manage-submissions")

        # 4. learner: fetch the feedback, where nbgrader files it, with the scores
        learner.page.click("#refresh_assignments_list")
        submitted = learner_list(learner, "submitted")
        submitted.locator("text=(feedback available to fetch)").wait_for()
        shot(learner, 4, "feedback-available")
        fetch_feedback = submitted.locator(".item_status button", has_text="Fetch Feedback")
        with learner.page.expect_response(lambda r: "/assignments/fetch_feedback" in r.url):
            fetch_feedback.first.click()
        view = submitted.locator("a", has_text="(view feedback)")
        view.wait_for()
        shot(learner, 4, "feedback-fetched")
        view.click()  # JupyterLab's file browser goes to the feedback's folder
        learner.page.wait_for_selector(f".jp-DirListing-itemText:has-text('{ASSIGNMENT}.html')")
        shot(learner, 4, "feedback-folder")

        stamp = (course / "submitted" / STUDENT / ASSIGNMENT / "timestamp.txt").read_text()
        received = course / ASSIGNMENT / "feedback" / stamp / f"{ASSIGNMENT}.html"
        assert received.is_file(), f"no feedback where nbgrader files it: {received}"
        written = course / "feedback" / STUDENT / ASSIGNMENT / f"{ASSIGNMENT}.html"
        assert received.read_bytes() == written.read_bytes()
        points = {gid: (EXPECTED[gid], POINTS[gid]) for gid in POINTS}
        assert shown_scores(received.read_text()) == points
        learner.page.goto(received.as_uri())
        assert learner.typeset() > 0
        assert shown_scores(learner.page.content()) == points  # as the browser shows it
        total = f"{ASSIGNMENT}: {round(score, 2)} / {round(max_score, 2)}"  # as the template
        assert learner.page.inner_text("#total") == total
        shot(learner, 4, "feedback-page")
        learner.page.locator(f'a[name="{PART}_tests"]').scroll_into_view_if_needed()
        shot(learner, 4, "feedback-part-score")  # the answered part's test cell, its points
        assert not instructor.outside and not learner.outside, (
            instructor.outside,
            learner.outside,
        )
    finally:
        instructor.close()
        learner.close()
