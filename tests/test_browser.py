"""The rendered book in a real browser: headless Chromium, pages served from 127.0.0.1 only.

Each page must load with no failed request, no request to another host, no console error, math
typeset by the book's own MathJax and every figure displayed. Screenshots of every page visited
go to test-artifacts/screenshots/ for a human to look at.
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path
from urllib.parse import urlparse

import conftest
import pytest
from _book_helpers import REPO, chapter_docnames, manifest, toc_docnames

try:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # reported by the sync_playwright fixture (conftest.py)
    PlaywrightTimeout = TimeoutError

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
PAGES = toc_docnames()
CHAPTERS = chapter_docnames()
FIRST_CHAPTER = CHAPTERS[0]


class _RecordingHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files quietly and records every error response, including requests the browser
    makes on its own (such as /favicon.ico) that never reach the page's network events."""

    errors: list[str]

    def log_request(self, code="-", size="-"):
        if str(code).isdigit() and int(code) >= 400:
            self.errors.append(f"{code} {self.path}")

    def log_message(self, format, *args):
        pass


class Server:
    def __init__(self, root: Path):
        self.errors: list[str] = []
        handler = type("Handler", (_RecordingHandler,), {"errors": self.errors})
        self.httpd = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
        )
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def __truediv__(self, page: str) -> str:
        return f"{self.url}/{page}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server(built_book):
    """book/_build/html served on 127.0.0.1 at a free port; `server / "intro.html"` is a URL."""
    srv = Server(built_book)
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def browser(sync_playwright, chromium):
    """Headless Chromium (conftest.py's ``chromium`` and ``sync_playwright`` fixtures skip, or in
    CI fail, the tests where it or playwright is missing)."""
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


class Visit:
    """A browser tab that records every problem a page could have while loading."""

    def __init__(self, browser, server: Server):
        self.server = server
        self.context = browser.new_context(viewport={"width": 1280, "height": 900})
        self.outside, self.failed, self.bad_status, self.console_errors = [], [], [], []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("requestfailed", lambda r: self.failed.append(f"{r.url} ({r.failure})"))
        self.page.on("response", self._response)
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.console_errors.append(f"uncaught: {e}"))

    def _route(self, route):
        url = urlparse(route.request.url)
        if url.scheme in ("data", "blob", "about") or url.hostname == "127.0.0.1":
            route.continue_()
        else:
            self.outside.append(route.request.url)
            route.abort()

    def _response(self, response):
        if response.status >= 400:
            self.bad_status.append(f"{response.status} {response.url}")

    def _console(self, message):
        if message.type == "error":
            self.console_errors.append(f"{message.text} @ {message.location}")

    def open(self, url: str):
        self.page.goto(url, wait_until="load")
        self.settle()

    def settle(self):
        """Wait until the page has loaded, MathJax has typeset, and the network is idle."""
        self.page.wait_for_load_state("load")
        # Sphinx adds MathJax only to pages that have math.
        try:
            self.page.wait_for_function(
                """() => !document.querySelector('script[src*="mathjax"]')
                         || (window.MathJax && MathJax.startup && MathJax.startup.promise)""",
                timeout=20_000,
            )
        except PlaywrightTimeout:
            raise AssertionError(
                f"{self.page.url}: MathJax never started; outside requests {self.outside}, "
                f"failed {self.failed}, HTTP errors {self.bad_status}, console {self.console_errors}"
            ) from None
        self.page.evaluate("() => window.MathJax ? MathJax.startup.promise.then(() => true) : true")
        self.page.wait_for_load_state("networkidle")

    def screenshot(self, name: str) -> Path:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        # Grow the viewport to the whole page first and let the layout settle: a plain
        # full_page capture catches the sticky sidebars half-way through re-laying out.
        size = self.page.viewport_size
        height = self.page.evaluate("document.documentElement.scrollHeight")
        self.page.set_viewport_size({"width": size["width"], "height": min(height, 16_000)})
        self.page.wait_for_timeout(300)
        self.page.screenshot(path=str(path), full_page=True)
        self.page.set_viewport_size(size)
        return path

    def assert_clean(self):
        where = self.page.url
        assert not self.outside, f"{where}: requests to other hosts: {self.outside}"
        assert not self.failed, f"{where}: failed requests: {self.failed}"
        assert not self.bad_status, f"{where}: HTTP errors: {self.bad_status}"
        assert not self.console_errors, f"{where}: console errors: {self.console_errors}"
        assert not self.server.errors, (
            f"{where}: the server answered with errors: {self.server.errors}"
        )

    def close(self):
        self.context.close()


@pytest.fixture
def visit(browser, server):
    server.errors.clear()
    tab = Visit(browser, server)
    yield tab
    tab.close()


MATH_STATE = """() => {
  const article = document.querySelector('article') || document.body;
  const maths = [...article.querySelectorAll('.math')];
  return {
    math: maths.length,
    untypeset: maths.filter(m => !m.querySelector('mjx-container')).length,
    containers: document.querySelectorAll('mjx-container').length,
    errors: document.querySelectorAll('mjx-merror').length,
  };
}"""

