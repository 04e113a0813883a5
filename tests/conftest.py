"""Shared pytest fixtures. Keep each group of fixtures under its own heading."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest
from _book_helpers import (
    BOOK_BUILD_DIR,
    BOOK_DIR,
    BOOK_HTML_DIR,
    MATHJAX_JS,
    manifest,
    run_jupyter_book,
    select_chapter,
    selected_chapters,
)

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# Markers from what a test uses, and one chapter at a time (owner: test infrastructure)
#
# A test that uses one of these fixtures, directly or through other fixtures, gets its markers,
# so `-m "not slow"` (make check) leaves out every book build, grader run and browser:
# ---------------------------------------------------------------------------------------------

MARKERS_BY_FIXTURE = {
    "book_build": ("book", "slow"),  # built_book uses it
    "throwaway_book": ("book", "slow"),
    "grader_path": ("grading", "slow"),  # every test that runs nbgrader or `mini-llm grade`
    "browser": ("browser", "slow"),
    "trained_run": ("slow",),  # test_cli.py: prepares a corpus and trains through the CLI
}
# Other tests that take long without such a fixture (training to a target, torch.compile)
# carry @pytest.mark.slow themselves.


def pytest_addoption(parser):
    parser.addoption(
        "--chapter",
        metavar="NN",
        help="run one chapter's tests only: its page, exercise, hidden-test, autograde and bug "
        "tests (a number or a page name from book/chapters.yml); `make test CH=NN`",
    )


def pytest_configure(config):
    if config.getoption("--chapter"):
        select_chapter(config.getoption("--chapter"))


def _about_chapter(item, chapter) -> bool:
    """The test is in the chapter's page test file or takes its page or assignment as a
    parameter (test_book, test_browser, the exercise and grading tests)."""
    if item.path.name == chapter.page_test:
        return True
    params = getattr(item, "callspec", None)
    return params is not None and bool(
        {chapter.page, chapter.assignment}
        & {v for v in params.params.values() if isinstance(v, str)}
    )


BOOK_TEST_FILES = {"test_book.py", "test_browser.py"} | {
    chapter.page_test for chapter in manifest.load().chapters
}
"""the files whose tests use the built book: `make test`'s workers run them all on one worker"""


TESTS_ON_THEIR_OWN = {"test_grading_assignments.py"}
"""files of long tests that share no fixture: each test is a unit of work of its own, so that
the two workers finish together"""


