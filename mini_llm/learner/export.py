"""Exercise notebooks -> an importable package of the learner's own parts, one module per chapter.

Export only reads notebooks and writes text: it never runs the learner's code. For each
assignment of the registry whose notebook is found, it writes ``<assignment>.py``: the imports
of the notebook's ``setup`` cell, then every answer cell of a registered part, as written, in
notebook order. ``manifest.json`` records each part's status as far as it can be known without
running anything:

* ``present``  -- the answer cell defines the name and is not the unsolved stub;
* ``missing``  -- no notebook, no answer cell, or still ``raise NotImplementedError()``;
* ``error``    -- the cell does not parse, or does not define the name (the reference is used).

It also keeps each part's visible tests (the test cell up to its hidden tests), which
:mod:`mini_llm.learner.probe` runs. Nothing is lost: a folder that holds anything but an earlier
export is refused, and a new export replaces only the files an earlier one wrote.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from mini_llm.learner.registry import Part, assignments, parts_of

MANIFEST = "manifest.json"
WRITTEN_BY = "mini-llm learner export"
HIDDEN_TESTS = "### BEGIN HIDDEN TESTS"


class LearnerError(ValueError):
    """Something the learner can fix: a missing folder, a broken notebook or cell."""


@dataclass
class ExportedPart:
    assignment: str
    name: str
    status: str  # present, missing or error
    detail: str = ""
    tests: str = ""  # the visible tests of the part's test cell

    @property
    def label(self) -> str:
        return f"{self.assignment}.{self.name}"


def find_notebook(folder: Path, assignment: str) -> Path | None:
    """``<folder>/<assignment>/<assignment>.ipynb`` (the course's layout) or
    ``<folder>/<assignment>.ipynb``."""
    for path in (folder / assignment / f"{assignment}.ipynb", folder / f"{assignment}.ipynb"):
        if path.is_file():
            return path
    return None


def read_notebook(path: Path):
    import nbformat  # the grading extra's: mini-llm train must not need it

    try:
        return nbformat.read(path, as_version=4)
    except Exception as err:  # noqa: BLE001 - nbformat raises many kinds for: not a notebook
        raise LearnerError(
            f"{path} is not a readable notebook ({type(err).__name__}: {err}); restore it "
            "(e.g. File > Revert in JupyterLab, or git checkout) and export again"
        ) from None


def _cells_by_grade_id(notebook) -> dict[str, tuple[int, object]]:
    found = {}
    for index, cell in enumerate(notebook.cells):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id:
            found[grade_id] = (index, cell)
    return found


def _imports_of(source: str) -> str:
    """The import statements of a cell (a setup cell also loads data and prints: not wanted
    each time the package is imported)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    lines = source.splitlines()
    return "\n".join(
        "\n".join(lines[node.lineno - 1 : node.end_lineno])
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
    )


def _is_stub(definition: ast.FunctionDef | ast.ClassDef) -> bool:
    """Still the released stub: the body (docstring aside) is ``raise NotImplementedError()``;
    for a class, that of any of its methods."""
    if isinstance(definition, ast.ClassDef):
        return any(_is_stub(node) for node in definition.body if isinstance(node, ast.FunctionDef))
    body = [node for node in definition.body if not _is_docstring(node)]
    return len(body) == 1 and _raises_not_implemented(body[0])


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def _raises_not_implemented(node: ast.stmt) -> bool:
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(raised, ast.Name) and raised.id == "NotImplementedError"


def _answer_status(part: Part, source: str) -> tuple[str, str]:
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        return "error", f"the answer cell does not parse: line {err.lineno}: {err.msg}"
    definitions = [
        node
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == part.name
    ]
    if not definitions:
        return "error", f"the answer cell defines no {part.name}"
    if _is_stub(definitions[-1]):
        return "missing", "still raises NotImplementedError"
    return "present", ""


def _visible_tests(cells: dict, part: Part) -> str:
    """The visible tests of what the part computes (``<part>_tests``; the calls its input
    checks refuse are not behaviour to compare with the reference)."""
    _, cell = cells.get(f"{part.name}_tests", (None, None))
    return cell.source.partition(HIDDEN_TESTS)[0] if cell is not None else ""


def _chapter(assignment: str, path: Path | None) -> tuple[str | None, list[ExportedPart]]:
    """The module text of one chapter (None without a notebook) and the status of its parts."""
    if path is None:
        parts = parts_of(assignment)
        return None, [ExportedPart(assignment, p.name, "missing", "no notebook") for p in parts]
    cells = _cells_by_grade_id(read_notebook(path))
    chunks = [
        (
            f'"""Your answers to {assignment}, exported from {path.name} by `{WRITTEN_BY}`.\n\n'
            'Export again after changing the notebook: edits here are overwritten."""\n'
        )
    ]
    if "setup" in cells:
        index, cell = cells["setup"]
        chunks.append(f"# --- cell {index} (setup): its imports\n{_imports_of(cell.source)}\n")
    exported = []
    for part in parts_of(assignment):
        if part.grade_id not in cells:
            exported.append(ExportedPart(assignment, part.name, "missing", "no answer cell"))
            continue
        index, cell = cells[part.grade_id]
        status, detail = _answer_status(part, cell.source)
        exported.append(
            ExportedPart(assignment, part.name, status, detail, _visible_tests(cells, part))
        )
        if status != "error":  # a cell that does not parse would break the whole module
            chunks.append(f"# --- cell {index} ({part.grade_id})\n{cell.source}\n")
    return "\n\n".join(chunks), exported


def _check_destination(out: Path) -> list[str]:
    """The files an earlier export wrote into ``out`` (to replace); refuses any other folder."""
    if not out.exists():
        return []
    if not out.is_dir():
        raise LearnerError(f"{out} is a file, not a folder; choose another --out")
    manifest = out / MANIFEST
    earlier = None
    if manifest.is_file():
        try:
            earlier = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            earlier = None
    if not isinstance(earlier, dict) or earlier.get("written_by") != WRITTEN_BY:
        if any(out.iterdir()):
            raise LearnerError(
                f"{out} already holds files that {WRITTEN_BY} did not write; choose another "
                "--out (nothing was written)"
            )
        return []
    return [*earlier.get("files", []), MANIFEST]


def export(source: str | Path, out: str | Path) -> list[ExportedPart]:
    """Write the learner package of the notebooks in ``source`` into ``out``; the status of every
    registered part, in chapter order."""
    source, out = Path(source), Path(out)
    if not source.is_dir():
        raise LearnerError(
            f"{source} is not a folder; pass the folder that holds your exercise notebooks, "
            "e.g. my_exercises (with my_exercises/ch08_self_attention/ch08_self_attention.ipynb"
            "; `mini-llm learner start` makes it)"
        )
    notebooks = {a: find_notebook(source, a) for a in assignments()}
    if not any(notebooks.values()):
        raise LearnerError(
            f"no exercise notebooks in {source}: expected e.g. "
            f"{source / 'ch08_self_attention' / 'ch08_self_attention.ipynb'}"
        )
    modules, parts = {}, []
    for assignment, path in notebooks.items():  # every notebook is read before anything is written
        text, exported = _chapter(assignment, path)
        parts += exported
        if text is not None:
            modules[f"{assignment}.py"] = text
    earlier = _check_destination(out)
    manifest = {
        "written_by": WRITTEN_BY,
        "source": str(source.resolve()),
        "files": ["__init__.py", *modules],
        "parts": [asdict(part) for part in parts],
    }
    files = {
        "__init__.py": f'"""Your own mini_llm parts, written by `{WRITTEN_BY}`."""\n',
        **modules,
        MANIFEST: json.dumps(manifest, indent=1, ensure_ascii=False) + "\n",
    }
    _write_all(out, files, stale=set(earlier) - set(files))
    return parts


def _write_all(out: Path, files: dict[str, str], stale: set[str]) -> None:
    """Write every file next to its destination first, then move them in (the manifest last)."""
    out.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".export-", dir=out))
    try:
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
        for name in sorted(files, key=lambda n: n == MANIFEST):
            os.replace(staging / name, out / name)
        for name in stale:
            (out / name).unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def read_manifest(folder: Path) -> dict:
    """The manifest of an exported package, or a clear error."""
    path = folder / MANIFEST
    if not folder.is_dir():
        raise LearnerError(
            f"{folder} is not a folder; export your notebooks first: "
            "mini-llm learner export my_exercises --out DIR"
        )
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise LearnerError(
            f"{folder} holds no readable {MANIFEST} ({err}); it is not a package written by "
            f"{WRITTEN_BY}: pass the folder that export wrote (its --out, e.g. my_mini_llm), "
            "or export your notebooks first: mini-llm learner export my_exercises --out DIR"
        ) from None
    if manifest.get("written_by") != WRITTEN_BY:
        raise LearnerError(f"{path} was not written by {WRITTEN_BY}; export again")
    return manifest
