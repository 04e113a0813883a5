"""The package is laid out as its docstring says: an index of the chapters' modules that agrees
with book/chapters.yml, concept modules that open with their chapter, and old import paths
that still reach the moved modules for one release."""

from __future__ import annotations

import ast
import importlib
import re
import sys
import warnings
from pathlib import Path

import pytest
from _book_helpers import REPO, manifest

import mini_llm
from mini_llm import _old_names

PACKAGE = REPO / "mini_llm"
CHAPTERS = [
    chapter
    for chapter in manifest.load().chapters
    if chapter.ready
    or all((REPO / (m.replace(".", "/") + ".py")).exists() for m in chapter.modules)
]
"""published chapters, and those still coming whose modules are written already"""
TOOLS = {"__init__", "_old_names", "cli", "corpus", "checks", "differential"}
"""top-level modules that serve the whole course rather than one chapter"""


def package_index() -> dict[tuple[str, str], dict[str, list[str]]]:
    """(label, title) -> {module: [names]} as the package docstring lists them; the label is
    the chapter's number, or an unnumbered chapter's part."""
    index: dict[tuple[str, str], dict[str, list[str]]] = {}
    text = mini_llm.__doc__.split("Chapter by chapter", 1)[1]
    module = None
    for line in text.splitlines()[3:]:
        chapter = re.fullmatch(r" {1,2}(\d+|[A-Z]\w*) {2}(\S.*)", line)
        listed = re.fullmatch(r" {7}([\w.]+): (.+)", line)
        if chapter:
            current = index.setdefault((chapter[1], chapter[2]), {})
        elif listed:
            module = listed[1]
            current[module] = [name.strip() for name in listed[2].rstrip(",").split(",")]
        elif line.startswith(" " * 9) and module:
            current[module] += [name.strip() for name in line.rstrip(",").split(",")]
    return index


def test_the_package_index_lists_every_chapter_and_its_modules_as_the_manifest_does():
    index = package_index()
    assert list(index) == [(c.label, c.title) for c in CHAPTERS]
    for chapter in CHAPTERS:
        listed = index[chapter.label, chapter.title]
        assert [f"mini_llm.{m}" for m in listed] == list(chapter.modules), chapter.page
        for module, names in listed.items():
            imported = importlib.import_module(f"mini_llm.{module}")
            missing = [name for name in names if not hasattr(imported, name)]
            assert not missing, f"mini_llm.{module} has no {missing}"


def test_every_concept_module_is_a_chapters_and_opens_with_it():
    home: dict[str, object] = {}
    for chapter in CHAPTERS:
        for module in chapter.modules:
            home.setdefault(module, chapter)
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem in TOOLS:
            continue
        chapter = home.get(f"mini_llm.{path.stem}")
        assert chapter is not None, f"{path.name} belongs to no chapter of book/chapters.yml"
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        assert docstring.startswith(chapter.heading), (
            f"{path.name} should open with {chapter.heading!r}"
        )


def test_the_engine_is_its_own_package_and_no_model_imports_it():
    """Models are defined without the engine; the engine trains them from outside."""
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem in TOOLS:
            continue
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert not node.module.startswith("mini_llm.engine"), (path.name, node.module)
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("mini_llm.engine") for a in node.names)


@pytest.mark.parametrize(("old", "new"), sorted(_old_names.MOVED.items()))
def test_an_old_import_path_is_the_moved_module_itself_and_says_where_it_went(old, new):
    sys.modules.pop(old, None)  # as in a fresh process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)
    assert any(new in str(w.message) and w.category is DeprecationWarning for w in caught)


def test_an_old_from_import_reaches_the_names_of_the_new_module():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from mini_llm.train import TrainConfig  # the previous release's path
    from mini_llm.engine.train import TrainConfig as moved

    assert TrainConfig is moved
    assert not Path(PACKAGE / "train.py").exists()
