"""nbgrader does the bookkeeping: the gradebook, autograde's in-kernel run, feedback, export.

* :func:`course` reads the course's own ``nbgrader_config.py`` for its folder names.
* :func:`register_assignment` runs ``nbgrader generate_assignment`` so the gradebook knows the
  assignment's cells (into a scratch release folder: ``exercises/`` is left alone).
* :func:`autograde_in_kernel` (on request) runs ``nbgrader autograde`` for one student inside
  the OS sandbox, in a private copy of the course (a gradebook that holds only the assignment,
  only that student's submission), with the kernel started through :mod:`.limits`. Its scores
  are shown, never recorded: the kernel is the submission's.
* :func:`record` writes the trusted scores into the real gradebook with nbgrader's API and
  nbgrader's own late-penalty step; :func:`feedback_and_export` runs ``generate_feedback`` and
  ``export`` in fresh processes, side by side; no student code ever had a view of the course
  they read.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from nbformat.v4 import new_notebook
from nbgrader.api import Gradebook
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import AssignLatePenalties
from nbgrader.utils import parse_utc
from sqlalchemy.exc import SAWarning
from traitlets.config.loader import PyFileConfigLoader

from mini_llm.grading import limits, offline_math
from mini_llm.grading.jail import Jail
from mini_llm.grading.notebook import Assignment
from mini_llm.grading.verify import WALL_FACTOR, Verification

KERNEL_NAME = "mini-llm-grading"


class GradingError(ValueError):
    """A problem the instructor can fix (missing folders, a failing nbgrader step)."""


def course(course_dir: Path) -> CourseDirectory:
    """The course's folder layout, from its nbgrader_config.py (root = ``course_dir``)."""
    config_file = course_dir / "nbgrader_config.py"
    config = PyFileConfigLoader(str(config_file)).load_config() if config_file.exists() else None
    coursedir = CourseDirectory(config=config) if config is not None else CourseDirectory()
    coursedir.root = str(course_dir.resolve())
    coursedir.db_url = f"sqlite:///{course_dir.resolve() / 'gradebook.db'}"
    return coursedir


def check_gradebook(coursedir: CourseDirectory, must_exist: bool = False) -> Path:
    """The course's gradebook, which must be a readable SQLite database (or, unless
    ``must_exist``, not there yet: nbgrader makes it). Checked before anything is graded or
    written, where nbgrader would fail later with pages of traceback."""
    path = Path(coursedir.root) / "gradebook.db"
    if not path.exists():
        if must_exist:
            raise GradingError(
                f"no gradebook at {path}: nothing was graded in this course folder; "
                "run mini-llm grade ASSIGNMENT first"
            )
        return path
    try:
        with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            db.execute("SELECT name FROM sqlite_master").fetchall()
    except sqlite3.Error as err:
        raise GradingError(
            f"the gradebook {path} cannot be read ({err}); restore it from a backup, or move "
            "it aside to start a new one (the scores in it would be lost); nothing was graded "
            "or written"
        ) from None
    return path


def folder(coursedir: CourseDirectory, kind: str, *parts: str) -> Path:
    return Path(coursedir.root, getattr(coursedir, f"{kind}_directory"), *parts)


def executable_path() -> str:
    """PATH with this interpreter's bin folder first: nbgrader runs ``alembic`` from PATH."""
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The folder holding the grader's own ``mini_llm``: the course's nbgrader_config.py imports
its feedback and export pieces, which must be the grader's even where PYTHONPATH is ignored."""
NBGRADER_MAIN = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); import mini_llm.grading; "
    "from nbgrader.apps.nbgraderapp import main; main()"
)


class Nbgrader:
    """``nbgrader ARGS``, started now, isolated from the environment's PYTHON* variables
    (-I); :meth:`wait` collects it. Several run at once where the grader would otherwise
    leave one of the two cores idle."""

    def __init__(self, args: list[str], cwd: Path, what: str, env: dict[str, str] | None = None):
        self.what = what
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by wait()
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-c", NBGRADER_MAIN, PACKAGE_ROOT, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PATH": executable_path(), **(env or {})},
        )

    def wait(self, timeout: float) -> None:
        """Until it has finished; ``GradingError`` with its last words if it failed."""
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            code = f"stopped after {timeout:g} s"
        self.log.seek(0)
        output = self.log.read()[-3000:].decode(errors="replace")
        self.log.close()
        if code != 0:
            raise GradingError(f"nbgrader {self.what} failed ({code}):\n{output}")


def _config_args(root: Path) -> list[str]:
    return [
        f"--CourseDirectory.root={root}",
        f"--CourseDirectory.db_url=sqlite:///{root}/gradebook.db",
    ]


def register_assignment(coursedir: CourseDirectory, assignment: str, scratch: Path) -> Nbgrader:
    """Start putting the assignment's cells into the gradebook, with its release notebook in
    ``scratch/release/ASSIGNMENT`` (``exercises/`` is left alone)."""
    return Nbgrader(
        [
            "generate_assignment",
            assignment,
            "--force",
            f"--CourseDirectory.release_directory={scratch / 'release'}",
            *_config_args(Path(coursedir.root)),
        ],
        Path(coursedir.root),
        f"generate_assignment {assignment}",
    )


