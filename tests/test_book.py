"""The Jupyter Book builds, executes every chapter without error, and needs no network to read."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from _book_helpers import (
    CHAPTER_RE,
    MYST_NOTEBOOK_HEADER,
    REPO,
    chapter_docnames,
    glued_values,
    run_jupyter_book,
    selected_chapters,
    toc_docnames,
)
from bs4 import BeautifulSoup

PAGES = toc_docnames()
CHAPTERS = chapter_docnames()

# The chapters of the course plan (DESIGN.md), by number: a word each title must contain.
PLANNED_CHAPTERS = {
    1: "bigram",
    2: "n-gram",
    3: "neural language model",
    4: "embedding",
    5: "recurrent",
    6: "lstm",
    7: "attention",
    8: "self-attention",
    9: "transformer",
    10: "tokeniz",
    11: "gpt",
    12: "gpu",
    13: "vision transformer",
    14: "adapting the gpt",
}

# A URL that leaves the machine: http://, https:// or protocol-relative //host.
OUTSIDE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])([^'")\s]+)""", re.IGNORECASE)
# Attributes through which a page loads something when it is opened (links in <a> are not loads).
LOADING_ATTRS = {
    "script": ["src"],
    "link": ["href"],
    "img": ["src", "srcset"],
    "source": ["src", "srcset"],
    "iframe": ["src"],
    "frame": ["src"],
    "embed": ["src"],
    "object": ["data"],
    "video": ["src", "poster"],
    "audio": ["src"],
    "track": ["src"],
    "input": ["src"],
    "image": ["href", "xlink:href"],
    "use": ["href", "xlink:href"],
}


def page(built_book: Path, docname: str) -> BeautifulSoup:
    path = built_book / f"{docname}.html"
    assert path.exists(), f"{docname} is in _toc.yml but the build wrote no {path.name}"
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def article(soup: BeautifulSoup):
    main = soup.select_one("article.bd-article") or soup.select_one("main")
    assert main is not None, "page has no <article>/<main> content"
    return main


def test_book_builds(book_build, request):
    assert book_build.returncode == 0, book_build.stdout[-6000:]
    assert "build succeeded" in book_build.stdout
    # the build is timed out by the chapters' budgets, not by pyproject's 900 s for any test
    budgets = sum(chapter.budget_s for chapter in selected_chapters())
    assert request.node.get_closest_marker("timeout").args[0] >= 2 * budgets


def test_toc_has_chapters():
    assert PAGES[0] == "intro"
    assert CHAPTERS and CHAPTERS[0] == "ch01_bigrams"
    numbered = [c for c in CHAPTERS if CHAPTER_RE.match(Path(c).name)]
    numbers = [int(CHAPTER_RE.match(Path(c).name).group(1)) for c in numbered]
    assert numbers == sorted(numbers), f"chapters out of order in _toc.yml: {CHAPTERS}"


@pytest.mark.parametrize("docname", PAGES)
def test_toc_page_built_and_in_navigation(built_book, docname):
    soup = page(built_book, docname)
    title = article(soup).find("h1")
    assert title is not None and title.get_text(strip=True), f"{docname}.html has no title"
    nav = page(built_book, "intro").select_one("nav.bd-links") or page(built_book, "intro")
    hrefs = {a.get("href", "").split("#")[0] for a in nav.find_all("a")}
    if docname != "intro":
        assert f"{docname}.html" in hrefs, f"{docname} is missing from the book's navigation"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_executed_without_errors(built_book, docname):
    body = article(page(built_book, docname))
    outputs = body.select("div.cell_output")
    assert outputs, f"{docname}: no cell outputs, so its code was not executed at build time"
    errors = body.select(".cell_output .traceback, .cell_output .output.error")
    assert not errors, f"{docname}: error output in the page:\n{errors[0].get_text()[:2000]}"
    text = body.get_text()
    assert "Traceback (most recent call last)" not in text, f"{docname}: a traceback is shown"
    report = built_book / "reports" / f"{docname}.err.log"
    assert not report.exists(), (
        f"{docname}: execution report {report}:\n{report.read_text()[:2000]}"
    )


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_math_ready_for_mathjax(built_book, docname):
    soup = page(built_book, docname)
    body = article(soup)
    maths = body.select(".math")
    assert maths, f"{docname}: no math in the page (every chapter writes its math in LaTeX)"
    for node in maths:
        tex = node.get_text()
        assert re.search(r"\\\(|\\\[|\\begin\{", tex), (
            f"{docname}: math not delimited for MathJax: {tex!r}"
        )
    for node in maths:
        node.decompose()
    assert "$$" not in body.get_text(), f"{docname}: a $$ block was left unparsed"
    assert_local_mathjax(built_book, soup, docname)


