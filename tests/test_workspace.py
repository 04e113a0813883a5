"""A learner's work is never lost: their own copy of the exercises (`mini-llm learner start`) is
never overwritten, and regenerating the release (`make exercises`) refuses while exercises/
holds edits git does not hold, and backs them up when told to go ahead."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from _exercise_helpers import EXERCISES, grader_meta, new_course, notebook_path

ASSIGNMENT = "ch01_bigrams"
ANSWER = "def count_bigrams(sequences, vocab_size):\n    return 'my own answer'\n"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def _answer_as_a_learner(path: Path) -> bytes:
    """Write an answer into the first answer cell and save, as JupyterLab would."""
    notebook = nbformat.read(path, as_version=4)
    cell = next(c for c in notebook.cells if grader_meta(c).get("solution"))
    cell.source = ANSWER
    nbformat.write(notebook, path)
    return path.read_bytes()


def test_start_copies_the_release_and_never_replaces_a_learners_file(tmp_path):
    mine = tmp_path / "my_exercises"
    first = _run("mini_llm.cli", "learner", "start", ASSIGNMENT, "--release", str(EXERCISES),
                 "--into", str(mine), cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    notebook = notebook_path(mine, ASSIGNMENT)
    assert notebook.read_bytes() == notebook_path(EXERCISES, ASSIGNMENT).read_bytes()
    assert f"open {notebook}" in first.stdout
    assert [p.name for p in mine.iterdir()] == [ASSIGNMENT]  # only the one asked for

    written = _answer_as_a_learner(notebook)
    again = _run("mini_llm.cli", "learner", "start", "--release", str(EXERCISES),
                 "--into", str(mine), cwd=tmp_path)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert notebook.read_bytes() == written  # the answer is still there
    kept = sum(1 for p in (EXERCISES / ASSIGNMENT).rglob("*") if p.is_file())
    assert f"kept {kept} file(s) already in {mine}" in again.stdout
    released = sorted(p.name for p in EXERCISES.iterdir() if p.is_dir())
    assert sorted(p.name for p in mine.iterdir()) == released  # the rest were added

    unknown = _run("mini_llm.cli", "learner", "start", "ch99_nothing", "--release",
                   str(EXERCISES), "--into", str(mine), cwd=tmp_path)  # fmt: skip
    assert unknown.returncode == 2 and "no assignment ch99_nothing" in unknown.stderr
    inside = _run("mini_llm.cli", "learner", "start", "--release", str(EXERCISES),
                  "--into", str(EXERCISES / "mine"), cwd=tmp_path)  # fmt: skip
    assert inside.returncode == 2 and "work outside the release" in inside.stderr
    assert not (EXERCISES / "mine").exists()


def test_regenerating_the_release_refuses_over_a_learners_edit_and_backs_it_up_if_forced(
    tmp_path, grader_path
):
    course = new_course(tmp_path / "course", [ASSIGNMENT])
    shutil.copytree(EXERCISES / ASSIGNMENT, course / "exercises" / ASSIGNMENT)
    shutil.copy(Path(__file__).parents[1] / ".gitignore", course / ".gitignore")
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "the course"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *command],
                       cwd=course, check=True)  # fmt: skip
    notebook = notebook_path(course / "exercises", ASSIGNMENT)
    written = _answer_as_a_learner(notebook)

    refused = _run("mini_llm.grading.release", cwd=course)
    assert refused.returncode == 2
    assert f"exercises/{ASSIGNMENT}/{ASSIGNMENT}.ipynb" in refused.stderr
    assert "nothing regenerated" in refused.stderr and "FORCE=1" in refused.stderr
    assert notebook.read_bytes() == written
    assert not (course / ".release-backup").exists()

    forced = _run("mini_llm.grading.release", "--force", cwd=course)
    assert forced.returncode == 0, forced.stderr
    (backup,) = (course / ".release-backup").iterdir()
    assert notebook_path(backup / "exercises", ASSIGNMENT).read_bytes() == written
    regenerated = json.loads(notebook.read_text())
    assert regenerated == json.loads(notebook_path(EXERCISES, ASSIGNMENT).read_text())
    assert "copied to" in forced.stderr  # nbgrader's log says where the backup is

    clean = _run("mini_llm.grading.release", cwd=course)  # nothing unheld: no refusal
    assert clean.returncode == 0, clean.stderr
    assert len(list((course / ".release-backup").iterdir())) == 1
    assert os.listdir(course / "exercises") == [ASSIGNMENT]
