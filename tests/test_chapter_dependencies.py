"""A chapter is re-executed when a mini_llm module it imports changes, and only then.

book/_ext/chapter_dependencies.py finds the modules with ``ast``: these tests check the import
forms it must follow, that what it finds for the real chapters includes what Python really loads,
and, with real builds of a throwaway book, which pages execute again after an edit.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _book_helpers import BOOK_DIR, MYST_NOTEBOOK_HEADER, REPO, manifest, run_jupyter_book
from chapter_dependencies import ModuleGraph, code_cells, imported_names  # book/_ext

GRAPH = ModuleGraph(REPO / "mini_llm", BOOK_DIR / "booklib")
READY = manifest.load().ready()


def test_import_forms():
    assert imported_names("import mini_llm.gpt as g") == {"mini_llm.gpt"}
    assert imported_names("from mini_llm import gpt, engine") == {
        "mini_llm",
        "mini_llm.gpt",
        "mini_llm.engine",
    }
    assert imported_names("def f():\n    from mini_llm.rnn import rnn_step") == {
        "mini_llm.rnn",
        "mini_llm.rnn.rnn_step",
    }
    runner = "mini_llm.grading.runner"
    assert imported_names("from . import wire", runner) == {
        "mini_llm.grading",
        "mini_llm.grading.wire",
    }
    assert imported_names("from ..engine.train import train", runner) == {
        "mini_llm.engine.train",
        "mini_llm.engine.train.train",
    }
    assert imported_names("from .cli import main", "mini_llm.grading", is_package=True) == {
        "mini_llm.grading.cli",
        "mini_llm.grading.cli.main",
    }


def _package(root: Path, files: dict[str, str]) -> ModuleGraph:
    for name, source in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    return ModuleGraph(root / "mini_llm")


SMALL_PACKAGE = {
    "mini_llm/__init__.py": "",
    "mini_llm/a.py": "from .b import helper\n",
    "mini_llm/b.py": "def helper():\n    import mini_llm.c  # loaded only when called\n",
    "mini_llm/c.py": "",
    "mini_llm/alone.py": "import numpy\n",
    "mini_llm/grading/__init__.py": "from . import runner\n",
    "mini_llm/grading/runner.py": "from ..a import helper\n",
}


def test_dependencies_are_followed_transitively_and_through_packages(tmp_path):
    graph = _package(tmp_path, SMALL_PACKAGE)
    assert graph.closure({"mini_llm.a"}) == {"mini_llm", "mini_llm.a", "mini_llm.b", "mini_llm.c"}
    assert graph.closure({"mini_llm", "mini_llm.alone"}) == {"mini_llm", "mini_llm.alone"}
    assert graph.closure({"mini_llm.grading.runner"}) == {
        "mini_llm",
        "mini_llm.grading",  # Python runs the package's __init__ on the way
        "mini_llm.grading.runner",
        "mini_llm.a",
        "mini_llm.b",
        "mini_llm.c",
    }
    assert graph.closure({"numpy", "os.path"}) == set()


def test_a_page_depends_on_what_its_code_cells_import(tmp_path):
    graph = _package(tmp_path, SMALL_PACKAGE)
    page = tmp_path / "page.md"
    page.write_text(
        MYST_NOTEBOOK_HEADER
        + "\n# A page\n\nText that mentions `import mini_llm.c` is not code.\n\n"
        + "```{code-cell} ipython3\n%matplotlib inline\nfrom mini_llm import alone\n```\n"
    )
    assert code_cells(page) == [
        "get_ipython().run_line_magic('matplotlib', 'inline')\nfrom mini_llm import alone\n"
    ]
    assert graph.page_dependencies(page) == {"mini_llm", "mini_llm.alone"}
    assert graph.page_fingerprint(page) == {}  # alone.py only imports numpy: nothing to run
    (tmp_path / "mini_llm/alone.py").write_text("import numpy\n\nnumpy.seterr(all='raise')\n")
    assert set(ModuleGraph(tmp_path / "mini_llm").page_fingerprint(page)) == {
        "mini_llm/alone.py::<module code 1>"
    }


# A training loop that offers a schedule of the Transformer's module, as mini_llm's does.
LOOP_AND_TRANSFORMER = {
    "mini_llm/__init__.py": "",
    "mini_llm/transformer.py": """
        import math

        SCALE = 2.0


        def noam(step):
            return SCALE * math.sqrt(step)


        class Encoder:
            def forward(self, x):
                return noam(x) + 1
        """,
    "mini_llm/train.py": """
        from mini_llm import transformer


        def rate(step, schedule):
            return transformer.noam(step) if schedule == "noam" else 1.0


        def train(steps, schedule="cosine"):
            # a comment: not part of the code
            return [rate(step, schedule) for step in range(steps)]


        def evaluate():
            return transformer.Encoder()
        """,
}


def _page(tmp_path: Path, code: str) -> Path:
    page = tmp_path / "page.md"
    page.write_text(
        MYST_NOTEBOOK_HEADER + f"\n# A page\n\n```{{code-cell}} ipython3\n{code}\n```\n"
    )
    return page


def _edited(tmp_path: Path, file: str, old: str, new: str) -> None:
    path = tmp_path / file
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_page_depends_on_the_definitions_it_reaches_not_on_whole_modules(tmp_path):
    """The page trains with the loop, which reaches the noam schedule: an edit of the
    Transformer's encoder, of a function the page never reaches or of a comment changes
    nothing; an edit of the schedule or of a constant it reads changes the fingerprint."""
    _package(tmp_path, LOOP_AND_TRANSFORMER)
    page = _page(tmp_path, "from mini_llm.train import train\nprint(train(3))")
    before = ModuleGraph(tmp_path / "mini_llm").page_fingerprint(page)
    assert set(before) == {
        "mini_llm/train.py::train",
        "mini_llm/train.py::rate",
        "mini_llm/transformer.py::noam",
        "mini_llm/transformer.py::SCALE",
    }
    for file, old, new in [
        ("mini_llm/transformer.py", "noam(x) + 1", "noam(x) + 2"),
        ("mini_llm/train.py", "return transformer.Encoder()", "return None"),
        ("mini_llm/train.py", "a comment: not part", "another comment, not part"),
    ]:
        _edited(tmp_path, file, old, new)
        assert ModuleGraph(tmp_path / "mini_llm").page_fingerprint(page) == before, old
    for file, old, new in [
        ("mini_llm/transformer.py", "math.sqrt(step)", "math.sqrt(step + 1)"),
        ("mini_llm/transformer.py", "SCALE = 2.0", "SCALE = 3.0"),
    ]:
        _edited(tmp_path, file, old, new)
        after = ModuleGraph(tmp_path / "mini_llm").page_fingerprint(page)
        assert after.keys() == before.keys() and after != before, old
        before = after


def test_a_name_a_module_imports_is_followed_to_where_it_is_defined(tmp_path):
    """``uses_value.VALUE`` is value.py's VALUE, imported into uses_value.py."""
    _package(tmp_path, {**PACKAGE, "mini_llm/again.py": "from .uses_value import VALUE as V\n"})
    for code in (
        "from mini_llm import uses_value\nuses_value.VALUE",
        "from mini_llm.again import V\nprint(V)",
    ):
        fingerprint = ModuleGraph(tmp_path / "mini_llm").page_fingerprint(_page(tmp_path, code))
        assert set(fingerprint) == {"mini_llm/value.py::VALUE"}, code