# ------------------------------------------------------------------- the in-kernel run
@dataclass
class InKernel:
    """What nbgrader's own autograde reported (display only)."""

    scores: dict[str, float] = field(default_factory=dict)
    error: str = ""

    @property
    def auto_score(self) -> float:
        return sum(self.scores.values())


def _kernel_spec(where: Path, python: str, limit: limits.Limits) -> None:
    spec = where / "kernels" / KERNEL_NAME
    spec.mkdir(parents=True)
    argv = [
        python,
        "-m",
        "mini_llm.grading.limits",
        *limit.argv(),
        "--",
        python,
        "-m",
        "ipykernel_launcher",
        "-f",
        "{connection_file}",
    ]
    (spec / "kernel.json").write_text(
        json.dumps(
            {"argv": argv, "display_name": "Python 3 (limited, grading)", "language": "python"}
        )
    )


def clean_gradebook(coursedir: CourseDirectory, assignment: str, db: Path) -> Nbgrader:
    """Start making the gradebook ``db`` that knows this assignment's cells and nothing else
    (no other student), for the in-kernel runs."""
    return Nbgrader(
        [
            "generate_assignment",
            assignment,
            "--force",
            f"--CourseDirectory.release_directory={db.parent / 'clean-release'}",
            f"--CourseDirectory.root={coursedir.root}",
            f"--CourseDirectory.db_url=sqlite:///{db}",
        ],
        Path(coursedir.root),
        f"generate_assignment {assignment} (clean gradebook)",
    )


def _copy_plain_file(source: str, target: str) -> None:
    """Copy a submitted file only if it is a plain file of its own (a pipe would block the
    copy for good; a hard link shares a course file's content); anything else is left out."""
    info = os.lstat(source)
    if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
        shutil.copy2(source, target)


IN_A_SCRATCH_COPY = (
    'cp -R /course-in/. /course && "$@"; status=$?; '
    "cp /course/gradebook.db /returned/gradebook.db; exit $status"
)
"""The in-kernel run inside the sandbox: the course copied into its own tmpfs, nbgrader, and
only the gradebook copied back out (a file the size limit bounds)."""


def autograde_in_kernel(
    assignment: Assignment,
    student: str,
    submitted: Path,
    gradebook: Path,
    source: Path,
    workdir: Path,
    limit: limits.Limits,
    jail: Jail,
    timeout_s: float,
    cell_timeout_s: float,
) -> InKernel:
    """``nbgrader autograde`` of one student in a private copy of the course, in the sandbox."""
    course = workdir / "course"
    shutil.copytree(
        submitted,
        course / "submitted" / student / assignment.name,
        symlinks=True,
        copy_function=_copy_plain_file,
    )
    shutil.copytree(
        source,
        course / "source" / assignment.name,
        symlinks=True,
        ignore=shutil.ignore_patterns("*.ipynb"),
    )
    shutil.copy(gradebook, course / "gradebook.db")
    root, jupyter = ("/course", "/jupyter") if jail.enabled else (course, workdir / "jupyter")
    python = jail.python()[0]
    returned = workdir / "returned"  # in the sandbox, only the gradebook comes back out
    returned.mkdir()
    _kernel_spec(workdir / "jupyter", python, limit)
    env = limits.student_environment(jail.home(workdir / "home"))
    env.update(
        JUPYTER_PATH=str(jupyter),
        PYTHONPATH=jail.package_path(),
        PATH=os.pathsep.join([str(Path(python).parent), "/usr/bin", "/bin"]),
    )
    autograde = [
        python,
        "-m",
        "nbgrader",
        "autograde",
        assignment.name,
        f"--student={student}",
        "--force",
        *_config_args(Path(root)),
        "--CourseDirectory.source_directory=source",
        "--CourseDirectory.submitted_directory=submitted",
        "--CourseDirectory.autograded_directory=autograded",
        f"--Execute.kernel_name={KERNEL_NAME}",  # wall clock only, as the replay's backstop
        f"--Execute.timeout={int(cell_timeout_s * WALL_FACTOR)}",
        "--Execute.extra_arguments=[]",
    ]
    if jail.enabled:  # the course is copied into a sized tmpfs: what the kernel writes is bounded
        autograde = ["/bin/sh", "-c", IN_A_SCRATCH_COPY, "sh", *autograde]
    command = (
        jail.wrap(
            autograde,
            writable={"/returned": returned},
            read_only={"/jupyter": workdir / "jupyter", "/course-in": course},
            cwd="/course",
            scratch=("/course",),
        )
        if jail.enabled
        else autograde
    )
    start = time.monotonic()
    log = workdir / "nbgrader.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command,
            cwd=None if jail.enabled else course,
            env=env,
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        in_time = limits.wait_or_kill(process, start + timeout_s)
    result = InKernel()
    if not in_time:
        result.error = f"nbgrader autograde was stopped at the time limit ({timeout_s:g} s)"
    elif process.returncode != 0:
        tail = log.read_bytes()[-20_000:].decode(errors="replace").strip().splitlines()
        generic = ("Please see the", "There was an error processing", "Traceback")
        errors = [
            line.split("ERROR]", 1)[1]
            for line in tail
            if "[AutogradeApp | ERROR]" in line and not any(g in line for g in generic)
        ]
        result.error = (errors[0] if errors else tail[-1] if tail else "").strip()[:300]
    graded = returned / "gradebook.db" if jail.enabled else course / "gradebook.db"
    result.scores = _scores(graded, assignment, student)
    return result


