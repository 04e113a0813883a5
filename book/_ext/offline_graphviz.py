"""Render the book's ``{graphviz}`` diagrams with the ``graphviz-pure`` program from PyPI.

Sphinx's graphviz extension runs a ``dot`` program, which a fresh machine does not have.
``graphviz-pure`` (a self-contained port of Graphviz's ``dot``, installed into .venv with the
book's dependencies) writes the same SVG with nothing else installed, so diagrams are built from
the source kept in each page, offline, the same on every machine.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.config import Config
from sphinx.errors import ConfigError

PROGRAM = "graphviz-pure"


def find_graphviz_pure() -> str:
    """The program beside the running Python (the venv's bin), else on PATH."""
    beside_python = Path(sys.executable).parent / PROGRAM
    if beside_python.exists():
        return str(beside_python)
    on_path = shutil.which(PROGRAM)
    if on_path:
        return on_path
    raise ConfigError(
        f"{PROGRAM} not found beside {sys.executable} or on PATH: the book's diagrams need it. "
        "Run `make setup` (it installs the book's dependencies into .venv)."
    )


def use_graphviz_pure(app: Sphinx, config: Config) -> None:
    if config.graphviz_dot in ("dot", PROGRAM):
        config.graphviz_dot = find_graphviz_pure()


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx.ext.graphviz")
    app.connect("config-inited", use_graphviz_pure)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
