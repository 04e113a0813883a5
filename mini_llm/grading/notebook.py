"""What is graded: the instructor's source notebook, and the answers taken from a submission.

Everything that decides a score comes from the source notebook (``solutions/``): which cells
exist, their order, their kind, their points, the set-up code and the tests. From a
submission only the *source text of answer cells* is taken, matched by ``grade_id``; its
metadata, test cells, locked cells, outputs and kernel are read only to report what was changed.
"""

from __future__ import annotations

import ast
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader import utils as nbutils

HIDDEN_BEGIN, HIDDEN_END = "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"


@dataclass(frozen=True)
class Cell:
    """One cell of the source notebook. ``kind`` is one of:

    ``text`` (markdown), ``setup`` (instructor code), ``answer`` (learner code, not graded by
    itself), ``test`` (auto-graded), ``manual`` (an answer graded by a person), ``free`` (an
    unmarked cell the learner may use freely; not part of grading).
    """

    kind: str
    grade_id: str | None
    source: str
    cell_type: str
    points: float = 0.0
    checksum: str | None = None

    def chunks(self) -> list[tuple[bool, str]]:
        """The test code as (hidden?, code) pieces, split at nbgrader's hidden-test markers."""
        pieces, hidden, lines = [], False, []
        for line in self.source.splitlines(keepends=True):
            marker = HIDDEN_BEGIN in line or HIDDEN_END in line
            if marker:
                pieces.append((hidden, "".join(lines)))
                hidden, lines = HIDDEN_BEGIN in line, []
            else:
                lines.append(line)
        pieces.append((hidden, "".join(lines)))
        pieces = [(h, code) for h, code in pieces if code.strip()]
        try:
            for _, code in pieces:
                ast.parse(code)
        except SyntaxError:  # markers inside a block: run the cell whole, treat it as hidden
            return [(any(h for h, _ in pieces), self.source)]
        return pieces


@dataclass
class Assignment:
    name: str
    notebook: str
    cells: list[Cell]
    kernelspec: dict

    @property
    def graded_names(self) -> list[str]:
        """Names the answer cells of the reference solution define: what the tests may call."""
        names: list[str] = []
        for cell in self.cells:
            if cell.kind != "answer":
                continue
            for node in ast.parse(cell.source).body:
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names.append(node.name)
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names += [t.id for t in targets if isinstance(t, ast.Name)]
        return list(dict.fromkeys(names))

    @property
    def auto_points(self) -> float:
        return sum(c.points for c in self.cells if c.kind == "test")


def _kind(cell) -> str:
    meta = cell.metadata.get("nbgrader", {})
    if cell.cell_type == "markdown":
        return "manual" if meta.get("grade") and meta.get("solution") else "text"
    if not meta.get("grade_id"):
        return "free"
    if meta.get("solution"):
        return "manual" if meta.get("grade") else "answer"
    if meta.get("grade"):
        return "test"
    return "setup"


def load_assignment(source_notebook: Path) -> Assignment:
    """The trusted description of an assignment, from its nbgrader source notebook."""
    nb = nbformat.read(source_notebook, as_version=4)
    cells = []
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        kind = _kind(cell)
        checksum = nbutils.compute_checksum(cell) if meta.get("grade_id") else None
        cells.append(
            Cell(
                kind,
                meta.get("grade_id"),
                cell.source,
                cell.cell_type,
                float(meta.get("points", 0) or 0),
                checksum,
            )
        )
    return Assignment(
        source_notebook.parent.name,
        source_notebook.stem,
        cells,
        dict(nb.metadata.get("kernelspec", {})),
    )


@dataclass
class Submission:
    """The answer sources of one student's notebook, and what was wrong with the file."""

    answers: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    refused: bool = False  # the file was not read at all (a link, a pipe, too large)
    empty: bool = False  # nothing of it could be graded: none handed in, unreadable, refused


