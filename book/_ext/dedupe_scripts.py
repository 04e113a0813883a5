"""Drop repeated <script> entries from every HTML page of the book.

With Sphinx 7.4, sphinx-thebe registers its inline configuration script
(``const THEBE_JS_URL = ...``) more than once, so each page declared the same ``const`` twice
and the browser logged "Identifier 'THEBE_JS_URL' has already been declared". This extension
keeps the first of any scripts that are identical (same file, same inline body, same
attributes) and drops the rest, just before each page is rendered.
"""

from __future__ import annotations

from typing import Any

from sphinx.application import Sphinx


def _script_key(script: Any) -> tuple:
    """What makes two script entries the same script."""
    filename = getattr(script, "filename", script)
    attributes = getattr(script, "attributes", {}) or {}
    return (str(filename or ""), tuple(sorted((k, str(v)) for k, v in attributes.items())))


def drop_duplicate_scripts(
    app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any
) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple] = set()
    unique = []
    for script in scripts:
        key = _script_key(script)
        if key in seen:
            continue
        seen.add(key)
        unique.append(script)
    context["script_files"] = unique


def setup(app: Sphinx) -> dict[str, Any]:
    # Run late, after the theme and other extensions have added their scripts.
    app.connect("html-page-context", drop_duplicate_scripts, priority=900)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