IMAGE_STATE = """() => [...(document.querySelector('article') || document.body).querySelectorAll('img')]
  .map(img => ({src: img.currentSrc || img.src, ok: img.complete && img.naturalWidth > 0,
                width: img.getBoundingClientRect().width}))"""


def check_page(visit: Visit, docname: str, *, expect_figures: bool):
    math = visit.page.evaluate(MATH_STATE)
    assert math["math"] > 0, f"{docname}: no math on the page"
    assert math["containers"] > 0, f"{docname}: MathJax typeset nothing: {math}"
    assert math["untypeset"] == 0, f"{docname}: {math['untypeset']} formulas left as raw TeX"
    assert math["errors"] == 0, f"{docname}: {math['errors']} MathJax errors (mjx-merror)"
    images = visit.page.evaluate(IMAGE_STATE)
    broken = [img["src"] for img in images if not img["ok"] or img["width"] <= 0]
    assert not broken, f"{docname}: figures not displayed: {broken}"
    if expect_figures:
        assert images, f"{docname}: no figures on the page"
    title = visit.page.locator("article h1").first.inner_text()
    assert title.strip(), f"{docname}: page has no title"


def test_index_redirects_to_intro_and_renders(server, visit):
    # index.html is a meta-refresh redirect: wait for the browser to land on the intro.
    visit.page.goto(server / "index.html", wait_until="commit")
    visit.page.wait_for_url("**/intro.html", wait_until="load", timeout=15_000)
    visit.settle()
    check_page(visit, "intro", expect_figures=False)
    rows = visit.page.locator("article table tbody tr").count()
    assert rows == len(manifest.load().chapters)  # every chapter, the bridge chapter too
    visit.screenshot("intro")
    visit.assert_clean()


def test_first_chapter_renders_and_leads_to_the_next_page(server, visit):
    visit.open(server / f"{FIRST_CHAPTER}.html")
    check_page(visit, FIRST_CHAPTER, expect_figures=True)
    visit.screenshot(FIRST_CHAPTER)
    visit.assert_clean()

    following = PAGES[PAGES.index(FIRST_CHAPTER) + 1]
    with visit.page.expect_navigation():
        visit.page.locator("a.right-next").click()
    visit.settle()
    assert visit.page.url.endswith(f"/{following}.html"), visit.page.url
    assert visit.page.locator("article h1").first.inner_text().strip()
    visit.screenshot(following)
    visit.assert_clean()


@pytest.mark.parametrize("docname", [p for p in PAGES if p not in ("intro", FIRST_CHAPTER)])
def test_other_pages_load_cleanly(server, visit, docname):
    visit.open(server / f"{docname}.html")
    if docname in CHAPTERS:
        check_page(visit, docname, expect_figures=True)
    else:
        images = visit.page.evaluate(IMAGE_STATE)
        assert all(img["ok"] for img in images), f"{docname}: broken figures {images}"
        assert visit.page.evaluate("document.querySelectorAll('mjx-merror').length") == 0
        assert visit.page.locator("article h1").first.inner_text().strip()
    visit.screenshot(docname)
    visit.assert_clean()


LAYOUT_STATE = """numbered => {
  const article = document.querySelector('article');
  const overflows = el => el.scrollWidth > el.clientWidth + 1;
  const lineOf = el => (el.innerText || '').split('\\n')
    .reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 80);
  const code = [...article.querySelectorAll('pre')];
  const maths = [...article.querySelectorAll('mjx-container[display="true"]')];
  const plots = [...article.querySelectorAll('.cell_output img')];
  const diagrams = [...article.querySelectorAll('object.graphviz, img.graphviz')];
  const figures = [...article.querySelectorAll('figure')];
  return {
    code: code.length,
    codeOverflow: code.filter(overflows).map(lineOf),
    maths: maths.length,
    mathOverflow: maths.filter(m => overflows(m) || overflows(m.parentElement))
      .map(m => (m.getAttribute('aria-label') || m.textContent).slice(0, 60)),
    plots: plots.length,
    shrunk: plots.filter(i => i.getBoundingClientRect().width < 0.75 * i.naturalWidth)
      .map(i => `${i.src.split('/').pop()}: ${Math.round(i.getBoundingClientRect().width)}`
                + ` of ${i.naturalWidth} px`),
    uncaptioned: plots.filter(i => !i.closest('figure')?.querySelector('figcaption'))
      .map(i => i.src.split('/').pop()),
    figures: figures.length,
    // Fig. 3.2 in a numbered chapter, Fig. 2 in an unnumbered bridge chapter
    unnumbered: figures.filter(f => !(numbered ? /Fig\\. \\d+\\.\\d+/ : /Fig\\. \\d+ /).test(
      f.querySelector('figcaption')?.textContent || '')).length,  // a folded box's too
    diagrams: diagrams.map(d => {
      const box = d.getBoundingClientRect();
      const svg = d.contentDocument?.querySelector('svg') || d.querySelector?.('svg');
      return {width: box.width, height: box.height, svg: !!svg || d.tagName === 'IMG'};
    }),
    figureRefs: [...article.querySelectorAll('a.reference span.std-numref')].length,
    further: !!article.querySelector('section[id="further-reading"] aside.footnote'),
  };
}"""


