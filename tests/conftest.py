"""Shared pytest fixtures. Keep each group of fixtures under its own heading."""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

import pytest
from _book_helpers import BOOK_BUILD_DIR, BOOK_DIR, BOOK_HTML_DIR, MATHJAX_JS, run_jupyter_book

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# The book (owner: book infrastructure; used by test_book.py, test_browser.py, test_chapterNN.py)
#
#   built_book  -> Path of book/_build/html, after a successful `jupyter-book build book`
#   book_build  -> the finished build: CompletedProcess-like object with returncode and output
#
# The build is the same as `make book`: Jupyter Book with jupyter-cache, so after a `make book`
# (or an earlier test session) only chapters whose code changed are executed again.
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


# --------------------------------------------------------------------------- end of book group
