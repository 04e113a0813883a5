"""Helpers shared by the book tests (not fixtures: they are needed when tests are collected)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
BOOK_DIR = REPO / "book"
BOOK_BUILD_DIR = BOOK_DIR / "_build"
BOOK_HTML_DIR = BOOK_BUILD_DIR / "html"
MATHJAX_JS = BOOK_DIR / "_mathjax" / "_static" / "mathjax" / "tex-chtml.js"
BOOK_BUILD_TIMEOUT_S = 1800  # 12 chapters x 90 s budget, with room to spare on a fresh cache


def venv_tool(name: str) -> Path:
    """A console script from the environment running the tests (the project's .venv)."""
    return Path(sys.executable).parent / name


def run_jupyter_book(
    book_dir: Path, timeout: float = BOOK_BUILD_TIMEOUT_S
) -> subprocess.CompletedProcess:
    """Build `book_dir` to HTML with the environment's jupyter-book; output merged in `.stdout`."""
    exe = venv_tool("jupyter-book")
    assert exe.exists(), f"{exe} not found: run `make book` (it installs jupyter-book into .venv)"
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    return subprocess.run(
        [str(exe), "build", str(book_dir), "--builder", "html"],
        cwd=book_dir.parent,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=timeout,
        check=False,  # callers assert on the exit status
    )


MYST_NOTEBOOK_HEADER = """\
---
jupytext:
  text_representation:
    format_name: myst
kernelspec: {name: python3, display_name: Python 3, language: python}
---
"""
"""Front matter that makes Jupyter Book execute a Markdown page as a notebook."""

CHAPTER_RE = re.compile(r"^ch(\d\d)_[a-z0-9_]+$")

sys.path.insert(0, str(BOOK_DIR / "_ext"))
import manifest  # book/_ext/manifest.py: the chapters of book/chapters.yml

_only_chapter: manifest.Chapter | None = None


def select_chapter(key: str) -> manifest.Chapter:
    """Restrict `selected_chapters` to one chapter (pytest --chapter, `make test CH=NN`)."""
    global _only_chapter
    _only_chapter = manifest.load().chapter(key)
    if not _only_chapter.ready:
        raise manifest.ManifestError(f"chapter {key} ({_only_chapter.page}) is not ready yet")
    return _only_chapter


def selected_chapters() -> list[manifest.Chapter]:
    """The ready chapters of book/chapters.yml, or only the one chosen with --chapter."""
    return [_only_chapter] if _only_chapter else manifest.load().ready()


def toc_docnames(toc_path: Path = BOOK_DIR / "_toc.yml") -> list[str]:
    """Every page of the book in reading order: the root, then each file the toc lists."""
    toc = yaml.safe_load(toc_path.read_text(encoding="utf-8"))
    names = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                names.append(str(Path(entry["file"]).with_suffix("")))
            for key in ("parts", "chapters", "sections"):
                walk(entry.get(key))

    walk(toc.get("parts"))
    walk(toc.get("chapters"))
    return names


def chapter_docnames() -> list[str]:
    """The pages of the ready chapters, in order (the toc lists the same: test_manifest.py)."""
    return [chapter.page for chapter in manifest.load().ready()]


def html_text(fragment: str) -> str:
    """The text a reader sees in an HTML fragment: tags dropped, entities decoded, and no-break
    spaces (which keep a number with its unit: book/_ext/unit_spaces.py) read as spaces."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).replace("\u00a0", " ").strip()


def read_page(built_book: Path, docname: str) -> tuple[str, str]:
    """A built page as (raw HTML, visible text without scripts and styles)."""
    raw = (built_book / f"{docname}.html").read_text(encoding="utf-8")
    return raw, html_text(re.sub(r"<(script|style)\b.*?</\1>", "", raw, flags=re.DOTALL))


def html_tables(raw: str) -> list[list[list[str]]]:
    """Every HTML table of a page as rows of cell texts (the header row first)."""
    return [
        [
            [html_text(cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.DOTALL)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, flags=re.DOTALL)
        ]
        for table in re.findall(r"<table[^>]*>(.*?)</table>", raw, flags=re.DOTALL)
    ]


def prose(text: str, pattern: str) -> tuple[str, ...]:
    """The groups of `pattern` in a page's visible text, for chapter tests that read back what
    the prose says: a space matches any run of whitespace, and NUM captures a number such as
    12 or 3.25 (without a sentence's closing full stop)."""
    pattern = pattern.replace(" ", r"\s+").replace("NUM", r"(\d+(?:\.\d+)?)")
    found = re.search(pattern, text, flags=re.DOTALL)
    assert found, f"the page no longer says: {pattern}"
    return found.groups()


def glued_values(built_book: Path, docname: str, *, in_prose: bool = True) -> dict[str, object]:
    """The values a page glued (``myst_nb.glue``), by key, as the build recorded them.

    With ``in_prose`` (the default) each one is checked to appear, as ``str`` shows it, in the
    page's prose, so a test of the value tests the rendered text. Pages whose prose formats
    the values (``{glue:text}`key:.2f```) check each with :func:`shown` instead, and a test
    that reads another page's values needs the record only: ``in_prose=False``."""
    import ast
    import json

    record = built_book.parent / "jupyter_execute" / f"{docname}.glue.json"
    outputs = json.loads(record.read_text(encoding="utf-8"))
    values = {key: ast.literal_eval(out["data"]["text/plain"]) for key, out in outputs.items()}
    if not in_prose:
        return values
    raw = (built_book / f"{docname}.html").read_text(encoding="utf-8")
    pasted = {html_text(span) for span in re.findall(r'class="pasted-text">(.*?)</span>', raw)}
    for key, value in values.items():
        assert str(value) in pasted, f"{docname}: glued {key}={value!r} is not in the prose"
    return values


def shown(page: tuple[str, str], glued: dict[str, object], name: str, spec: str = ""):
    """The glued value ``name``, after checking that the page's text (``read_page``'s second
    item) shows it formatted with ``spec``."""
    _, text = page
    value = glued[name]
    assert format(value, spec) in text, f"{name} = {format(value, spec)} not on the page"
    return value


def page_fixture(docname: str):
    """A module fixture of a chapter's page test: ``page = page_fixture("ch05_rnn")`` gives its
    tests ``page``, the built page as ``read_page`` returns it."""
    import pytest

    @pytest.fixture(scope="module")
    def page(built_book):
        """The built page as (raw HTML, visible text): ``read_page``."""
        return read_page(built_book, docname)

    return page


def glued_fixture(docname: str, *, in_prose: bool = True):
    """A module fixture of a chapter's page test: ``glued = glued_fixture("ch05_rnn")`` gives its
    tests ``glued``, the page's glued values as ``glued_values`` returns them."""
    import pytest

    @pytest.fixture(scope="module")
    def glued(built_book):
        """The page's glued values by key: ``glued_values``."""
        return glued_values(built_book, docname, in_prose=in_prose)

    return glued


def check_figures(
    raw: str,
    *names: str,
    at_least: int,
    why: str | None = None,
    built_book: Path | None = None,
    referred: bool = False,
    math: int = 0,
) -> None:
    """A page's figures: ``at_least`` PNG images (``why``: which ones), each file over 10 kB
    when ``built_book`` is given, a figure for each id of ``names`` (``referred``: each
    referred to by a link, too), and ``math`` pieces of math left for MathJax."""
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', raw)
    assert len(images) >= at_least, why
    for src in images if built_book is not None else ():
        assert (built_book / src).stat().st_size > 10_000, f"{src} looks empty"
    for name in names:
        assert f'id="{name}"' in raw, f"figure {name} missing"
        if referred:
            assert f'href="#{name}"' in raw, f"figure {name} is never referred to"
    assert raw.count('class="math') >= math
