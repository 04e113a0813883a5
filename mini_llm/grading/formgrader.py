"""Formgrader's Autograde button, through the hardened grader; ``nbgrader autograde`` refused.

nbgrader's own autograde runs a submission in a plain kernel, as the instructor, with the
course in reach, and resets a graded written answer to "needs manual grade". Formgrader calls
it from its *Manage Submissions* page. :func:`install`, called by ``nbgrader_config.py`` (which
formgrader loads into the server), makes that call run ``mini-llm grade ASSIGNMENT --student
ID`` instead: the sandbox, the trusted replay, and manual grades kept. The same page tells the
instructor to grade everyone with ``nbgrader autograde`` on the command line; in this course
that command stops and names ``mini-llm grade`` instead, unless ``MINI_LLM_PLAIN_AUTOGRADE=1``
is in the environment (for notebooks you trust, such as the course's own tests of its
solutions).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TIMEOUT_S = 1800  # one student; the grader has its own per-notebook limits inside this
PLAIN_AUTOGRADE = "MINI_LLM_PLAIN_AUTOGRADE"  # =1: let `nbgrader autograde` run unsandboxed
REFUSAL = (
    "nbgrader autograde runs each submission unsandboxed, as you, with the course (solutions,\n"
    "hidden tests, gradebook) in reach. This course grades in a sandbox instead:\n"
    "    mini-llm grade {assignment}                  (every student)\n"
    "    mini-llm grade {assignment} --student ID     (one; formgrader's Autograde button)\n"
    f"To run nbgrader's own autograde anyway, on notebooks you trust: {PLAIN_AUTOGRADE}=1."
)


def hardened_autograde(course: str | Path, assignment: str, student: str) -> dict:
    """What formgrader's API returns for an autograde: success, the log, and any error."""
    python = Path(sys.executable)
    command = [str(python), "-m", "mini_llm.grading", assignment, "--course-dir", str(course)]
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    try:
        done = subprocess.run(
            [*command, "--student", student],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {"success": False, "error": f"mini-llm grade took over {TIMEOUT_S} s", "log": ""}
    log = f"$ mini-llm grade {assignment} --student {student}\n{done.stdout}{done.stderr}"
    if done.returncode == 0:
        return {"success": True, "log": log}
    return {"success": False, "error": f"mini-llm grade exited with {done.returncode}", "log": log}


def install() -> None:
    """Route formgrader's per-student Autograde to :func:`hardened_autograde`, and make
    ``nbgrader autograde`` stop with :data:`REFUSAL`."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.apps.autogradeapp import AutogradeApp

    if getattr(NbGraderAPI.autograde, "hardened", False):
        return
    plain_start = AutogradeApp.start

    def start(self) -> None:
        if os.environ.get(PLAIN_AUTOGRADE) == "1":
            return plain_start(self)
        named = [*self.extra_args, self.coursedir.assignment_id]
        assignment = next((name for name in named if name), "ASSIGNMENT")
        print(REFUSAL.format(assignment=assignment), file=sys.stderr)
        self.exit(2)

    AutogradeApp.start = start

    def autograde(self, assignment_id: str, student_id: str, force=True, create=True) -> dict:
        return hardened_autograde(self.coursedir.root, assignment_id, student_id)

    autograde.hardened = True
    NbGraderAPI.autograde = autograde
