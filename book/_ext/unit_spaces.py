"""Keep a number and its unit on one line.

The pages write "83 %", "10 s" and "3.3 ×" with a space, and the number is often a glued value
in its own element. At 1280 px a line could then end with "10" and the next start with "s".
Once a page is resolved (glued values pasted), this extension turns such a space into a
no-break space: before every "%", and between a digit and one of the units below. Code,
literals and mathematics keep their spaces.
"""

from __future__ import annotations

import re

from docutils import nodes
from sphinx.application import Sphinx

NO_BREAK_SPACE = "\u00a0"
_UNIT = r"(?:%|×|±|(?:ms|µs|s|min|M|GB|MB|GiB|MiB|KiB|GFLOP/s|TFLOP/s|tokens/s)(?![\w/]))"
# A space before "%" anywhere; before another unit only after a digit (the digit may end the
# previous text node, a glued value, so the text is matched with that character in front).
_BREAKABLE = re.compile(rf"(?:(?<=\d) (?={_UNIT})| (?=%))")
# Nodes whose text is shown as written: a no-break space there would change code a reader copies.
_VERBATIM = (nodes.FixedTextElement, nodes.literal, nodes.math, nodes.raw)


def _inside_verbatim(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if isinstance(parent, _VERBATIM):
            return True
        parent = parent.parent
    return False


def join_numbers_and_units(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    last_character = ""
    for text in list(doctree.findall(nodes.Text)):
        if _inside_verbatim(text):
            last_character = ""
            continue
        joined = _BREAKABLE.sub(NO_BREAK_SPACE, last_character + text)[len(last_character) :]
        if joined != text:
            text.parent.replace(text, nodes.Text(joined))
        last_character = text[-1:] if text else last_character


def setup(app: Sphinx) -> dict:
    app.connect("doctree-resolved", join_numbers_and_units)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
