"""``mini-llm grade``: every student of an assignment, in parallel, under limits.

1. Read, before any student code runs: the source notebook, the gradebook, the assignment's
   folders and every submission (:mod:`.integrity`); import the modules the tests use, so a
   submission that rewrites them on disk cannot change the checking code of this run.
2. Replay the reference solution once: test cells it fails in the replay cannot be judged
   there (they share objects with the answer code) and are settled by nbgrader, flagged.
3. Grade each student in a worker process: nbgrader's in-kernel autograde in a private copy of
   the course (shown, never recorded), then the trusted replay (:mod:`.verify`). A student
   whose sandbox was killed from outside is graded again, alone, at the end.
4. When all student processes are gone: undo any change they made to the course, record the
   trusted scores (nbgrader's gradebook API), write the learner-safe graded notebooks and the
   instructor's JSON report, run nbgrader's feedback and CSV export, print the summary.
"""

from __future__ import annotations

import ast
import importlib
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from tqdm import tqdm

from mini_llm.grading import feedback, integrity, limits, nbglue
from mini_llm.grading.notebook import Assignment, Submission, load_assignment, read_submission
from mini_llm.grading.verify import Verification, verify


@dataclass
class Options:
    assignment: str
    course_dir: Path
    workers: int = 2
    timeout_s: float = 300.0
    cell_timeout_s: float = 30.0
    memory_mb: int = 2048
    students: list[str] = field(default_factory=list)


@dataclass
class StudentReport:
    student: str
    submission: Submission
    verification: Verification
    in_kernel: nbglue.InKernel
    window: tuple[float, float]
    problems: list[str] = field(default_factory=list)

    @property
    def score(self) -> float:
        return self.verification.auto_score


@dataclass
class _Context:
    """What every worker needs; inherited by the forked workers, never sent."""

    options: Options
    coursedir: object
    assignment: Assignment
    snapshot: integrity.Snapshot
    gradebook: bytes
    released: dict[str, str]
    release_files: list[Path]


_CONTEXT: _Context | None = None
NOT_GRADED = "was NOT graded (nothing recorded)"


def _grade_one(student: str) -> StudentReport:
    """Runs in a worker: the in-kernel run and the trusted replay of one student."""
    context = _CONTEXT
    options, assignment = context.options, context.assignment
    limit = limits.Limits(memory_mb=options.memory_mb, cpu_s=int(options.timeout_s) + 30)
    submitted = nbglue.folder(context.coursedir, "submitted", student, assignment.name)
    files = context.snapshot.under(submitted)
    source = nbglue.folder(context.coursedir, "source", assignment.name)
    source_files = {k: v for k, v in context.snapshot.under(source).items()
                    if not k.endswith(".ipynb")}
    start = time.time()
    with tempfile.TemporaryDirectory(prefix=f"grade-{student}-") as scratch:
        scratch = Path(scratch)
        (scratch / "kernel").mkdir()
        in_kernel = nbglue.autograde_in_kernel(
            context.coursedir, assignment, student, files, context.gradebook, source_files,
            scratch / "kernel", limit, options.timeout_s, options.cell_timeout_s)
        copy = scratch / "submission" / f"{assignment.notebook}.ipynb"
        copy.parent.mkdir()
        notebook_name = f"{assignment.notebook}.ipynb"
        if notebook_name in files:
            copy.write_bytes(files[notebook_name])
        submission = read_submission(copy, assignment, context.released)
        (scratch / "replay").mkdir()
        verification = verify(assignment, submission, scratch / "replay", limit,
                              options.timeout_s, options.cell_timeout_s, context.release_files)
    extra = sorted(set(files) - {notebook_name, "timestamp.txt"})
    report = StudentReport(student, submission, verification, in_kernel, (start, time.time()))
    report.problems = submission.problems + verification.problems
    if extra:
        report.problems.append("extra files ignored: " + ", ".join(extra[:5])
                               + (" ..." if len(extra) > 5 else ""))
    if in_kernel.error:
        report.problems.append(f"in-kernel run: {in_kernel.error}")
    return report


def _preload(assignment: Assignment) -> None:
    """Import what the instructor's cells import, before any submission can touch it."""
    for cell in assignment.cells:
        if cell.kind not in ("setup", "test"):
            continue
        for node in ast.walk(ast.parse(cell.source)):
            modules = ([a.name for a in node.names] if isinstance(node, ast.Import)
                       else [node.module] if isinstance(node, ast.ImportFrom) and node.module
                       else [])
            for module in modules:
                importlib.import_module(module)


