"""Regenerating the release without losing anyone's work.

``nbgrader generate_assignment --force`` (``make exercises``, formgrader's Generate button)
deletes the release folder and writes it again. A release notebook that someone edited in place
-- a learner who opened ``exercises/`` instead of their own copy -- would be lost. Two guards:

* :func:`install`, called by ``nbgrader_config.py``, makes every generation first copy what
  git does not hold in the release folder (changed, new and ignored files) into
  ``.release-backup/<time>/``, so nothing is destroyed whoever clicks what;
* ``python -m mini_llm.grading.release`` (``make exercises``) refuses to regenerate while a
  release folder holds such changes, unless it is given ``--force`` (``make exercises FORCE=1``).

Without git (a copy of the course that is no checkout) nothing can be told apart, so every file
of an existing release folder counts as changed.
"""

from __future__ import annotations

import argparse
import itertools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

BACKUP = ".release-backup"
SCRATCH = ".ipynb_checkpoints"  # Jupyter's autosaves: backed up, but no reason to refuse


def unheld(root: Path, folder: Path) -> list[Path]:
    """Files under ``folder`` whose content git does not hold: modified, untracked, ignored."""
    if not folder.is_dir():
        return []
    top = _git(root, "rev-parse", "--show-toplevel")
    listed = top and _git(
        root,
        "status",
        "--porcelain=v1",
        "-z",
        "--ignored=matching",
        "--untracked-files=all",
        "--",
        str(folder.resolve()),
    )
    if top is None or listed is None:
        return sorted(p for p in folder.rglob("*") if p.is_file())
    files = []
    entries = iter(listed.split("\0"))
    for entry in entries:
        if len(entry) < 4:
            continue
        if entry[0] in "RC":  # a rename names its old path next; the new one is this entry
            next(entries, None)
        path = Path(top.strip()) / entry[3:]
        if path.is_file():
            files.append(path)
        elif path.is_dir():  # an ignored folder is listed whole
            files += [p for p in path.rglob("*") if p.is_file()]
    return sorted(files)


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], check=False, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def back_up(root: Path, files: list[Path]) -> Path:
    """Copy ``files`` (under ``root``) into a new ``.release-backup/<time>/``, keeping paths."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in itertools.count():
        backup = root / BACKUP / (stamp if attempt == 0 else f"{stamp}.{attempt}")
        try:
            backup.mkdir(parents=True)
            break
        except FileExistsError:
            continue
    for path in files:
        target = backup / path.resolve().relative_to(root.resolve())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return backup


def install() -> None:
    """Make nbgrader's generate_assignment back up a release folder's unheld files before it
    replaces the folder (nbgrader removes it whole with --force, and on any failure)."""
    from nbgrader.converters import GenerateAssignment

    original = GenerateAssignment.init_destination
    if getattr(original, "backs_up_the_release", False):
        return

    def init_destination(self, assignment_id: str, student_id: str) -> bool:
        root = Path(self.coursedir.root)
        dest = Path(os.path.normpath(self._format_dest(assignment_id, student_id)))
        files = unheld(root, dest)
        if files:
            backup = back_up(root, files)
            self.log.warning(
                "%d file(s) of %s that git does not hold were copied to %s before the release "
                "is generated again",
                len(files),
                dest,
                backup,
            )
        return original(self, assignment_id, student_id)

    init_destination.backs_up_the_release = True
    GenerateAssignment.init_destination = init_destination


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mini_llm.grading.release",
        description="regenerate exercises/ from solutions/ with nbgrader, refusing while a "
        "release folder holds changes git does not hold (a learner's answers?)",
    )
    parser.add_argument("assignments", nargs="*", help="default: every folder of solutions/")
    parser.add_argument(
        "--force", action="store_true", help="regenerate anyway (the changes are backed up)"
    )
    args = parser.parse_args(argv)
    root = Path.cwd()
    names = args.assignments or sorted(p.name for p in (root / "solutions").glob("*/"))
    if not names:
        print(
            "release: no assignment in solutions/; run this in the course folder", file=sys.stderr
        )
        return 2
    changed = {
        name: [p for p in unheld(root, root / "exercises" / name) if SCRATCH not in p.parts]
        for name in names
    }
    changed = {name: files for name, files in changed.items() if files}
    if changed and not args.force:
        listed = "\n".join(f"  {p.relative_to(root)}" for files in changed.values() for p in files)
        print(
            "release: nothing regenerated. These files of exercises/ hold changes that git "
            f"does not hold:\n{listed}\n"
            "Answers written in exercises/ would be replaced. Work in your own copy instead: "
            "`.venv/bin/mini-llm learner start` copies the exercises into my_exercises/ "
            "(copy your answers across first). To regenerate anyway: `make exercises FORCE=1`, "
            f"which first copies these files into {BACKUP}/.",
            file=sys.stderr,
        )
        return 2
    nbgrader = Path(sys.executable).with_name("nbgrader")
    env = {**os.environ, "PATH": f"{nbgrader.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for name in names:
        done = subprocess.run(
            [str(nbgrader), "generate_assignment", name, "--force"], check=False, env=env
        )
        if done.returncode:
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