MAX_NOTEBOOK_BYTES = 16 * 2**20
"""a submitted notebook larger than this is not graded (the release is under 100 kB)"""
MAX_ANSWER_CHARS = 200_000
"""an answer cell longer than this is not run, and is shown cut in the feedback"""


def _refusal(path: Path, info: os.stat_result) -> str | None:
    """Why the file ``info`` describes cannot be taken as a submitted notebook, or None."""
    if stat.S_ISLNK(info.st_mode):  # it could point at anything the grader can read
        return f"{path.name} is a symbolic link, not a notebook; graded as empty"
    if not stat.S_ISREG(info.st_mode):  # a pipe would block the grader for good
        return f"{path.name} is not a regular file (a pipe, a device or a folder); graded as empty"
    if info.st_nlink != 1:  # a hard link shares its content with a file of the course
        return f"{path.name} is a hard link to another file, not a notebook; graded as empty"
    if info.st_size > MAX_NOTEBOOK_BYTES:
        return f"{path.name} is larger than {MAX_NOTEBOOK_BYTES // 2**20} MB; graded as empty"
    return None


def _notebook_bytes(path: Path, result: Submission) -> bytes | None:
    """The submitted file's bytes, read only if it is a plain file of its own, opened without
    following a link or blocking on a pipe; None (and the reason in ``result``) otherwise."""
    try:
        refused = _refusal(path, os.lstat(path))
    except FileNotFoundError:
        result.problems.append(f"no notebook {path.name} was submitted")
        result.empty = True
        return None
    if refused is None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as err:
            refused = f"{path.name} could not be opened ({err.strerror}); graded as empty"
        else:
            with os.fdopen(fd, "rb") as file:
                refused = _refusal(path, os.fstat(file.fileno()))  # the file opened, not a swap
                data = file.read(MAX_NOTEBOOK_BYTES + 1) if refused is None else b""
    if refused is not None:
        result.problems.append(refused)
        result.refused = result.empty = True
        return None
    return data


def printable(text: str) -> str:
    """``text`` with every control character (a terminal escape, a newline) written as an
    escape: what a submission names (a cell id, a file) is printed as text."""
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text)
    )


def read_submission(
    path: Path, assignment: Assignment, release_sources: dict[str, str]
) -> Submission:
    """Take the answers out of a submitted notebook; note every departure from the assignment.

    ``release_sources`` maps grade_ids to their text in the released notebook: the learner's
    copy of each cell, to tell an answer left untouched, or a test cell edited.
    """
    result = Submission()
    data = _notebook_bytes(path, result)
    if data is None:
        return result
    try:
        raw = json.loads(data)
        version = raw.get("nbformat") if isinstance(raw, dict) else None
        nb = nbformat.reads(json.dumps(raw), as_version=4)
    except Exception as err:  # noqa: BLE001 - any malformed file is reported, never fatal
        result.problems.append(
            f"{path.name} is not a readable notebook ({type(err).__name__}); graded as empty"
        )
        result.empty = True
        return result
    if version != 4:
        result.problems.append(
            f"{path.name} is in the old notebook format v{version}; it was converted"
        )
    by_id: dict[str, list] = {}
    for index, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not isinstance(meta, dict):
            result.problems.append(
                f"cell {index + 1} has nbgrader metadata that is not a mapping; it was ignored"
            )
            continue
        grade_id = meta.get("grade_id")
        if isinstance(grade_id, str):
            by_id.setdefault(grade_id, []).append(cell)
    if _not_this_assignment(path, by_id, assignment, result):
        return result
    _check_kernel(nb, assignment, result)
    known = {c.grade_id: c for c in assignment.cells if c.grade_id}
    order = [c.grade_id for c in assignment.cells if c.kind in ("answer", "manual")]
    seen_order = [g for g in by_id if g in order]
    if seen_order != [g for g in order if g in by_id]:
        result.problems.append(
            "answer cells were moved; they were graded in the assignment's order"
        )
    for grade_id, copies in by_id.items():
        source_cell = known.get(grade_id)
        if source_cell is None:
            result.problems.append(f"cell '{grade_id}' is not part of the assignment; ignored")
            continue
        if len(copies) > 1:
            result.problems.append(
                f"cell '{grade_id}' appears {len(copies)} times; all copies were run, in order"
            )
        for copy in copies:
            _check_metadata(copy, source_cell, result)
        if source_cell.kind in ("answer", "manual"):
            result.answers[grade_id] = [_answer_text(grade_id, c, result) for c in copies]
        elif any(
            c.get("source", "") != release_sources.get(grade_id, source_cell.source) for c in copies
        ):
            result.problems.append(
                f"{source_cell.kind} cell '{grade_id}' was edited; the "
                "assignment's version was used"
            )
    for cell in assignment.cells:
        if cell.grade_id and cell.grade_id not in by_id and cell.kind != "text":
            what = "answer" if cell.kind in ("answer", "manual") else cell.kind
            result.problems.append(
                f"{what} cell '{cell.grade_id}' was deleted"
                + ("" if what == "answer" else "; the assignment's version was used")
            )
    unanswered = [
        g for g in order if g in result.answers and result.answers[g] == [release_sources.get(g)]
    ]
    if unanswered:
        result.problems.append("not answered: " + ", ".join(unanswered))
    return result