def assert_local_mathjax(built_book: Path, soup: BeautifulSoup, docname: str) -> None:
    srcs = [s["src"] for s in soup.find_all("script", src=True) if "mathjax" in s["src"].lower()]
    assert srcs, f"{docname}: no MathJax script on the page"
    for src in srcs:
        assert not OUTSIDE.match(src), f"{docname}: MathJax loaded from outside: {src}"
        local = built_book / src.split("?")[0]
        assert local.is_file(), f"{docname}: MathJax script {src} is not in the build ({local})"
    fonts = built_book / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2"
    assert len(list(fonts.glob("*.woff"))) >= 10, f"MathJax fonts missing from {fonts}"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_links_its_exercise_notebook(built_book, docname):
    body = article(page(built_book, docname))
    name = Path(docname).name
    links = [
        a["href"] for a in body.select("a.download[href]") if a["href"].endswith(f"/{name}.ipynb")
    ]
    assert links, (
        f"{docname}: no download link to its exercise notebook; add "
        f"{{download}}`{name}.ipynb <../exercises/{name}/{name}.ipynb>` (see CONTRIBUTING.md)"
    )
    for href in links:
        assert (built_book / href).is_file(), f"{docname}: {href} was not copied into the build"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_links_its_exercise_from_the_top(built_book, docname):
    """Near the top, in the learning goals, not only at the end: the notebook, the learner's
    copy, and a link to the exercise's section."""
    body = article(page(built_book, docname))
    name = Path(docname).name
    goals = next(
        box for box in body.select("div.admonition") if "Learning goals" in box.get_text(" ")
    )
    downloads = [a["href"] for a in goals.select("a.download[href]")]
    assert any(href.endswith(f"/{name}.ipynb") for href in downloads), docname
    assert f"my_exercises/{name}/{name}.ipynb" in goals.get_text(" "), docname
    sections = []
    for link in goals.select("a.reference.internal[href*='#']"):
        target = body.find(id=link["href"].partition("#")[2])
        if target is not None and target.name == "span":  # a label: its section holds it
            target = target.parent
        if target is not None and target.find(["h2", "h3"]) is not None:
            sections.append(target.find(["h2", "h3"]).get_text(" ", strip=True))
    assert any("Exercise" in heading for heading in sections), (docname, sections)


@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_has_goals_figures_and_summary(built_book, docname):
    """DESIGN.md: learning goals at the top, at least one figure, a closing summary."""
    body = article(page(built_book, docname))
    headings = [h.get_text(" ", strip=True) for h in body.select("h2, h3")]
    assert "Learning goals" in body.get_text(" "), f"{docname}: no learning goals"
    assert any("Summary" in h for h in headings), f"{docname}: no Summary section"
    images = [img["src"] for img in body.select("img[src]") if img["src"].endswith(".png")]
    assert images, f"{docname}: no figure"
    for src in images:
        assert (built_book / src).stat().st_size > 10_000, f"{docname}: {src} looks empty"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_token_names_in_prose_are_not_read_as_html(built_book, docname):
    """A bare <s> in Markdown (a caption, a sentence) becomes an HTML strike-through that runs to
    the end of the page; token names belong in backticks."""
    struck = article(page(built_book, docname)).select("s, strike")
    assert not struck, f"{docname}: struck-through text from a raw tag: {struck[0].get_text()[:80]}"