def test_a_module_used_whole_or_through_a_star_import_counts_whole(tmp_path):
    _package(tmp_path, LOOP_AND_TRANSFORMER)
    for code in ("from mini_llm import train\nprint(train)", "from mini_llm.train import *"):
        fingerprint = ModuleGraph(tmp_path / "mini_llm").page_fingerprint(_page(tmp_path, code))
        assert {"mini_llm/train.py::evaluate", "mini_llm/transformer.py::Encoder"} <= set(
            fingerprint
        ), code


SANDBOX_OF_LEARNER_CHECK = {"mini_llm.grading", "mini_llm.grading.jail", "mini_llm.grading.limits"}


def test_chapters_import_what_they_teach_and_never_the_grader():
    for chapter in READY:
        modules = GRAPH.page_dependencies(chapter.source)
        assert set(chapter.modules) <= modules, (
            f"{chapter.page} teaches {chapter.modules} (book/chapters.yml) but imports {modules}"
        )
        grader = {m for m in modules if m.startswith("mini_llm.grading")}
        # `learner check` runs a learner's code under the grader's own limits and sandbox, so a
        # page that checks one depends on those two modules, and on nothing else of the grader.
        assert grader <= SANDBOX_OF_LEARNER_CHECK, (chapter.page, grader)
        if "mini_llm.learner" not in modules:
            assert not grader, chapter.page


