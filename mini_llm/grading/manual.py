"""Points a person grades: written answers, pending until an instructor scores them.

nbgrader counts an ungraded written answer as 0, so the learner's feedback said "Score: 0.0 /
5.0" and the CSV's total looked final. Here an answer that needs a person and has no manual
score yet is *pending*, and the same :func:`totals` feeds every place a score is shown: the
summary of ``mini-llm grade``, the CSV (:class:`GradesCsv`) and the feedback
(:class:`GetGradesAndPending`, read by ``templates/mini_llm_feedback``). The course's
``nbgrader_config.py`` plugs the last two into nbgrader's own ``export`` and
``generate_feedback``, so the stock commands agree too.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins import ExportPlugin
from nbgrader.preprocessors import GetGrades


def is_pending(grade) -> bool:
    """An answer waiting for a person: nothing scored it yet, automatically or by hand."""
    return (
        bool(grade.needs_manual_grade) and grade.manual_score is None and grade.auto_score is None
    )


@dataclass
class Totals:
    auto: float = 0.0
    manual: float = 0.0
    pending: float = 0.0  # points of the answers nobody has graded yet
    max_score: float = 0.0

    @property
    def score(self) -> float:
        return self.auto + self.manual

    def text(self) -> str:
        """``20/25``, or ``20/25 (5 pending)`` while answers wait for a person."""
        shown = f"{self.score:g}/{self.max_score:g}"
        return f"{shown} ({self.pending:g} pending)" if self.pending else shown


def totals(grades) -> Totals:
    """Automatic, manual and pending points of a submission's grades (nbgrader ``Grade`` rows):
    a manual score replaces the automatic one, as in nbgrader's own total."""
    result = Totals()
    for grade in grades:
        result.max_score += grade.max_score
        if grade.manual_score is not None:
            result.manual += grade.manual_score
        elif is_pending(grade):
            result.pending += grade.max_score
        else:
            result.auto += grade.auto_score or 0.0
    return result


def submission_totals(gradebook: Gradebook, assignment: str, student: str) -> Totals:
    submission = gradebook.find_submission(assignment, student)
    return totals(grade for notebook in submission.notebooks for grade in notebook.grades)


class GetGradesAndPending(GetGrades):
    """nbgrader's GetGrades, plus ``metadata.nbgrader.pending`` on each answer that waits for a
    person and ``resources['nbgrader']['pending']``, the points they are worth."""

    def preprocess(self, nb, resources):
        nb, resources = super().preprocess(nb, resources)
        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            result = submission_totals(gb, info["assignment"], info["student"])
        info["pending"] = result.pending
        return nb, resources

    def _get_score(self, cell, resources):
        super()._get_score(cell, resources)
        grade = self.gradebook.find_grade(
            cell.metadata["nbgrader"]["grade_id"],
            self.notebook_id,
            self.assignment_id,
            self.student_id,
        )
        cell.metadata.nbgrader["pending"] = is_pending(grade)


COLUMNS = [
    "assignment",
    "duedate",
    "timestamp",
    "student_id",
    "last_name",
    "first_name",
    "email",
    "auto_score",
    "manual_score",
    "pending_points",
    "raw_score",
    "late_submission_penalty",
    "score",
    "max_score",
    "status",
    "problems",
]


class GradesCsv(ExportPlugin):
    """nbgrader's CSV export with the automatic, manual and pending points in their own
    columns; ``status`` says ``pending`` while a written answer waits for a person, and
    ``empty`` where no readable notebook was graded; ``problems`` gives what the last
    ``mini-llm grade`` run found in each submission (from its ``grading-<assignment>.json``)."""

    def export(self, gradebook: Gradebook) -> None:
        students = {str(s) for s in self.student}
        assignments = {str(a) for a in self.assignment}
        root = Path(self.parent.coursedir.root) if self.parent else Path(".")
        with open(self.to or "grades.csv", "w", newline="") as out:
            writer = csv.DictWriter(out, COLUMNS)
            writer.writeheader()
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                found = last_report(root / f"grading-{assignment.name}.json")
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    row = _row(gradebook, assignment, student)
                    graded = found.get(student.id, {})
                    if graded.get("empty") and row["status"] != "missing":
                        row["status"] = "empty"
                    row["problems"] = "; ".join(graded.get("problems", []))
                    writer.writerow(row)


def last_report(path: Path) -> dict:
    """The students of the grader's report (``grading-<assignment>.json``), or nothing where
    there is none to read."""
    try:
        students = json.loads(path.read_text(encoding="utf-8"))["students"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return students if isinstance(students, dict) else {}


def _row(gradebook: Gradebook, assignment, student) -> dict:
    row = {
        "assignment": assignment.name,
        "duedate": assignment.duedate or "",
        "student_id": student.id,
        "last_name": student.last_name or "",
        "first_name": student.first_name or "",
        "email": student.email or "",
        "max_score": assignment.max_score,
    }
    try:
        submission = gradebook.find_submission(assignment.name, student.id)
    except MissingEntry:  # nothing handed in: zero, as in nbgrader's own export
        return row | dict.fromkeys(COLUMNS[7:13], 0.0) | {"timestamp": "", "status": "missing"}
    result = submission_totals(gradebook, assignment.name, student.id)
    penalty = submission.late_submission_penalty or 0.0
    return row | {
        "timestamp": submission.timestamp or "",
        "auto_score": result.auto,
        "manual_score": result.manual,
        "pending_points": result.pending,
        "raw_score": result.score,
        "late_submission_penalty": penalty,
        "score": max(0.0, result.score - penalty),
        "status": "pending" if result.pending else "graded",
    }