def _students(options: Options, coursedir) -> list[str]:
    submitted = Path(coursedir.root, coursedir.submitted_directory)
    if not submitted.is_dir():
        raise nbglue.GradingError(f"no submissions folder: {submitted}")
    everyone = sorted(p.name for p in submitted.iterdir()
                      if p.is_dir() and (p / options.assignment).is_dir())
    if options.students:
        unknown = sorted(set(options.students) - set(everyone))
        if unknown:
            raise nbglue.GradingError("no submission of " + ", ".join(unknown))
        return [s for s in everyone if s in options.students]
    if not everyone:
        raise nbglue.GradingError(f"nobody has submitted {options.assignment} under {submitted}")
    return everyone


def grade(options: Options) -> tuple[list[StudentReport], list[str], Assignment]:
    """Grade every student: the reports, the problems of the run as a whole, the assignment."""
    path_before = os.environ.get("PATH")
    os.environ["PATH"] = nbglue.executable_path()  # nbgrader's gradebook runs `alembic`
    try:
        return _grade(options)
    finally:  # the caller's PATH back, as it was
        if path_before is None:
            del os.environ["PATH"]
        else:
            os.environ["PATH"] = path_before


def _grade(options: Options) -> tuple[list[StudentReport], list[str], Assignment]:
    global _CONTEXT
    coursedir = nbglue.course(options.course_dir)
    source = nbglue.folder(coursedir, "source", options.assignment)
    if not source.is_dir():
        raise nbglue.GradingError(f"no assignment {options.assignment!r}: {source} is missing")
    notebooks = sorted(source.glob("*.ipynb"))
    if len(notebooks) != 1:
        raise nbglue.GradingError(f"expected one source notebook in {source}, "
                                  f"found {len(notebooks)}")
    students = _students(options, coursedir)
    assignment = load_assignment(notebooks[0])
    _preload(assignment)
    gradebook_path = Path(coursedir.root) / "gradebook.db"
    with tempfile.TemporaryDirectory(prefix="mini-llm-grade-") as scratch:
        release = nbglue.register_assignment(coursedir, options.assignment, Path(scratch))
        released_nb = nbformat.read(release / notebooks[0].name, as_version=4)
        released = {c.metadata["nbgrader"]["grade_id"]: c.source for c in released_nb.cells
                    if c.metadata.get("nbgrader", {}).get("grade_id")}
        release_files = [Path(scratch) / "data" / p.name for p in release.iterdir()
                         if p.is_file() and p.suffix != ".ipynb"]
        (Path(scratch) / "data").mkdir()
        for path in release.iterdir():
            if path.is_file() and path.suffix != ".ipynb":
                shutil.copy(path, Path(scratch) / "data")
        roots = [source, nbglue.folder(coursedir, "release", options.assignment)]
        roots += [nbglue.folder(coursedir, kind, s, options.assignment)
                  for kind in ("submitted", "autograded", "feedback") for s in students]
        snapshot = integrity.Snapshot.take(roots, [gradebook_path])
        _CONTEXT = _Context(options, coursedir, assignment, snapshot,
                            snapshot.files[gradebook_path], released, release_files)
        unverifiable = _unverifiable_cells(assignment, options, Path(scratch))
        reports, failures = _run_pool(students, options.workers)
        reports = _regrade_the_killed(reports)
    for report in reports:
        _settle(report, unverifiable)
    run_problems = failures + _undo_changes(snapshot, reports)
    if unverifiable:
        run_problems.append(
            "the trusted replay cannot check " + ", ".join(sorted(unverifiable)) + " (the "
            "reference solution fails them there, e.g. objects passed between test and answer): "
            "nbgrader's in-kernel result is used for them and flagged for manual review")
    for report in reports:
        _write_results(coursedir, assignment, notebooks[0], report, snapshot, released,
                       unverifiable)
    _write_report(Path(coursedir.root) / f"grading-{options.assignment}.json", reports,
                  run_problems)
    csv_path = Path(coursedir.root) / f"grades-{options.assignment}.csv"
    nbglue.feedback_and_export(coursedir, options.assignment, [r.student for r in reports],
                               csv_path)
    return reports, run_problems, assignment


def _run_pool(students: list[str], workers: int) -> tuple[list[StudentReport], list[str]]:
    """Reports of the students graded, and a line for each the grader itself failed on."""
    reports, failures = [], []
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=max(1, workers), mp_context=context) as pool, \
            tqdm(total=len(students), desc="grading", unit="student") as bar:
        futures = {pool.submit(_grade_one, s): s for s in students}
        for future in as_completed(futures):
            try:
                reports.append(future.result())
            except Exception as err:  # noqa: BLE001 - one student's failure must not stop 200
                failures.append(f"{futures[future]} {NOT_GRADED}: {type(err).__name__}: {err}")
            bar.update()
    return sorted(reports, key=lambda r: r.student), failures


