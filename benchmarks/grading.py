"""Grading 40 submissions: plain `nbgrader autograde` vs `mini-llm grade` (ch01_bigrams by default).

One run, three fresh copies of the same course (the repository's nbgrader_config.py and
solutions, 40 synthetic learners: solved, untouched, half solved and wrong in the last part,
in turn). The peer is `nbgrader autograde ch01_bigrams` (all students, one process, no limits,
no isolation, in-kernel scores only). `mini-llm grade` runs with every defence on: each
student's trusted replay in its own bubblewrap sandbox under time and memory limits, then
feedback and CSV; it runs with 1 and with 2 workers (nbgrader's in-kernel pass is off, as by
default; `--in-kernel` adds a run with it).

Plain nbgrader is timed twice, first and last (in a fourth fresh course), because on a shared
machine the load drifts during a run; the ratios are to the mean of the two.

Printed: wall-clock seconds per notebook (run time / students) for each, the median time one
student took inside `mini-llm grade`, and the ratios to plain nbgrader.

    .venv/bin/python benchmarks/grading.py [--students 40] [--in-kernel] [--assignment ch03_neural_lm]
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

from mini_llm.grading import formgrader, nbglue
from mini_llm.grading.runner import Options, grade

REPO = Path(__file__).resolve().parents[1]


def _answers(source) -> dict[str, str]:
    """grade_id -> reference answer of every answer cell (solution markers removed)."""
    markers = ("### BEGIN SOLUTION", "### END SOLUTION")
    return {
        c.metadata["nbgrader"]["grade_id"]: "\n".join(
            line for line in c.source.splitlines() if line.strip() not in markers
        )
        for c in source.cells
        if c.metadata.get("nbgrader", {}).get("solution")
    }


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


def make_course(root: Path, students: int, assignment: str) -> Path:
    root.mkdir(parents=True)
    shutil.copy(REPO / "nbgrader_config.py", root)
    shutil.copytree(REPO / "solutions" / assignment, root / "solutions" / assignment)
    source = nbformat.read(REPO / "solutions" / assignment / f"{assignment}.ipynb", 4)
    release = nbformat.read(REPO / "exercises" / assignment / f"{assignment}.ipynb", 4)
    answers = _answers(source)
    for i in range(students):
        folder = root / "submitted" / f"learner{i:03d}" / assignment
        folder.mkdir(parents=True)
        nbformat.write(_learner(release, answers, i % 4), folder / f"{assignment}.ipynb")
    return root


def plain_nbgrader(root: Path, assignment: str) -> float:
    # the peer as nbgrader runs it, unsandboxed: the course's config refuses that unless told
    env = {**os.environ, "PATH": nbglue.executable_path(), formgrader.PLAIN_AUTOGRADE: "1"}
    for args in (["generate_assignment", assignment, "--force"], ["autograde", assignment]):
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "nbgrader", *args],
            cwd=root,
            env=env,
            check=True,
            capture_output=True,
        )
    return time.perf_counter() - start  # the autograde step only


def ours(root: Path, assignment: str, workers: int, in_kernel: bool) -> tuple[float, float]:
    start = time.perf_counter()
    reports, _, _ = grade(
        Options(
            assignment,
            root,
            workers=workers,
            timeout_s=300,
            cell_timeout_s=30,
            memory_mb=2048,
            in_kernel=in_kernel,
        )
    )
    wall = time.perf_counter() - start
    return wall, statistics.median(r.seconds for r in reports)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=40)
    parser.add_argument(
        "--in-kernel",
        action="store_true",
        help="also time --workers 2 with nbgrader's in-kernel pass",
    )
    parser.add_argument("--assignment", default="ch01_bigrams", help="a folder of solutions/")
    args = parser.parse_args()
    n, assignment = args.students, args.assignment
    runs = [("--workers 1", 1, False), ("--workers 2", 2, False)]
    runs += [("--workers 2 --in-kernel", 2, True)] if args.in_kernel else []
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        first = plain_nbgrader(make_course(scratch / "nbgrader", n, assignment), assignment)
        timed = [
            (label, *ours(make_course(scratch / f"run{i}", n, assignment), assignment, w, k))
            for i, (label, w, k) in enumerate(runs)
        ]
        last = plain_nbgrader(make_course(scratch / "nbgrader-again", n, assignment), assignment)
    peer = (first + last) / 2
    print(f"{n} submissions of {assignment}, seconds per notebook (wall / students):")
    print(
        f"  {'nbgrader autograde (no limits, in-kernel)':<42} {peer / n:6.2f}   "
        f"first {first / n:.2f}, last {last / n:.2f}"
    )
    for label, wall, median in timed:
        print(
            f"  {'mini-llm grade ' + label:<42} {wall / n:6.2f}   median per student "
            f"{median:5.2f}   throughput vs nbgrader {peer / wall:4.2f}x"
        )


if __name__ == "__main__":
    main()