def xdist_scope(nodeid: str) -> str:
    """The unit of work a test belongs to under `pytest -n 2` (`make test`): every test of the
    built book in one unit, so that one worker builds the book while the other runs the rest
    (the grading runs, the other long chain); any other test with the rest of its file, whose
    module-scoped fixtures are then made once, unless its file is in TESTS_ON_THEIR_OWN."""
    file = nodeid.split("::")[0]
    if Path(file).name in BOOK_TEST_FILES:
        return "book"
    return nodeid if Path(file).name in TESTS_ON_THEIR_OWN else file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByScope(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return ByScope(config, log)


def book_build_timeout() -> float:
    """Seconds the test that builds the book may take, its fixture included: twice what the
    chapters' execution budgets add up to (a cold build executes every chapter, and the other
    worker's grading runs share the two cores), plus ten minutes for the rest of the build.
    pyproject's 900 s for any test was less than the budgets' sum."""
    return 2 * sum(chapter.budget_s for chapter in selected_chapters()) + 600


def pytest_collection_modifyitems(config, items):
    for item in items:
        for fixture, markers in MARKERS_BY_FIXTURE.items():
            if fixture in item.fixturenames:
                for marker in markers:
                    item.add_marker(marker)
        if "book_build" in item.fixturenames:
            item.add_marker(pytest.mark.timeout(book_build_timeout()))
        if "book_build" in item.fixturenames and xdist_scope(item.nodeid) != "book":
            raise pytest.UsageError(
                f"{item.nodeid} uses the built book: name its file to match BOOK_TEST_FILES "
                "in tests/conftest.py, or under `make test` a second worker waits for the book "
                "and builds it again"
            )
    if config.getoption("--chapter"):
        chapter = selected_chapters()[0]
        keep = [item for item in items if _about_chapter(item, chapter)]
        config.hook.pytest_deselected(items=[item for item in items if item not in keep])
        items[:] = keep


# ---------------------------------------------------------------------------------------------
# Tools from the system (owner: test infrastructure; used by the grading tests, test_lab.py and
# test_browser.py)
#
#   bubblewrap -> the grader's OS sandbox (mini_llm.grading.jail), for a test that grades
#                 untrusted code: `mini-llm grade` without --trusted-cohort, verify()
#   chromium   -> the path of Debian's Chromium ($CHROMIUM, /usr/bin/chromium)
#   sync_playwright -> playwright's sync_playwright, with Chromium there to drive
#
# Where a tool is missing, the tests that need it are skipped with the reason and the command
# that installs it; in CI (CI=true, set by .ci/run) they fail instead, since CI skips no test.
# ---------------------------------------------------------------------------------------------

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def unavailable(reason: str) -> NoReturn:
    """Skip the test that needs what is missing, saying why; with CI=true, fail it instead."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true and this test cannot run: {reason}", pytrace=False)
    pytest.skip(reason)


def require_bubblewrap():
    """The grader's sandbox (a ``jail.Jail``), or ``unavailable`` when it cannot be made."""
    from mini_llm.grading import jail

    if shutil.which("bwrap") is None:
        unavailable("bubblewrap is not installed: apt-get install bubblewrap")
    try:
        return jail.check(trusted_cohort=False)
    except jail.SandboxUnavailable as err:
        unavailable(f"bubblewrap cannot make a sandbox here: {err}")


def require_chromium() -> str:
    """The Chromium to drive (``CHROMIUM``), or ``unavailable`` when there is none."""
    if not (os.path.isfile(CHROMIUM) or shutil.which(CHROMIUM)):
        unavailable(f"no Chromium at {CHROMIUM}: apt-get install chromium (or set CHROMIUM=...)")
    return CHROMIUM


@pytest.fixture(scope="session")
def bubblewrap():
    return require_bubblewrap()


@pytest.fixture(scope="session")
def chromium() -> str:
    return require_chromium()


@pytest.fixture(scope="module")
def sync_playwright(chromium):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover
        unavailable("the playwright package is not installed (pip install playwright)")
    return sync_playwright


# ---------------------------------------------------------------------------------------------
# The grader (owner: grading; used by test_autograde.py, test_exercises_sync.py,
# test_grading_assignments.py, test_grading_hostile.py)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def grader_path():
    """The environment's bin directory, put first on PATH for the module and restored after:
    nbgrader's gradebook runs the `alembic` command it finds on PATH."""
    bin_dir = Path(sys.executable).parent
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        yield bin_dir


# ---------------------------------------------------------------------------------------------
# The book (owner: book infrastructure; used by test_book.py, test_browser.py, test_chapterNN.py)
#
#   built_book  -> Path of book/_build/html, after a successful `jupyter-book build book`
#   book_build  -> the finished build: CompletedProcess-like object with returncode and output
#   throwaway_book -> makes a small book with the course's configuration, for tests of the build
#
# The build is the same as `make book`: Jupyter Book with jupyter-cache, so after a `make book`
# (or an earlier test session) only chapters whose code or imported mini_llm modules changed
# are executed again.
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def book_build() -> subprocess.CompletedProcess:
    """Build book/ once per session (cached execution), holding a lock against parallel runs."""
    if not MATHJAX_JS.exists():
        # `make book` / `make test` fetch it; try once here so a bare `pytest` works too.
        subprocess.run(
            ["bash", str(BOOK_DIR / "fetch_mathjax.sh"), str(MATHJAX_JS.parent)],
            cwd=REPO,
            check=False,
        )
    BOOK_BUILD_DIR.mkdir(parents=True, exist_ok=True)
    with open(BOOK_BUILD_DIR / ".build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return run_jupyter_book(BOOK_DIR)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def built_book(book_build: subprocess.CompletedProcess) -> Path:
    """Path of the built HTML (book/_build/html); fails if the build did not exit 0."""
    if book_build.returncode != 0:
        pytest.fail(
            f"`jupyter-book build book` exited {book_build.returncode}; end of its log:\n"
            + book_build.stdout[-6000:],
            pytrace=False,
        )
    assert (BOOK_HTML_DIR / "intro.html").exists(), "the build exited 0 but wrote no intro.html"
    return BOOK_HTML_DIR


@pytest.fixture
def throwaway_book(tmp_path):
    """Make a book under ``tmp_path`` with the course's configuration and extensions, from
    ``{docname: MyST text}`` (the first page is the root); returns the book's folder."""

    def make(pages: dict[str, str]) -> Path:
        book = tmp_path / "book"
        book.mkdir()
        shutil.copy(BOOK_DIR / "_config.yml", book / "_config.yml")
        shutil.copytree(
            BOOK_DIR / "_ext", book / "_ext", ignore=shutil.ignore_patterns("__pycache__")
        )
        root, *others = pages
        toc = ["format: jb-book", f"root: {root}"]
        toc += ["chapters:", *(f"  - file: {name}" for name in others)] if others else []
        (book / "_toc.yml").write_text("\n".join(toc) + "\n")
        for name, text in pages.items():
            (book / f"{name}.md").write_text(text)
        return book

    return make


# --------------------------------------------------------------------------- end of book group
