"""The ``grade`` command: arguments, the run, and the summary table.

nbgrader and the grading machinery are imported only when the command runs, so that
``mini-llm train`` works without the ``grading`` extra installed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mini_llm.grading.limits import CELL_CPU_S
from mini_llm.grading.notebook import printable

if TYPE_CHECKING:
    from mini_llm.grading.runner import StudentReport

HELP = "autograde all submissions of an assignment, under limits"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("assignment", help="assignment name, e.g. ch01_bigrams")
    parser.add_argument(
        "--course-dir",
        type=Path,
        default=Path("."),
        help="nbgrader course folder (default: the current folder)",
    )
    parser.add_argument("--workers", type=int, default=2, help="students graded at once")
    parser.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        help="wall-clock seconds per notebook run (default 300)",
    )
    parser.add_argument(
        "--cell-timeout",
        type=float,
        default=CELL_CPU_S,
        help="CPU seconds per cell before it is interrupted, or 4 times that "
        f"on the clock (default {CELL_CPU_S:g})",
    )
    parser.add_argument(
        "--memory-mb",
        type=int,
        default=2048,
        help="address-space limit of each student process (default 2048)",
    )
    parser.add_argument(
        "--student", action="append", default=[], help="grade only this student (repeatable)"
    )
    parser.add_argument(
        "--in-kernel",
        action="store_true",
        help="also run nbgrader's own autograde, to compare (shown, never recorded; slower)",
    )
    parser.add_argument(
        "--feedback-only",
        action="store_true",
        help="grade nothing: write the feedback and the CSV again from the gradebook "
        "(after written answers were graded in formgrader) and print the totals",
    )
    parser.add_argument(
        "--trusted-cohort",
        action="store_true",
        help="grade without the OS sandbox (bubblewrap), where it cannot be "
        "made; only for submissions you trust",
    )


def summary(reports: list[StudentReport], run_problems: list[str]) -> str:
    """One line per student: the total as recorded (written answers nobody has graded yet
    shown as pending), nbgrader's in-kernel claim, and the problems found."""
    width = max([len("student")] + [len(r.student) for r in reports])
    score_width = max([len("score")] + [len(r.totals.text()) for r in reports])
    lines = [f"{'student':<{width}}  {'score':>{score_width}}  {'in-kernel':>9}  problems"]
    for r in reports:
        in_kernel = f"{r.in_kernel.auto_score:g}" if r.in_kernel.scores else "-"
        problems = printable("; ".join(r.problems) or "-")
        lines.append(
            f"{r.student:<{width}}  {r.totals.text():>{score_width}}  {in_kernel:>9}  {problems}"
        )
    lines += [f"run: {printable(p)}" for p in run_problems]
    if any(r.totals.pending for r in reports):
        lines.append(PENDING_HINT)
    return "\n".join(lines)


PENDING_HINT = (
    "pending: written answers wait for a person. Grade them in formgrader (make lab, "
    "Formgrader > Manual Grading), then `mini-llm grade ASSIGNMENT --feedback-only`."
)


def _publish(args: argparse.Namespace) -> None:
    from mini_llm.grading.runner import publish

    totals = publish(args.course_dir, args.assignment)
    width = max(len("student"), *map(len, totals))
    print(f"{'student':<{width}}  score")
    print("\n".join(f"{s:<{width}}  {t.text()}" for s, t in totals.items()))
    if any(t.pending for t in totals.values()):
        print(PENDING_HINT)
    print(f"feedback under feedback/; grades: grades-{args.assignment}.csv")


def run(args: argparse.Namespace) -> None:
    """Grade, print the summary. The exit status is 1 where a submission was not graded from
    its notebook: the grader failed on it, or the notebook was missing, unreadable or refused
    (recorded as empty, so the gradebook and the CSV hold it)."""
    from mini_llm.grading.runner import NOT_GRADED, Options, grade

    if args.feedback_only:
        return _publish(args)
    if args.workers < 1 or args.timeout <= 0 or args.cell_timeout <= 0 or args.memory_mb < 256:
        raise ValueError(
            "--workers >= 1, --timeout > 0, --cell-timeout > 0 and --memory-mb >= 256 are required"
        )
    options = Options(
        args.assignment,
        args.course_dir,
        args.workers,
        args.timeout,
        args.cell_timeout,
        args.memory_mb,
        args.student,
        args.in_kernel,
        args.trusted_cohort,
    )
    reports, run_problems, _ = grade(options)
    print(summary(reports, run_problems))
    print(
        f"gradebook: {args.course_dir / 'gradebook.db'}; feedback under feedback/; "
        f"grades: grades-{args.assignment}.csv; every check's message: "
        f"grading-{args.assignment}.json"
    )
    empty = [r.student for r in reports if r.submission.empty]
    if empty:
        print(
            f"{len(empty)} submission(s) graded as empty, from no readable notebook: "
            f"{printable(', '.join(empty))} (their problems say why)"
        )
    if empty or any(NOT_GRADED in p for p in run_problems):
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mini-llm grade", description=HELP)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        run(args)
    except (ValueError, FileNotFoundError) as err:  # GradingError, SandboxUnavailable too
        print(f"mini-llm grade: error: {err}", file=sys.stderr)
        return 2
    return 0
