"""``mini-llm grade``: every student of an assignment, in parallel, under limits, each in an
OS sandbox (:mod:`.jail`).

1. Check that the sandbox can be made (or that the cohort was declared trusted); import the
   modules the tests use.
2. Replay the reference solution once, while nbgrader registers the assignment in the
   gradebook beside it: test cells the reference fails in the replay cannot be judged there
   (they share objects with the answer code) and are settled by nbgrader, flagged.
3. Grade each student in a worker process: the trusted replay (:mod:`.verify`) and, on
   request or when step 2 found such cells, nbgrader's in-kernel autograde in a private copy
   of the course (otherwise shown, never recorded). Student code runs only inside the
   sandbox, which sees no course file, so the course is exactly as it was when the last
   sandbox is gone. Each student's trusted scores are recorded (nbgrader's gradebook API) and
   the learner-safe graded notebook written as soon as the worker hands them back.
4. Write the instructor's JSON report, run nbgrader's feedback and CSV export in fresh
   processes side by side, print the summary.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import multiprocessing
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from tqdm import tqdm

from mini_llm.grading import feedback, limits, manual, nbglue, withhold
from mini_llm.grading.jail import Jail, check
from mini_llm.grading.notebook import (
    Assignment,
    Submission,
    load_assignment,
    printable,
    read_submission,
)
from mini_llm.grading.verify import Verification, verify
from mini_llm.learner.registry import parts_of


@dataclass
class Options:
    assignment: str
    course_dir: Path
    workers: int = 2
    timeout_s: float = 300.0
    cell_timeout_s: float = limits.CELL_CPU_S
    memory_mb: int = 2048
    students: list[str] = field(default_factory=list)
    in_kernel: bool = False  # also run nbgrader's own autograde, for comparison (slower)
    trusted_cohort: bool = False  # no OS sandbox: only for code you trust


@dataclass
class StudentReport:
    student: str
    submission: Submission
    verification: Verification
    in_kernel: nbglue.InKernel
    seconds: float
    problems: list[str] = field(default_factory=list)
    totals: manual.Totals | None = None  # from the gradebook once recorded: manual and pending too

    @property
    def score(self) -> float:
        return self.verification.auto_score


@dataclass
class _Context:
    """What every worker needs; inherited by the forked workers, never sent."""

    options: Options
    coursedir: object
    assignment: Assignment
    jail: Jail
    clean_gradebook: Path | None  # the assignment's cells only, for the in-kernel run
    released: dict[str, str]
    release_files: list[Path]


_CONTEXT: _Context | None = None
NOT_GRADED = "was NOT graded (nothing recorded)"
EXCHANGE_FILES = ("timestamp.txt", "submission_secret.txt")
"""what nbgrader's submit puts beside the notebook: the time handed in, and the secret that
release_feedback names the learner's feedback by (so it follows the grade into feedback/)"""


def _grade_one(student: str) -> StudentReport | str:
    """Runs in a worker: the trusted replay (and the in-kernel run) of one student; on any
    failure of the grader, a line saying so instead (the run goes on)."""
    try:
        return _grade(student)
    except BaseException as err:  # noqa: BLE001 - one student's failure must not stop 200
        return f"{student} {NOT_GRADED}: {type(err).__name__}: {err}"[:2000]


def _grade(student: str) -> StudentReport:
    context = _CONTEXT
    options, assignment = context.options, context.assignment
    limit = limits.Limits(memory_mb=options.memory_mb, cpu_s=int(options.timeout_s) + 30)
    submitted = nbglue.folder(context.coursedir, "submitted", student, assignment.name)
    notebook_name = f"{assignment.notebook}.ipynb"
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"grade-{student}-") as scratch:
        scratch = Path(scratch)
        in_kernel = nbglue.InKernel()
        submission = read_submission(submitted / notebook_name, assignment, context.released)
        if options.in_kernel and not submission.refused:
            (scratch / "kernel").mkdir()
            source = nbglue.folder(context.coursedir, "source", assignment.name)
            in_kernel = nbglue.autograde_in_kernel(
                assignment,
                student,
                submitted,
                context.clean_gradebook,
                source,
                scratch / "kernel",
                limit,
                context.jail,
                options.timeout_s,
                options.cell_timeout_s,
            )
        (scratch / "replay").mkdir()
        verification = verify(
            assignment,
            submission,
            scratch / "replay",
            limit,
            options.timeout_s,
            options.cell_timeout_s,
            context.release_files,
            context.jail,
        )
    extra = sorted(
        str(p.relative_to(submitted))
        for p in submitted.rglob("*")
        if p.is_file() and p.name not in (notebook_name, *EXCHANGE_FILES)
    )
    report = StudentReport(student, submission, verification, in_kernel, time.monotonic() - start)
    report.problems = submission.problems + verification.problems
    if extra:
        report.problems.append(
            "extra files ignored: " + ", ".join(extra[:5]) + (" ..." if len(extra) > 5 else "")
        )
    if in_kernel.error:
        report.problems.append(f"in-kernel run: {in_kernel.error}")
    parts = {p.name: p.reference for p in parts_of(assignment.name)}
    copies = withhold.reference_copies(parts, submission.answers)
    if copies:
        report.problems.append(
            f"the answer to {', '.join(copies)} is the reference's own code (the same syntax "
            "tree, names aside): for a person to review"
        )
    return report