# Runs in a fresh interpreter: for each chapter, forget every mini_llm module, run the chapter's
# import statements, and report which mini_llm modules are loaded then.
LOADED_BY_EACH = """
import json, sys
chapters, loaded = json.loads(sys.stdin.read()), {}
for page, imports in chapters.items():
    for name in [m for m in sys.modules if m.split(".")[0] == "mini_llm"]:
        del sys.modules[name]
    exec(imports, {})
    loaded[page] = [m for m in sys.modules if m.split(".")[0] == "mini_llm"]
print(json.dumps(loaded))
"""


@pytest.fixture(scope="module")
def loaded_by_python() -> dict[str, set[str]]:
    """page -> the mini_llm modules Python loads when it runs the page's import statements."""
    imports = {
        chapter.page: "\n".join(
            ast.unparse(node)
            for cell in code_cells(chapter.source)
            for node in ast.parse(cell).body
            if isinstance(node, (ast.Import, ast.ImportFrom)) and "mini_llm" in ast.unparse(node)
        )
        for chapter in READY
    }
    done = subprocess.run(
        [sys.executable, "-c", LOADED_BY_EACH],
        input=json.dumps(imports),
        capture_output=True,
        text=True,
        cwd=BOOK_DIR,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
        check=True,
    )
    return {page: set(modules) for page, modules in json.loads(done.stdout).items()}


@pytest.mark.parametrize("chapter", READY, ids=[c.page for c in READY])
def test_found_modules_include_every_module_python_loads(loaded_by_python, chapter):
    """The static analysis may find more (imports inside functions), never fewer."""
    loaded = loaded_by_python[chapter.page]
    assert len(loaded) > 1
    assert loaded <= GRAPH.page_dependencies(chapter.source)


def test_the_books_own_code_counts_like_the_package(tmp_path):
    """A page's tables come from book/booklib: editing it re-executes the pages that use it."""
    _package(tmp_path, {"mini_llm/__init__.py": "", "book/booklib/__init__.py": ""})
    (tmp_path / "book/booklib/tables.py").write_text("def table(rows):\n    return rows\n")
    page = _page(tmp_path, "from booklib.tables import table\nprint(table([1]))")
    graph = ModuleGraph(tmp_path / "mini_llm", tmp_path / "book" / "booklib")
    assert set(graph.page_fingerprint(page)) == {"book/booklib/tables.py::table"}
    real = GRAPH.page_fingerprint(READY[1].source)  # chapter 2's tables
    assert "book/booklib/tables.py::markdown_table" in real


def test_chapters_that_only_train_reach_the_transformer_only_through_its_schedule():
    """The training loop offers chapter 9's noam schedule, so chapters 3 to 7, which train
    with it, load the Transformer's module; of it they reach the schedule alone, and editing
    the Transformer re-executes only the chapters that use it (through the GPT too)."""
    for chapter in READY:
        reached = {key for key in GRAPH.page_fingerprint(chapter.source) if "transformer" in key}
        if chapter.number is None or chapter.number < 8:
            assert reached <= {"mini_llm/transformer.py::noam_learning_rate"}, chapter.page
        if chapter.page == "ch03_neural_lm":
            assert reached == {"mini_llm/transformer.py::noam_learning_rate"}
        if chapter.page == "ch09_transformer":
            assert "mini_llm/transformer.py::EncoderLayer" in reached