@pytest.mark.parametrize("width", [1280, 1920])
@pytest.mark.parametrize("docname", CHAPTERS)
def test_chapter_reads_like_a_textbook(server, browser, docname, width):
    """Nothing scrolls sideways; figures are numbered, captioned, cited and not shrunk; each
    chapter has a rendered diagram and its further reading."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(server / f"{docname}.html", wait_until="load")
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
        page.evaluate("() => MathJax.startup.promise.then(() => true)")
        page.wait_for_load_state("networkidle")
        numbered = manifest.load().chapter(docname).number is not None
        state = page.evaluate(LAYOUT_STATE, numbered)
        print_buttons = page.locator("button.btn-download-pdf-button").count()
    finally:
        context.close()
    where = f"{docname} at {width} px"
    assert state["code"] > 0, f"{where}: no code blocks found"
    assert not state["codeOverflow"], f"{where}: code scrolls sideways: {state['codeOverflow']}"
    assert not state["mathOverflow"], f"{where}: equations cut off: {state['mathOverflow']}"
    assert state["plots"] > 0, f"{where}: no figures"
    assert not state["shrunk"], (
        f"{where}: figures shown below 75 % of their size: {state['shrunk']}"
    )
    assert not state["uncaptioned"], f"{where}: figures without a caption: {state['uncaptioned']}"
    assert state["unnumbered"] == 0, f"{where}: {state['unnumbered']} figures without a number"
    assert state["figureRefs"] >= state["figures"], (
        f"{where}: {state['figures']} figures but only {state['figureRefs']} references to them"
    )
    assert state["diagrams"], f"{where}: no diagram"
    for diagram in state["diagrams"]:
        assert diagram["svg"] and diagram["width"] > 50 and diagram["height"] > 20, (
            f"{where}: a diagram did not render: {diagram}"
        )
    assert state["further"], f"{where}: no 'Further reading' with a bibliography"
    # The theme's print layout cut code off; the button is removed (book/_config.yml).
    assert print_buttons == 0, f"{where}: the print-to-PDF button is back"


def test_the_exercises_guide_is_in_view_in_the_sidebar_at_1280_by_800(server, browser):
    """A reader on a laptop screen finds how to work through the exercises without scrolling
    the navigation; the chapters keep their numbers below it."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = context.new_page()
        page.goto(server / f"{FIRST_CHAPTER}.html", wait_until="load")
        link = page.locator("nav.bd-links a[href$='exercises.html']").first
        box = link.bounding_box()
        chapter = page.locator("nav.bd-links a[href$='ch05_rnn.html']").first.inner_text()
    finally:
        context.close()
    assert box is not None and 0 <= box["y"] and box["y"] + box["height"] <= 800, box
    assert chapter.strip().startswith("5."), chapter


def test_search_works_offline(server, visit):
    """The book's search runs in the page from its own index: a chapter word finds chapter 1."""
    visit.open(server / "search.html?q=bigram")
    results = visit.page.locator("#search-results ul.search li a")
    results.first.wait_for(timeout=15_000)
    hrefs = [results.nth(i).get_attribute("href") for i in range(results.count())]
    assert any(h.split("?")[0].split("#")[0] == f"{FIRST_CHAPTER}.html" for h in hrefs), hrefs
    visit.assert_clean()


def test_search_excerpts_quote_the_prose_with_math_as_symbols(server, visit):
    """A result quotes the page's prose (book/_static/search_excerpts.js): not the source of a
    code cell, not the fold buttons, and math as symbols, not TeX."""
    visit.open(server / "search.html?q=softmax")
    excerpts = visit.page.locator("#search-results p.context")
    excerpts.first.wait_for(timeout=15_000)
    visit.page.wait_for_function(
        "document.querySelectorAll('#search-results li').length"
        " === document.querySelectorAll('#search-results p.context').length",
        timeout=30_000,
    )
    texts = excerpts.all_inner_texts()
    assert len(texts) >= 5, texts
    joined = " ".join(texts)
    assert "\\(" not in joined and "\\sqrt" not in joined, joined[:2000]
    assert "Show code cell source" not in joined and "import " not in joined, joined[:2000]
    assert "√" in joined or "×" in joined, joined[:2000]  # some excerpt quotes math
    visit.assert_clean()


@pytest.mark.parametrize("ci", ["", "true"])
def test_without_chromium_its_tests_skip_with_the_reason_but_fail_in_ci(monkeypatch, ci):
    """conftest.py's ``chromium`` fixture: with no Chromium at $CHROMIUM a browser test is
    skipped, saying what to install; with CI=true it fails (CI skips no test)."""
    monkeypatch.setattr(conftest, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", ci)
    outcome = pytest.fail.Exception if ci else pytest.skip.Exception
    with pytest.raises(outcome, match="no Chromium at /nonexistent/chromium: apt-get install"):
        conftest.require_chromium()
    monkeypatch.setattr(conftest, "CHROMIUM", "sh")  # found on PATH
    assert conftest.require_chromium() == "sh"