def _preload(assignment: Assignment) -> None:
    """Import what the instructor's cells import, before any submission can touch it."""
    for cell in assignment.cells:
        if cell.kind not in ("setup", "test"):
            continue
        for node in ast.walk(ast.parse(cell.source)):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and node.module
                else []
            )
            for module in modules:
                importlib.import_module(module)


STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")
"""The student ids that are graded: a name of this alphabet is text everywhere it goes (a
terminal, formgrader's pages, a CSV, a path), so none can become markup or control codes."""


def _students(options: Options, coursedir, run_problems: list[str]) -> list[str]:
    """The students with a submission of the assignment; folders that are not one (a link,
    a name outside the safe alphabet) are left out, each with a line in ``run_problems``."""
    submitted = Path(coursedir.root, coursedir.submitted_directory)
    if not submitted.is_dir():
        raise nbglue.GradingError(f"no submissions folder: {submitted}")
    everyone = []
    for folder in sorted(submitted.iterdir()):
        name = folder.name
        if not (folder / options.assignment).is_dir():
            continue
        if not STUDENT_ID.fullmatch(name):
            run_problems.append(
                f"the submission folder {printable(name)} was not graded: a student id is "
                "letters, digits and . _ @ + - (at most 100), starting with a letter or digit"
            )
        elif folder.is_symlink() or (folder / options.assignment).is_symlink():
            run_problems.append(
                f"the submission of {name} was not graded: its folder is a symbolic link, "
                "which could point at anything the grader can read"
            )
        else:
            everyone.append(name)
    if options.students:
        unknown = sorted(set(options.students) - set(everyone))
        if unknown:
            raise nbglue.GradingError("no submission of " + ", ".join(unknown))
        return [s for s in everyone if s in options.students]
    if not everyone:
        raise nbglue.GradingError(
            f"nobody has submitted {options.assignment} under {submitted}"
            + "".join(f"; {problem}" for problem in run_problems)
        )
    return everyone


def grade(options: Options) -> tuple[list[StudentReport], list[str], Assignment]:
    """Grade every student: the reports, the problems of the run as a whole, the assignment."""
    global _CONTEXT
    # os.environ (PATH included) is never changed here: the nbgrader subprocesses get the
    # environment's bin folder on their own PATH (nbglue.executable_path), for `alembic`
    jail = check(options.trusted_cohort)
    coursedir = nbglue.course(options.course_dir)
    nbglue.check_gradebook(coursedir)
    source = nbglue.folder(coursedir, "source", options.assignment)
    if not source.is_dir():
        known = sorted(p.name for p in source.parent.glob("*/") if p.is_dir())
        raise nbglue.GradingError(
            f"no assignment {options.assignment!r}: {source} is missing; "
            + (f"the course has {', '.join(known)}" if known else "the course has none")
        )
    notebooks = sorted(source.glob("*.ipynb"))
    if len(notebooks) != 1:
        raise nbglue.GradingError(
            f"expected one source notebook in {source}, found {len(notebooks)}"
        )
    refused: list[str] = []
    students = _students(options, coursedir, refused)
    assignment = load_assignment(notebooks[0])
    _preload(assignment)
    with tempfile.TemporaryDirectory(prefix="mini-llm-grade-") as scratch:
        scratch = Path(scratch)
        # nbgrader registers the assignment (and makes the in-kernel runs' clean gradebook)
        # in processes of its own while the reference solution is replayed here
        registering = nbglue.register_assignment(coursedir, options.assignment, scratch)
        cleaning = (
            nbglue.clean_gradebook(coursedir, options.assignment, scratch / "clean.db")
            if options.in_kernel
            else None
        )
        source_files = sorted(p for p in source.iterdir() if p.is_file() and p.suffix != ".ipynb")
        unverifiable = _unverifiable_cells(assignment, options, scratch, source_files, jail)
        registering.wait(timeout=600)
        release = scratch / "release" / options.assignment
        released_nb = nbformat.read(release / notebooks[0].name, as_version=4)
        released = {
            c.metadata["nbgrader"]["grade_id"]: c.source
            for c in released_nb.cells
            if c.metadata.get("nbgrader", {}).get("grade_id")
        }
        (scratch / "data").mkdir()
        for path in release.iterdir():
            if path.is_file() and path.suffix != ".ipynb":
                shutil.copy(path, scratch / "data")
        release_files = sorted((scratch / "data").iterdir())
        if unverifiable and cleaning is None:  # nbgrader's in-kernel run is all these cells have
            options = dataclasses.replace(options, in_kernel=True)
            cleaning = nbglue.clean_gradebook(coursedir, options.assignment, scratch / "clean.db")
        if cleaning is not None:
            cleaning.wait(timeout=600)
        clean = scratch / "clean.db" if cleaning is not None else None
        _CONTEXT = _Context(options, coursedir, assignment, jail, clean, released, release_files)

        def finish(report: StudentReport) -> None:  # while the others are still being graded
            _settle(report, unverifiable)
            _write_results(coursedir, assignment, notebooks[0], report, released, unverifiable)

        reports, run_problems = _run_pool(students, options.workers, finish)
        run_problems = refused + run_problems
    if unverifiable:
        run_problems.append(
            "the trusted replay cannot check " + ", ".join(sorted(unverifiable)) + " (the "
            "reference solution fails them there, e.g. objects passed between test and answer): "
            "nbgrader's in-kernel result (run for this reason) is used for them and flagged for "
            "manual review"
        )
    if not jail.enabled:
        run_problems.append(
            "graded WITHOUT the OS sandbox (--trusted-cohort): student code "
            "could read and write what the grader can"
        )
    totals = recorded_totals(coursedir, options.assignment, [r.student for r in reports])
    for report in reports:
        report.totals = totals[report.student]
    _write_report(
        Path(coursedir.root) / f"grading-{options.assignment}.json",
        reports,
        run_problems,
        keep_others=bool(options.students),
    )
    csv_path = Path(coursedir.root) / f"grades-{options.assignment}.csv"
    nbglue.feedback_and_export(
        coursedir, options.assignment, [r.student for r in reports], csv_path, options.workers
    )
    return reports, run_problems, assignment