def _unverifiable_cells(assignment: Assignment, options: Options, scratch: Path) -> set[str]:
    """Test cells the trusted replay cannot judge: those the reference solution fails there.

    This is a property of the assignment, decided before any submission is seen, so a
    submission cannot choose to fall back to the in-kernel result it controls."""
    reference = Submission(answers={c.grade_id: [c.source] for c in assignment.cells
                                    if c.kind in ("answer", "manual")})
    (scratch / "reference").mkdir()
    slack = 4  # trusted code: a busy machine must not make a slow reference look unverifiable
    limit = limits.Limits(memory_mb=options.memory_mb, cpu_s=int(options.timeout_s) * slack)
    outcome = verify(assignment, reference, scratch / "reference", limit,
                     options.timeout_s * slack, options.cell_timeout_s * slack, [])
    return {c.grade_id for c in outcome.cells if c.kind == "test" and not c.passed}


def _settle(report: StudentReport, unverifiable: set[str]) -> None:
    """Final scores: cells the replay cannot judge take nbgrader's in-kernel score (flagged);
    then the failed tests, and whether nbgrader's own run claimed more than the trusted one."""
    fallback = [c for c in report.verification.cells if c.grade_id in unverifiable]
    for cell in fallback:
        cell.points = min(report.in_kernel.scores.get(cell.grade_id, 0.0), cell.max_points)
        cell.passed = None
        cell.message = "graded by nbgrader's in-kernel run only (flagged for review)"
        cell.learner_message = ("This check was graded by running your notebook; "
                                "a person will review it.")
    failed = [c.grade_id for c in report.verification.cells
              if c.kind == "test" and c.passed is False]
    if failed:
        report.problems.append("failed: " + ", ".join(failed))
    if fallback:
        report.problems.append("in-kernel score used, flagged for review: "
                               + ", ".join(c.grade_id for c in fallback))
    in_kernel, trusted = report.in_kernel, report.verification.auto_score
    if in_kernel.scores and in_kernel.auto_score > trusted:
        report.problems.append(
            f"the in-kernel run claimed {in_kernel.auto_score:g} points but the trusted check "
            f"gives {trusted:g}: the notebook's own tests were fooled")


def _regrade_the_killed(reports: list[StudentReport]) -> list[StudentReport]:
    """Grade again, alone, each student whose sandbox was killed by a signal the grader did
    not send: another submission running at the same time may have done it."""
    killed = [r.student for r in reports if r.verification.killed_from_outside]
    if not killed:
        return reports
    again, failures = _run_pool(killed, workers=1)
    redone = {r.student: r for r in again}
    for report in again:
        report.problems.append("its grading process was killed from outside; graded again alone")
    for line in failures:  # keep the first result rather than lose the student
        tqdm.write(f"regrading failed: {line}")
    return [redone.get(r.student, r) for r in reports]


def _undo_changes(snapshot: integrity.Snapshot, reports: list[StudentReport]) -> list[str]:
    found = integrity.changes(snapshot)
    integrity.restore(snapshot, found)
    windows = {r.student: r.window for r in reports}
    problems = []
    for change in found:
        who = integrity.suspects(change, windows)
        problems.append(f"{change.path} was {change.what} by student code during grading and "
                        f"has been restored (code running then: {', '.join(who)})")
        for report in reports:
            if report.student in who:
                report.problems.append(f"student code {change.what} {change.path.name} "
                                       "(restored)")
    return problems


def _write_report(path: Path, reports: list[StudentReport], run_problems: list[str]) -> None:
    """For the instructor: every check's full message (the learner's feedback is redacted)."""
    students = {r.student: {
        "score": r.score, "in_kernel_score": r.in_kernel.auto_score if r.in_kernel.scores
        else None, "problems": r.problems,
        "cells": [{"grade_id": c.grade_id, "kind": c.kind, "points": c.points,
                   "max_points": c.max_points, "passed": c.passed, "message": c.message}
                  for c in r.verification.cells]} for r in reports}
    path.write_text(json.dumps({"students": students, "run_problems": run_problems}, indent=1))


def _write_results(coursedir, assignment: Assignment, source_notebook: Path,
                   report: StudentReport, snapshot: integrity.Snapshot,
                   released: dict[str, str], review: set[str]) -> None:
    submitted = nbglue.folder(coursedir, "submitted", report.student, assignment.name)
    when = nbglue.timestamp(snapshot.files.get(submitted / "timestamp.txt"))
    nbglue.record(coursedir, assignment, report.student, when, report.verification,
                  report.submission.answers, released, review)
    source_nb = nbformat.reads(snapshot.files[source_notebook].decode(), as_version=4)
    graded = feedback.graded_notebook(source_nb, assignment, report.submission.answers,
                                      report.verification, report.problems)
    target = nbglue.folder(coursedir, "autograded", report.student, assignment.name)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    nbformat.write(graded, target / source_notebook.name)
    if submitted / "timestamp.txt" in snapshot.files:
        (target / "timestamp.txt").write_bytes(snapshot.files[submitted / "timestamp.txt"])
