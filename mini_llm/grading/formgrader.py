"""Formgrader's Autograde button, through the hardened grader.

nbgrader's own autograde runs a submission in a plain kernel, as the instructor, with the
course in reach, and resets a graded written answer to "needs manual grade". Formgrader calls
it from its *Manage Submissions* page. :func:`install`, called by ``nbgrader_config.py`` (which
formgrader loads into the server), makes that call run ``mini-llm grade ASSIGNMENT --student
ID`` instead: the sandbox, the trusted replay, and manual grades kept.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TIMEOUT_S = 1800  # one student; the grader has its own per-notebook limits inside this


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
    """Route formgrader's per-student Autograde to :func:`hardened_autograde`."""
    from nbgrader.apps.api import NbGraderAPI

    if getattr(NbGraderAPI.autograde, "hardened", False):
        return

    def autograde(self, assignment_id: str, student_id: str, force=True, create=True) -> dict:
        return hardened_autograde(self.coursedir.root, assignment_id, student_id)

    autograde.hardened = True
    NbGraderAPI.autograde = autograde