def _answer_text(grade_id: str, cell, result: Submission) -> str:
    """An answer cell's text; one too long to be an answer is not run (and not copied into
    the feedback whole)."""
    text = str(cell.get("source", ""))
    if len(text) <= MAX_ANSWER_CHARS:
        return text
    result.problems.append(
        f"answer cell '{grade_id}' has {len(text):,} characters, more than "
        f"{MAX_ANSWER_CHARS:,}; it was not run"
    )
    return f"# (this answer had {len(text):,} characters, too many to run; it was not run)\n"


def _not_this_assignment(
    path: Path, by_id: dict[str, list], assignment: Assignment, result: Submission
) -> bool:
    """A notebook without a single answer or test cell of the assignment (another assignment's
    notebook, or one whose hidden ids are gone) is one problem, not one line per cell."""
    graded = [c.grade_id for c in assignment.cells if c.kind in ("answer", "manual", "test")]
    if any(grade_id in by_id for grade_id in graded):
        return False
    ours = {c.grade_id for c in assignment.cells if c.grade_id}
    foreign = [grade_id for grade_id in by_id if grade_id not in ours]
    if foreign:
        result.problems.append(
            f"{path.name} is not a notebook of {assignment.name}: none of its graded cells "
            f"belong to it (it has '{foreign[0]}' and {len(foreign) - 1} more of another "
            "notebook); was another assignment's notebook submitted? graded as empty"
        )
    else:
        result.problems.append(
            f"{path.name} has none of the answer and test cells of {assignment.name} (the "
            "cells' hidden ids are gone, e.g. code pasted into a new notebook); work in the "
            "released notebook; graded as empty"
        )
    result.empty = True
    return True


def _check_kernel(nb, assignment: Assignment, result: Submission) -> None:
    name = nb.metadata.get("kernelspec", {}).get("name")
    expected = assignment.kernelspec.get("name")
    if name != expected:
        result.problems.append(f"the notebook asks for kernel {name!r}; graded with {expected!r}")


def _check_metadata(cell, source_cell: Cell, result: Submission) -> None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    changed = []
    if cell.get("cell_type") != source_cell.cell_type:
        changed.append("cell type")
    if bool(meta.get("grade")) != (source_cell.kind in ("test", "manual")):
        changed.append("graded flag")
    if bool(meta.get("solution")) != (source_cell.kind in ("answer", "manual")):
        changed.append("solution flag")
    try:
        points = float(meta.get("points", 0) or 0)
    except (TypeError, ValueError):
        points = None
    if points != source_cell.points:
        changed.append("points")
    if changed:
        result.problems.append(
            f"the {', '.join(changed)} of cell '{source_cell.grade_id}' "
            "were changed; the assignment's were used"
        )