# A page of the throwaway book: imports from the throwaway package beside the book, which the
# first line puts before the course's own mini_llm.
PAGE = """
# {name}

```{{code-cell}} ipython3
import sys
sys.path.insert(0, "..")
{imports}
print("{name} shows", {value})
```
"""


PACKAGE = {
    "mini_llm/__init__.py": "",
    "mini_llm/value.py": "VALUE = 'v1'\n",
    "mini_llm/uses_value.py": "from .value import VALUE\n",
    "mini_llm/alone.py": "ALONE = 'a1'\n",
    "mini_llm/grading/__init__.py": "GRADER = 1\n",
}


def _executed(build: subprocess.CompletedProcess) -> set[str]:
    assert build.returncode == 0, build.stdout[-4000:]
    return set(re.findall(r"/(\w+)\.md: Executing notebook", build.stdout))


def test_an_edit_re_executes_exactly_the_pages_that_import_it(throwaway_book, tmp_path):
    first = PAGE.format(
        name="first", imports="from mini_llm import uses_value", value="uses_value.VALUE"
    )
    second = PAGE.format(
        name="second", imports="import mini_llm.alone", value="mini_llm.alone.ALONE"
    )
    book = throwaway_book(
        {"first": MYST_NOTEBOOK_HEADER + first, "second": MYST_NOTEBOOK_HEADER + second}
    )
    _package(tmp_path, PACKAGE)
    budgets = [{"page": "first", "budget_s": 0}, {"page": "second", "budget_s": 600}]
    (book / "chapters.yml").write_text(json.dumps({"chapters": budgets}))  # JSON is YAML
    html = book / "_build" / "html"

    first_build = run_jupyter_book(book, timeout=600)
    assert _executed(first_build) == {"first", "second"}
    assert "first shows v1" in (html / "first.html").read_text()
    assert re.search(r"first took \d+ s to execute, over its budget of 0 s", first_build.stdout)
    assert "second took" not in first_build.stdout

    (tmp_path / "mini_llm/grading/__init__.py").write_text("GRADER = 2\n")
    assert _executed(run_jupyter_book(book, timeout=600)) == set()

    (tmp_path / "mini_llm/value.py").write_text("VALUE = 'v2'\n")  # first imports it through
    assert _executed(run_jupyter_book(book, timeout=600)) == {"first"}  # uses_value
    assert "first shows v2" in (html / "first.html").read_text()
    assert "second shows a1" in (html / "second.html").read_text()

    (tmp_path / "mini_llm/alone.py").write_text("ALONE = 'a2'\n")
    assert _executed(run_jupyter_book(book, timeout=600)) == {"second"}
    assert "second shows a2" in (html / "second.html").read_text()


def test_a_file_named_in_inputs_changes_the_fingerprint(tmp_path):
    from chapter_dependencies import input_fingerprint

    (tmp_path / "solutions/a").mkdir(parents=True)
    notebook = tmp_path / "solutions/a/a.ipynb"
    notebook.write_text("{}")
    (tmp_path / "solutions/a/notes.txt").write_text("not matched")
    before = input_fingerprint(tmp_path, ["solutions/*/*.ipynb", "book/results/absent.json"])
    assert set(before) == {"solutions/a/a.ipynb"}
    notebook.write_text('{"cells": []}')
    assert input_fingerprint(tmp_path, ["solutions/*/*.ipynb"]) != before


def test_pages_that_read_the_solutions_name_them_as_inputs():
    """A page that reads notebooks of solutions/ is re-executed when they change."""
    for chapter in READY:
        read = set(re.findall(r'"(ch\d\d_\w+)"', "\n".join(code_cells(chapter.source))))
        if "solutions" not in "\n".join(code_cells(chapter.source)):
            continue
        matched = {path.parent.name for pattern in chapter.inputs for path in REPO.glob(pattern)}
        assert read & {p.parent.name for p in REPO.glob("solutions/*/*.ipynb")} <= matched, (
            chapter.page
        )
        assert matched, f"{chapter.page} reads solutions/ but book/chapters.yml names no inputs"