def recorded_totals(coursedir, assignment: str, students: list[str]) -> dict[str, manual.Totals]:
    """Each student's points as the gradebook holds them: automatic, manual, pending."""
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        return {s: manual.submission_totals(gb, assignment, s) for s in students}


def publish(course_dir: Path, assignment: str) -> dict[str, manual.Totals]:
    """After written answers were graded (formgrader): the feedback and the CSV again, from
    the gradebook as it is now, for every student graded so far. No student code runs."""
    coursedir = nbglue.course(course_dir)
    nbglue.check_gradebook(coursedir, must_exist=True)
    graded = nbglue.folder(coursedir, "autograded")
    students = sorted(p.parent.name for p in graded.glob(f"*/{assignment}") if p.is_dir())
    if not students:
        raise nbglue.GradingError(f"nothing graded yet for {assignment}: run mini-llm grade first")
    totals = recorded_totals(coursedir, assignment, students)
    csv_path = Path(coursedir.root) / f"grades-{assignment}.csv"
    nbglue.feedback_and_export(coursedir, assignment, students, csv_path, parts=2)
    return totals


def _run_pool(
    students: list[str], workers: int, finish: Callable[[StudentReport], None]
) -> tuple[list[StudentReport], list[str]]:
    """Reports of the students graded (each given to ``finish`` as soon as it is), and a line
    for each the grader itself failed on.

    A grading process that dies (the machine's OOM killer, say) takes the pool down with the
    students still queued in it: they are graded again in a fresh pool, and if that one dies
    too, each alone, so that only a student whose own grading kills its process is not
    graded."""
    reports, failures = [], []
    context = multiprocessing.get_context("fork")
    queued, rounds = list(students), 0
    with tqdm(total=len(students), desc="grading", unit="student") as bar:
        while queued:
            alone = rounds >= 2
            batches = [[s] for s in queued] if alone else [queued]
            queued, rounds = [], rounds + 1
            for batch in batches:
                size = 1 if alone else max(1, workers)
                with ProcessPoolExecutor(max_workers=size, mp_context=context) as pool:
                    futures = {pool.submit(_grade_one, s): s for s in batch}
                    for future in as_completed(futures):
                        student = futures[future]
                        try:
                            outcome = future.result()
                        except BrokenProcessPool as err:
                            if not alone:
                                queued.append(student)
                                continue
                            outcome = f"{student} {NOT_GRADED}: its grading process died ({err})"
                        except Exception as err:  # noqa: BLE001 - one student, not the run
                            outcome = f"{student} {NOT_GRADED}: {type(err).__name__}: {err}"
                        if isinstance(outcome, StudentReport):
                            finish(outcome)
                            reports.append(outcome)
                        else:
                            failures.append(outcome)
                        bar.update()
    return sorted(reports, key=lambda r: r.student), failures


