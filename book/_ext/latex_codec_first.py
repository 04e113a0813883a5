"""Let the bibliography decode LaTeX in author names (``R{\\'e}jean``) again.

sphinxcontrib-bibtex formats names through pybtex, which decodes LaTeX with the ``ulatex`` codec
of ``latexcodec``. The Shakespeare corpus package pulls in ``future_typing``, whose ``.pth`` file
registers, at interpreter start, a codec search function that answers *every* codec name; codec
search functions are asked in registration order, so ``ulatex`` resolved to it and every
bibliography failed with "decoding with 'ulatex' codec failed". The book never needs that codec,
so this extension unregisters it before any bibliography is formatted.
"""

from __future__ import annotations

import codecs

from sphinx.application import Sphinx


def drop_catch_all_codec() -> None:
    try:
        from future_typing.codec import search_function
    except ImportError:
        return
    import latexcodec  # noqa: F401  (registers "latex" and "ulatex")

    # The .pth file can run more than once (one registration each); remove them all.
    for _ in range(10):
        codecs.unregister(search_function)
        if codecs.lookup("ulatex").name != "future_typing":
            return
    raise RuntimeError("could not unregister future_typing's catch-all codec")


def setup(app: Sphinx) -> dict:
    drop_catch_all_codec()
    return {"parallel_read_safe": True, "parallel_write_safe": True}