# Glued text that is data the code produced, shown as it is, not a claim about it: a sample of
# a model, an example drawn from a corpus, how a model read a sentence, the machine of a run.
GLUED_DATA = {
    "ch01_shortest_sample",
    "ch01_longest_sample",
    "ch02_unseen_bigram_examples",
    "ch07_example_read",
    "ch11_record_machine",
    "ch12_gpu_torch",  # versions and the peak's source, from the recorded results file
    "ch12_built_torch",
    "ch12_gpu_peak_source",
    "ch12_top_kind",  # the profiler's largest category of work
}
# Units and symbols a glued number may carry ("12 MiB", "3.8 × 10⁻¹⁰", "0.59 to 0.63").
NOT_WORDS = r"\b(?:to|MiB|GiB|KiB|ms|µs|s|min|nats|bits)\b"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_prose_glues_measurements_and_never_a_sentence_chosen_in_python(built_book, docname):
    """A claim is written once in the prose and asserted in the page's code, so the build fails
    when the measurement stops supporting it; a verdict picked by `if` and glued into the text
    would change the book's words unseen."""
    values = glued_values(built_book, docname, in_prose=False)
    words = {
        key: value
        for key, value in values.items()
        if isinstance(value, str)
        and key not in GLUED_DATA
        and re.search(r"[A-Za-z]{2,}", re.sub(NOT_WORDS, "", value))
    }
    assert not words, f"{docname} glues words into its prose: {words}"


@pytest.mark.parametrize("docname", CHAPTERS)
def test_a_number_and_its_unit_stay_on_one_line(built_book, docname):
    """The prose writes "83 %" and "10 s"; a breakable space there lets a line end at the number
    (see book/_ext/unit_spaces.py). Code, and a diagram's source (an SVG's fallback text),
    keep their own spaces."""
    body = article(page(built_book, docname))
    for code in body.select("pre, code, script, style, object"):
        code.decompose()
    unit = r"(?:%|×|±|(?:ms|µs|s|M|GB|MiB)(?![\w/]))"
    breakable = re.findall(rf".{{0,30}}(?:\d[^\S\u00a0]{unit}|[^\S\u00a0]%)", body.get_text())
    assert not breakable, f"{docname}: a line may break before a unit in: {breakable[:3]}"


def test_intro_lists_every_planned_chapter(built_book):
    soup = page(built_book, "intro")
    table = article(soup).find("table")
    assert table is not None, "intro has no table of chapters"
    rows = [tr.find_all("td") for tr in table.select("tbody tr")]
    # an unnumbered bridge chapter's row is labelled by its part instead of a number
    rows = [cells for cells in rows if cells[0].get_text(strip=True).isdigit()]
    planned = len(PLANNED_CHAPTERS)
    assert len(rows) == planned, f"intro table has {len(rows)} chapters, the plan has {planned}"
    in_toc = {int(m.group(1)): c for c in CHAPTERS if (m := CHAPTER_RE.match(Path(c).name))}
    for number, cells in enumerate(rows, start=1):
        assert cells[0].get_text(strip=True) == str(number)
        title = cells[1].get_text(" ", strip=True).lower()
        assert PLANNED_CHAPTERS[number] in title, f"row {number}: {title!r}"
        status = cells[-1].get_text(strip=True).lower()
        link = cells[1].find("a")
        if number in in_toc:
            assert (
                link is not None and link.get("href", "").split("#")[0] == f"{in_toc[number]}.html"
            ), f"intro: chapter {number} is in the toc but its row does not link to it"
            assert status != "coming", f"intro: chapter {number} is written but marked coming"
        else:
            assert link is None and status == "coming", (
                f"intro: chapter {number} is not in the toc yet, so its row must say 'coming'"
            )