def _scores(db: Path, assignment: Assignment, student: str) -> dict[str, float]:
    scores = {}
    try:
        with Gradebook(f"sqlite:///{db}") as gb:
            for cell in assignment.cells:
                if cell.kind == "test":
                    grade = gb.find_grade(
                        cell.grade_id, assignment.notebook, assignment.name, student
                    )
                    scores[cell.grade_id] = float(grade.auto_score or 0)
    except Exception:  # noqa: BLE001 - the copy was the submission's to break; nothing to show
        return {}
    return scores


# ------------------------------------------------------------------- the real gradebook
def timestamp(text: bytes | None):
    """The submission time, parsed the way nbgrader parses ``timestamp.txt``; None if absent."""
    if not text or not text.strip():
        return None
    try:
        return parse_utc(text.decode().strip())
    except (ValueError, UnicodeDecodeError):
        return None


def record(
    coursedir: CourseDirectory,
    assignment: Assignment,
    student: str,
    when,
    verification: Verification,
    answers: dict[str, list[str]],
    released: dict[str, str],
    review: set[str],
) -> None:
    """Write one student's trusted scores into the gradebook, as nbgrader's autograde would;
    the test cells in ``review`` are marked as needing a person."""
    name, notebook = assignment.name, assignment.notebook
    warnings.filterwarnings("ignore", category=SAWarning)  # nbgrader's own, on every submission
    with Gradebook(coursedir.db_url, coursedir.course_id) as gb:
        gb.update_or_create_student(student)
        gb.update_or_create_submission(name, student, **({"timestamp": when} if when else {}))
        by_id = {c.grade_id: c for c in verification.cells}
        for cell in assignment.cells:
            if cell.kind == "test":
                grade = gb.find_grade(cell.grade_id, notebook, name, student)
                grade.auto_score = by_id[cell.grade_id].points if cell.grade_id in by_id else 0.0
                grade.needs_manual_grade = grade.manual_score is not None or cell.grade_id in review
            elif cell.kind == "manual":
                grade = gb.find_grade(cell.grade_id, notebook, name, student)
                copies = answers.get(cell.grade_id, [])
                grade.auto_score = 0.0 if copies in ([], [released.get(cell.grade_id)]) else None
                # a score a person already gave is kept when the submission is graded again
                grade.needs_manual_grade = grade.auto_score is None and grade.manual_score is None
            if cell.kind in ("answer", "manual"):
                comment = gb.find_comment(cell.grade_id, notebook, name, student)
                copies = answers.get(cell.grade_id, [])
                unchanged = not copies or copies == [released.get(cell.grade_id)]
                comment.auto_comment = "No response." if unchanged else None
        gb.db.commit()
    resources = {
        "nbgrader": {
            "notebook": notebook,
            "assignment": name,
            "student": student,
            "db_url": coursedir.db_url,
        }
    }
    AssignLatePenalties(config=coursedir.config).preprocess(new_notebook(), resources)


def feedback_and_export(
    coursedir: CourseDirectory, assignment: str, students: list[str], csv_path: Path, parts: int
) -> None:
    """nbgrader's own feedback HTML and CSV export, for the students just graded (and the
    others graded before): the feedback in ``parts`` nbgrader runs side by side, each
    leaving out the others' students, and the export beside them."""
    root = Path(coursedir.root)
    everyone = sorted(
        p.parent.name for p in folder(coursedir, "autograded").glob(f"*/{assignment}")
    )
    parts = 1 if any("," in s for s in everyone) else max(1, parts)  # the list's separator
    groups = [everyone[i::parts] for i in range(parts)]
    runs = [
        Nbgrader(
            [
                "generate_feedback",
                assignment,
                "--force",
                "--HTMLExporter.sanitize_html=True",
                f"--CourseDirectory.student_id_exclude={','.join(set(everyone) - set(group))}",
                *_config_args(root),
            ],
            root,
            "generate_feedback",
            {offline_math.LATER: "1"},
        )
        for group in groups
        if group
    ]
    runs.append(
        Nbgrader(
            ["export", f"--to={csv_path}", f"--assignment=[{assignment!r}]", *_config_args(root)],
            root,
            "export",
        )
    )
    for run in runs:
        run.wait(timeout=1800)
    for student in everyone:
        for page in folder(coursedir, "feedback", student, assignment).glob("*.html"):
            offline_math.inline_into(page)
    missing = [s for s in students if not folder(coursedir, "feedback", s, assignment).exists()]
    if missing:
        raise GradingError("nbgrader generate_feedback wrote nothing for " + ", ".join(missing))
