"""Nothing a submission writes during grading survives it.

Student code runs as the grader's own user, so it *can* write files the grader can write.
Therefore the grader (1) reads everything it grades from into memory before any student code
runs -- the gradebook, the assignment's source and release folders, every submission -- and
grades only from those copies; (2) writes its own results (gradebook, autograded notebooks,
feedback, CSV) only after every student process is dead; and (3) in between compares the
course's files with the copies, puts back whatever changed, and reports it, naming the
students whose code was running when the file was changed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Snapshot:
    """The bytes of every file under some roots, and of some single files."""

    files: dict[Path, bytes] = field(default_factory=dict)
    roots: list[Path] = field(default_factory=list)

    @classmethod
    def take(cls, roots: list[Path], single_files: list[Path] = ()) -> Snapshot:
        snapshot = cls(roots=[r for r in roots])
        for root in roots:
            for path in sorted(root.rglob("*")) if root.is_dir() else []:
                if path.is_file() and not path.is_symlink():
                    snapshot.files[path] = path.read_bytes()
        for path in single_files:
            if path.is_file():
                snapshot.files[path] = path.read_bytes()
        return snapshot

    def under(self, root: Path) -> dict[str, bytes]:
        """The files below ``root``, by path relative to it."""
        return {str(p.relative_to(root)): data for p, data in self.files.items()
                if root in p.parents}


@dataclass
class Change:
    path: Path
    what: str  # "changed", "deleted" or "added"
    mtime: float | None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def changes(snapshot: Snapshot) -> list[Change]:
    found = []
    for path, data in snapshot.files.items():
        try:
            stat = path.lstat()
            same = path.is_file() and not path.is_symlink() and \
                _digest(path.read_bytes()) == _digest(data)
        except OSError:
            found.append(Change(path, "deleted", None))
            continue
        if not same:
            found.append(Change(path, "changed", stat.st_mtime))
    for root in snapshot.roots:
        for path in root.rglob("*") if root.is_dir() else []:
            if path not in snapshot.files and (path.is_file() or path.is_symlink()):
                found.append(Change(path, "added", path.lstat().st_mtime))
    return found


def restore(snapshot: Snapshot, found: list[Change]) -> None:
    """Put back the snapshot's bytes; remove files that were added."""
    for change in found:
        if change.what == "added":
            change.path.unlink()
            continue
        if change.path.is_dir() and not change.path.is_symlink():
            shutil.rmtree(change.path)
        change.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = change.path.with_name(change.path.name + ".restoring")
        temporary.write_bytes(snapshot.files[change.path])
        os.replace(temporary, change.path)


def suspects(change: Change, windows: dict[str, tuple[float, float]]) -> list[str]:
    """Students whose code was running when ``change`` happened (all of them if unknown)."""
    if change.mtime is None:
        return sorted(windows)
    return sorted(s for s, (start, end) in windows.items() if start - 1 <= change.mtime <= end + 1)