def test_the_book_carries_the_course_it_was_built_from(built_book):
    """The intro and the exercises guide link to an archive of the repository's tracked files,
    each as it was when the book was built, under one folder."""
    import subprocess
    import tarfile

    import course_archive

    for docname in ("intro", "exercises"):
        links = [a["href"] for a in article(page(built_book, docname)).find_all("a", href=True)]
        assert course_archive.ARCHIVE in links, f"{docname} does not link to the archive"
    if (REPO / ".git").exists():
        tracked = subprocess.run(
            ["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True, text=True
        ).stdout.split("\0")
    else:  # a course unpacked from the archive: the files it listed
        tracked = (REPO / course_archive.LISTING).read_text().splitlines()
    tracked = sorted(name for name in tracked if name and (REPO / name).is_file())
    folder = course_archive.FOLDER
    with tarfile.open(built_book / course_archive.ARCHIVE) as archive:
        names = archive.getnames()
        listing = archive.extractfile(f"{folder}/{course_archive.LISTING}").read().decode()
        makefile = archive.extractfile(f"{folder}/Makefile").read()
    assert sorted(names) == sorted([f"{folder}/{n}" for n in tracked + [course_archive.LISTING]])
    assert listing.splitlines() == tracked
    assert makefile == (REPO / "Makefile").read_bytes()
    assert f"{folder}/book/_build/html/intro.html" not in names  # no build output, no .venv


def test_intro_explains_setup_exercises_and_grading(built_book):
    text = " ".join(article(page(built_book, "intro")).get_text().split())
    for phrase in [
        "make book",
        "make test",
        "make setup",
        "make lab",
        "download.pytorch.org/whl/cpu",
        "mini_llm-course.tar.gz",
        ".venv/bin/jupyter lab",
        "mini-llm learner start",
        "my_exercises/ch01_bigrams/ch01_bigrams.ipynb",
        "YOUR CODE HERE",
        "submitted/<student>/<assignment>/",
        "make grade ASSIGNMENT=ch01_bigrams",
        "gradebook.db",
    ]:
        assert phrase in text, f"intro does not mention {phrase!r}"


def outside_loads(html: str) -> list[str]:
    """Everything a page would fetch from another host when opened."""
    soup = BeautifulSoup(html, "html.parser")
    found = []
    for tag, attrs in LOADING_ATTRS.items():
        for node in soup.find_all(tag):
            for attr in attrs:
                for url in re.split(r",\s*", node.get(attr) or ""):
                    if url and OUTSIDE.match(url.split()[0]):
                        found.append(f"<{tag} {attr}={url}>")
    for node in soup.find_all(style=True):
        found += [f"style url({u})" for u in CSS_URL.findall(node["style"]) if OUTSIDE.match(u)]
    for node in soup.find_all("style"):
        found += [f"<style> {u}" for u in CSS_URL.findall(node.get_text()) if OUTSIDE.match(u)]
    for node in soup.find_all("meta", attrs={"http-equiv": re.compile("refresh", re.IGNORECASE)}):
        target = (node.get("content") or "").partition("url=")[2]
        if OUTSIDE.match(target):
            found.append(f"<meta refresh {target}>")
    return found


def test_outside_loads_detector():
    """The scanner below would notice the kinds of reference it is meant to catch."""
    html = (
        '<link rel="stylesheet" href="https://cdn.example/x.css">'
        '<script src="//cdn.example/x.js"></script><img src="http://x.example/a.png">'
        '<div style="background: url(https://x.example/b.png)"></div>'
        '<a href="https://example.org">a link in prose is fine</a><script src="_static/ok.js"></script>'
    )
    assert len(outside_loads(html)) == 4


def test_pages_load_nothing_from_outside(built_book):
    pages = sorted(built_book.glob("*.html"))
    assert len(pages) >= len(PAGES)
    problems = {p.name: outside_loads(p.read_text(encoding="utf-8")) for p in pages}
    problems = {name: found for name, found in problems.items() if found}
    assert not problems, f"pages load resources from other hosts: {problems}"


def test_stylesheets_load_nothing_from_outside(built_book):
    sheets = [p for p in (built_book / "_static").rglob("*.css") if "mathjax" not in p.parts]
    assert sheets
    problems = []
    for sheet in sheets:
        css = re.sub(
            r"/\*.*?\*/", "", sheet.read_text(encoding="utf-8", errors="replace"), flags=re.DOTALL
        )
        problems += [f"{sheet.name}: {u}" for u in CSS_URL.findall(css) if OUTSIDE.match(u)]
    assert not problems, f"stylesheets load from other hosts: {problems}"


@pytest.mark.parametrize("docname", PAGES)
def test_internal_links_resolve(built_book, docname):
    """Every link and resource inside the book points at a file the build wrote."""
    soup = page(built_book, docname)
    missing = []
    for node in soup.find_all(["a", "link", "script", "img"]):
        target = node.get("href") or node.get("src")
        if (
            not target
            or OUTSIDE.match(target)
            or re.match(r"^(#|mailto:|data:|javascript:)", target)
        ):
            continue
        path = unquote(urlsplit(target).path)
        if path and not (built_book / path).exists():
            missing.append(target)
    assert not missing, f"{docname}: links to files that are not in the build: {missing}"


@pytest.mark.parametrize("docname", PAGES)
def test_no_duplicate_scripts(built_book, docname):
    soup = page(built_book, docname)
    scripts = [s.get("src") or s.get_text().strip() for s in soup.find_all("script")]
    scripts = [s for s in scripts if s]
    duplicates = sorted({s[:80] for s in scripts if scripts.count(s) > 1})
    assert not duplicates, f"{docname}: scripts included twice: {duplicates}"
    declared = len(re.findall(r"const THEBE_JS_URL\b", str(soup)))
    assert declared <= 1, f"{docname}: THEBE_JS_URL declared {declared} times"


@pytest.mark.parametrize("docname", PAGES)
def test_page_has_a_local_favicon(built_book, docname):
    """Without <link rel="icon">, browsers ask the server for /favicon.ico and get a 404."""
    icons = page(built_book, docname).select('link[rel~="icon"][href]')
    assert icons, f"{docname}: no favicon declared"
    for icon in icons:
        assert not OUTSIDE.match(icon["href"]), f"{docname}: favicon from outside: {icon['href']}"
        assert (built_book / icon["href"].split("?")[0]).is_file(), (
            f"{docname}: {icon['href']} missing"
        )


@pytest.mark.parametrize("docname", PAGES)
def test_pages_with_math_use_local_mathjax(built_book, docname):
    soup = page(built_book, docname)
    if article(soup).select(".math"):
        assert_local_mathjax(built_book, soup, docname)


ERROR_PAGE = (
    MYST_NOTEBOOK_HEADER
    + """

# A page with code

```{code-cell} ipython3
print("this cell runs")
```
"""
)


def test_cell_error_fails_the_build(throwaway_book):
    """With the book's own configuration, an exception in any cell makes the build exit non-zero."""
    book = throwaway_book({"page": ERROR_PAGE})

    good = run_jupyter_book(book, timeout=300)
    assert good.returncode == 0, f"the control build failed:\n{good.stdout[-4000:]}"
    assert "this cell runs" in (book / "_build" / "html" / "page.html").read_text()

    (book / "page.md").write_text(
        ERROR_PAGE + '\n```{code-cell} ipython3\nraise ValueError("deliberate failure")\n```\n'
    )
    bad = run_jupyter_book(book, timeout=300)
    assert bad.returncode != 0, f"a cell raised but the build exited 0:\n{bad.stdout[-4000:]}"
    assert "deliberate failure" in bad.stdout
