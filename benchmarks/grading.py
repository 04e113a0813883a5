"""Grading 40 submissions of ch01_bigrams: plain `nbgrader autograde` vs `mini-llm grade`.

One run, three fresh copies of the same course (the repository's nbgrader_config.py and
solutions, 40 synthetic learners: solved, untouched, half solved and wrong in the last part,
in turn). The peer is `nbgrader autograde ch01_bigrams` (all students, one process, no limits,
in-kernel scores only). `mini-llm grade` does nbgrader's in-kernel run *and* the trusted replay,
under time and memory limits, then feedback and CSV; it runs with 1 and with 2 workers.

Printed: wall-clock seconds per notebook (run time / students) for each, the median time one
student took inside `mini-llm grade`, and the ratios to plain nbgrader.

    .venv/bin/python benchmarks/grading.py [--students 40]
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from mini_llm.grading import nbglue
from mini_llm.grading.runner import Options, grade

REPO = Path(__file__).resolve().parents[1]
ASSIGNMENT = "ch01_bigrams"


def _answers(source) -> dict[str, str]:
    """grade_id -> reference answer of every answer cell (solution markers removed)."""
    markers = ("### BEGIN SOLUTION", "### END SOLUTION")
    return {c.metadata["nbgrader"]["grade_id"]: "\n".join(
        line for line in c.source.splitlines() if line.strip() not in markers)
        for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _learner(release, answers: dict[str, str], kind: int):
    nb = copy.deepcopy(release)
    ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
    written = [g for g in ids if g in answers]
    chosen = {0: written, 1: [], 2: written[: len(written) // 2], 3: written}[kind]
    for cell, gid in zip(nb.cells, ids):
        if gid in chosen:
            cell.source = answers[gid]
    if kind == 3:  # the last function answers wrongly
        last = [c for c, g in zip(nb.cells, ids) if g in written and c.cell_type == "code"][-1]
        name = last.metadata["nbgrader"]["grade_id"].removesuffix("_impl")
        last.source += f"\n\ndef {name}(*args, **kwargs):\n    return 0.0\n"
    return nb


def make_course(root: Path, students: int) -> Path:
    root.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    source = nbformat.read(REPO / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
    release = nbformat.read(REPO / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
    answers = _answers(source)
    for i in range(students):
        folder = root / "submitted" / f"learner{i:03d}" / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(_learner(release, answers, i % 4), folder / f"{ASSIGNMENT}.ipynb")
    return root


def plain_nbgrader(root: Path) -> float:
    env = {**os.environ, "PATH": nbglue.executable_path()}
    for args in (["generate_assignment", ASSIGNMENT, "--force"], ["autograde", ASSIGNMENT]):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env, check=True,
                       capture_output=True)
    return time.perf_counter() - start  # the autograde step only


def ours(root: Path, workers: int) -> tuple[float, float]:
    start = time.perf_counter()
    reports, _, _ = grade(Options(ASSIGNMENT, root, workers=workers, timeout_s=300,
                               cell_timeout_s=30, memory_mb=2048))
    wall = time.perf_counter() - start
    return wall, statistics.median(r.window[1] - r.window[0] for r in reports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    n = parser.parse_args().students
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        peer = plain_nbgrader(make_course(scratch / "nbgrader", n))
        one, one_median = ours(make_course(scratch / "one", n), workers=1)
        two, two_median = ours(make_course(scratch / "two", n), workers=2)
    print(f"{n} submissions of {ASSIGNMENT}, seconds per notebook (wall / students):")
    print(f"  nbgrader autograde (no limits, in-kernel)  {peer / n:6.2f}")
    print(f"  mini-llm grade --workers 1                 {one / n:6.2f}   "
          f"median per student {one_median:5.2f}   ratio to nbgrader {one / peer:4.2f}x")
    print(f"  mini-llm grade --workers 2                 {two / n:6.2f}   "
          f"median per student {two_median:5.2f}   ratio to nbgrader {two / peer:4.2f}x")


if __name__ == "__main__":
    main()
