"""Keep a number and its per-cent sign on one line.

The pages write "83 %" with a space, and the number is often a glued value in its own element.
At 1280 px a line could then end with "83" and the next start with "%". This extension turns
the space before every "%" of the prose into a no-break space once a page is resolved (glued
values included), and leaves code, literals and mathematics as they are.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx

NO_BREAK_SPACE = "\u00a0"
# Nodes whose text is shown as written: a no-break space there would change code a reader copies.
_VERBATIM = (nodes.FixedTextElement, nodes.literal, nodes.math, nodes.raw)


def _inside_verbatim(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, _VERBATIM):
            return True
        parent = parent.parent
    return False


def join_percent_signs(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    for text in list(doctree.findall(nodes.Text)):
        if " %" not in text or _inside_verbatim(text):
            continue
        text.parent.replace(text, nodes.Text(text.replace(" %", NO_BREAK_SPACE + "%")))


def setup(app: Sphinx) -> dict:
    app.connect("doctree-resolved", join_percent_signs)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
