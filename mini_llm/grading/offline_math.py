"""Math in formgrader and in the feedback HTML, typeset with no network.

nbconvert's and nbgrader's templates load MathJax 2 from a CDN, so offline every formula stays
raw LaTeX. Their ``mathjax`` macro is replaced (``templates/*/mathjax.html.j2``) by one that
inlines the book's own MathJax 3 (``book/_mathjax/_static/mathjax``, fetched by ``make setup``)
with its fonts as ``data:`` URLs: a feedback file is read wherever a learner opens it, with no
folder of scripts beside it, so the page must carry everything it needs.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
from pathlib import Path

MATHJAX = Path(
    os.environ.get(
        "MINI_LLM_MATHJAX",
        Path(__file__).resolve().parents[2] / "book" / "_mathjax" / "_static" / "mathjax",
    )
)
"""The book's MathJax 3 (tex-chtml.js and output/chtml/fonts/woff-v2)."""

EXTENSIONS = ("boldsymbol",)
"""TeX extensions the notebooks use beyond the bundle's own, inlined after it"""

CONFIG = {
    "tex": {
        "inlineMath": [["$", "$"], ["\\(", "\\)"]],
        "displayMath": [["$$", "$$"], ["\\[", "\\]"]],
        "processEscapes": True,
        # nothing is loaded on demand: offline, an extension that a learner's \require (or a
        # macro of autoload's) asks for would never arrive and stop the page's typesetting;
        # an unknown macro is shown as an error in its own formula instead
        "packages": {"[+]": list(EXTENSIONS), "[-]": ["require", "autoload"]},
    },
    # the right-click menu would load its pieces from a URL the page does not have
    "options": {"enableMenu": False},
}


@functools.cache
def script() -> str:
    """tex-chtml.js with every ``%%URL%%/<font>.woff`` replaced by the font itself."""
    bundle = MATHJAX / "tex-chtml.js"
    if not bundle.is_file():
        raise FileNotFoundError(
            f"MathJax is missing ({bundle}): `make setup` fetches it (or set MINI_LLM_MATHJAX)"
        )
    fonts = MATHJAX / "output" / "chtml" / "fonts" / "woff-v2"

    def inline(match: re.Match) -> str:
        data = base64.b64encode((fonts / match.group(1)).read_bytes()).decode()
        return f"data:font/woff;base64,{data}"

    code = re.sub(r"%%URL%%/([\w-]+\.woff)", inline, bundle.read_text(encoding="utf-8"))
    if "</script" in code.lower():  # would end the inline <script> early
        raise ValueError(f"{bundle} cannot be inlined: it contains '</script'")
    return code


LATER = "MINI_LLM_MATHJAX_LATER"
"""Set (by ``mini-llm grade``) in the environment of ``nbgrader generate_feedback``: pages get
:data:`MARKER` and :func:`inline_into` puts MathJax in afterwards. nbconvert parses and
rewrites every page it makes as a whole, which for 2 MB of inlined MathJax costs more than the
rest of the page."""
MARKER = "<!-- mini-llm: offline MathJax -->"


def mathjax_html(_url: object = None) -> str:
    """The ``offline_mathjax`` Jinja filter: the script tags that typeset the page's math (or,
    under :data:`LATER`, the marker that stands for them). The CDN URL nbconvert passes in is
    ignored."""
    return MARKER if os.environ.get(LATER) else _tags()


def inline_into(page: Path) -> None:
    """Replace the page's marker (in its head, before anything a learner wrote) by MathJax."""
    text = page.read_text(encoding="utf-8")
    if MARKER in text:
        page.write_text(text.replace(MARKER, _tags(), 1), encoding="utf-8")


@functools.cache
def extensions() -> str:
    """The :data:`EXTENSIONS`' own scripts, run after the bundle (which they register with)."""
    code = "\n".join(
        (MATHJAX / "input" / "tex" / "extensions" / f"{name}.js").read_text(encoding="utf-8")
        for name in EXTENSIONS
    )
    if "</script" in code.lower():
        raise ValueError("a TeX extension cannot be inlined: it contains '</script'")
    return code


def _tags() -> str:
    return (
        f"<script>window.MathJax = {json.dumps(CONFIG)};</script>\n<script>{script()}</script>"
        f"\n<script>{extensions()}</script>"
    )