def _unverifiable_cells(
    assignment: Assignment, options: Options, scratch: Path, files: list[Path], jail: Jail
) -> set[str]:
    """Test cells the trusted replay cannot judge: those the reference solution fails there.

    This is a property of the assignment, decided before any submission is seen, so a
    submission cannot choose to fall back to the in-kernel result it controls."""
    reference = Submission(
        answers={c.grade_id: [c.source] for c in assignment.cells if c.kind in ("answer", "manual")}
    )
    (scratch / "reference").mkdir()
    slack = 4  # trusted code: a busy machine must not make a slow reference look unverifiable
    limit = limits.Limits(memory_mb=options.memory_mb, cpu_s=int(options.timeout_s) * slack)
    outcome = verify(
        assignment,
        reference,
        scratch / "reference",
        limit,
        options.timeout_s * slack,
        options.cell_timeout_s * slack,
        files,
        jail,
    )
    return {c.grade_id for c in outcome.cells if c.kind == "test" and not c.passed}


def _settle(report: StudentReport, unverifiable: set[str]) -> None:
    """Final scores: cells the replay cannot judge take nbgrader's in-kernel score (flagged);
    then the failed tests, and whether nbgrader's own run claimed more than the trusted one."""
    fallback = [c for c in report.verification.cells if c.grade_id in unverifiable]
    for cell in fallback:
        cell.points = min(report.in_kernel.scores.get(cell.grade_id, 0.0), cell.max_points)
        cell.passed = None
        cell.message = "graded by nbgrader's in-kernel run only (flagged for review)"
        cell.learner_message = (
            "This check was graded by running your notebook; a person will review it."
        )
    failed = [
        c.grade_id for c in report.verification.cells if c.kind == "test" and c.passed is False
    ]
    if failed:
        report.problems.append("failed: " + ", ".join(failed))
    if fallback:
        report.problems.append(
            "in-kernel score used, flagged for review: " + ", ".join(c.grade_id for c in fallback)
        )
    in_kernel, trusted = report.in_kernel, report.verification.auto_score
    if in_kernel.scores and in_kernel.auto_score > trusted:
        report.problems.append(
            f"the in-kernel run claimed {in_kernel.auto_score:g} points but the trusted check "
            f"gives {trusted:g}: the notebook's own tests were fooled"
        )
    elif in_kernel.scores and in_kernel.auto_score < trusted:
        report.problems.append(
            f"the trusted check gives {trusted:g} points but the in-kernel run only "
            f"{in_kernel.auto_score:g}: the replay did not see what the notebook did "
            "(review this student)"
        )


def _write_report(
    path: Path, reports: list[StudentReport], run_problems: list[str], keep_others: bool
) -> None:
    """For the instructor: every check's full message (the learner's feedback is redacted).
    ``keep_others``: a run for some students (``--student``) keeps the others' entries."""
    earlier = manual.last_report(path) if keep_others else {}
    students = earlier | {
        r.student: {
            "score": r.score,
            "manual_score": r.totals.manual if r.totals else None,
            "pending_points": r.totals.pending if r.totals else None,
            "in_kernel_score": r.in_kernel.auto_score if r.in_kernel.scores else None,
            "empty": r.submission.empty,
            "problems": r.problems,
            "cells": [
                {
                    "grade_id": c.grade_id,
                    "kind": c.kind,
                    "points": c.points,
                    "max_points": c.max_points,
                    "passed": c.passed,
                    "message": c.message,
                }
                for c in r.verification.cells
            ],
        }
        for r in reports
    }
    path.write_text(json.dumps({"students": students, "run_problems": run_problems}, indent=1))


def _write_results(
    coursedir,
    assignment: Assignment,
    source_notebook: Path,
    report: StudentReport,
    released: dict[str, str],
    review: set[str],
) -> None:
    submitted = nbglue.folder(coursedir, "submitted", report.student, assignment.name)
    stamp = submitted / "timestamp.txt"
    stamp = stamp if stamp.is_file() and not stamp.is_symlink() else None
    when = nbglue.timestamp(stamp.read_bytes() if stamp else None)
    nbglue.record(
        coursedir,
        assignment,
        report.student,
        when,
        report.verification,
        report.submission.answers,
        released,
        review,
    )
    source_nb = nbformat.read(source_notebook, as_version=4)
    graded = feedback.graded_notebook(
        source_nb, assignment, report.submission.answers, report.verification, report.problems
    )
    target = nbglue.folder(coursedir, "autograded", report.student, assignment.name)
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    nbformat.write(graded, target / source_notebook.name)
    for name in EXCHANGE_FILES:
        kept = submitted / name
        if kept.is_file() and not kept.is_symlink():
            shutil.copy(kept, target / name)
