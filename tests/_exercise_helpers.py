"""Helpers for the exercise tests: nbgrader in a throw-away course directory, cell lookup.

Used by test_exercises_sync.py, test_autograde.py and test_hidden_tests.py.
"""

from __future__ import annotations

import importlib
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import nbformat
import numpy as np
import torch
from _book_helpers import manifest, selected_chapters

from mini_llm.grading import formgrader

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"
BIN = Path(sys.executable).parent
BUGGY = REPO / "tests" / "buggy"
ASSIGNMENTS = [c.assignment for c in selected_chapters() if c.assignment]
"""the assignments of the ready chapters in book/chapters.yml (of one with --chapter)"""

BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"


def nbgrader(
    course: Path, *args: str, timeout: float = 300, trusted: bool = False
) -> subprocess.CompletedProcess:
    """Run ``nbgrader *args`` in ``course`` (which holds a copy of the repo's nbgrader_config.py).

    Callers use the ``grader_path`` fixture: nbgrader's gradebook runs the ``alembic`` command
    it finds on PATH. ``trusted``: the notebooks are the course's own (solutions, known bugs),
    so ``nbgrader autograde`` may run them unsandboxed, which the course's config otherwise
    refuses (:mod:`mini_llm.grading.formgrader`).
    """
    plain = {formgrader.PLAIN_AUTOGRADE: "1"} if trusted else {}
    result = subprocess.run(
        [str(BIN / "nbgrader"), *args],
        check=False,
        cwd=course,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **plain},
    )
    assert result.returncode == 0, (
        f"nbgrader {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    )
    return result


def new_course(root: Path, assignments: list[str] = ASSIGNMENTS) -> Path:
    """A course directory like the repository's: its nbgrader_config.py and solutions/."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "nbgrader_config.py", root / "nbgrader_config.py")
    for name in assignments:
        shutil.copytree(SOLUTIONS / name, root / "solutions" / name)
    return root


def notebook_path(folder: Path, assignment: str) -> Path:
    return folder / assignment / f"{assignment}.ipynb"


def read(path: Path) -> nbformat.NotebookNode:
    return nbformat.read(path, as_version=4)


def grader_meta(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def cell_by_grade_id(nb, grade_id: str):
    found = [c for c in nb.cells if grader_meta(c).get("grade_id") == grade_id]
    assert len(found) == 1, f"expected one cell with grade_id {grade_id!r}, found {len(found)}"
    return found[0]


def autograded_tests(nb) -> dict[str, float]:
    """grade_id -> points of every autograded test cell (graded, not a solution)."""
    return {
        m["grade_id"]: float(m["points"])
        for m in map(grader_meta, nb.cells)
        if m.get("grade") and not m.get("solution")
    }


def manual_answers(nb) -> dict[str, float]:
    """grade_id -> points of every manually graded answer cell (graded and a solution)."""
    return {
        m["grade_id"]: float(m["points"])
        for m in map(grader_meta, nb.cells)
        if m.get("grade") and m.get("solution")
    }


INPUT_CHECKS = "_input_tests"
"""the suffix of a part's second test cell, which grades its checks of invalid input apart"""


def graded_parts(nb) -> list[str]:
    """Names of the functions the learner writes: each ``<name>_tests`` cell checks ``<name>``
    (and a ``<name>_input_tests`` cell, where there is one, its refusal of invalid input)."""
    return [
        gid.removesuffix("_tests") for gid in autograded_tests(nb) if not gid.endswith(INPUT_CHECKS)
    ]


def part_test_cells(nb, part: str) -> list[str]:
    """The grade ids of ``part``'s test cells: ``<part>_tests``, then ``<part>_input_tests``
    where the part's input checks are graded apart."""
    cells = autograded_tests(nb)
    return [gid for gid in (f"{part}_tests", f"{part}{INPUT_CHECKS}") if gid in cells]


def losing_cell(part: str, implementation) -> str:
    """The test cell a known bug of ``part`` must lose: the input checks' for a bug registered
    with ``bug.input`` (it only fails to refuse invalid input), else the part's own."""
    input_bug = getattr(implementation, "input_bug", False)
    return f"{part}{INPUT_CHECKS}" if input_bug else f"{part}_tests"


def split_test_cell(source: str) -> tuple[str, str]:
    """(visible tests, hidden tests) of a test cell's source."""
    before, marker, rest = source.partition(BEGIN_HIDDEN)
    assert marker, "the test cell has no hidden tests"
    hidden, end, _ = rest.partition(END_HIDDEN)
    assert end, "the hidden tests are not closed"
    return before, hidden


def reference_answer(source: str) -> str:
    """A solution cell's code as a learner would have it: the solution markers removed."""
    return "\n".join(
        line for line in source.splitlines() if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION)
    )


def bug_module(assignment: str) -> ModuleType | None:
    """The assignment's known-bugs module (REFERENCE, BUGS, ALTERNATIVES), as book/chapters.yml
    names it (``tests/buggy/<name>.py``), or None if there is none."""
    bugs = next(c.bugs for c in manifest.load().chapters if c.assignment == assignment)
    if bugs is None or not (REPO / bugs).is_file():
        return None
    return importlib.import_module(f"buggy.{Path(bugs).stem}")


def check_failure(code: str, part: str, implementation) -> str | None:
    """Run test-cell code with ``implementation`` bound to the name ``part``: the message of the
    AssertionError it raises, or None when every check passes. The global random generators
    are seeded first: a bug that draws from them (instead of the generator it is given) then
    passes or fails the same way in every process, so parametrizations built from this answer
    are identical on every pytest worker."""
    namespace = {"__name__": "__exercise__", part: implementation}
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    with np.errstate(all="ignore"):
        try:
            exec(compile(code, f"<{part}_tests>", "exec"), namespace)  # noqa: S102 - our notebook
        except AssertionError as err:
            return str(err)
    return None
