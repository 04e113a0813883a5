"""A learner's own copy of the exercises, outside the release that ``make exercises`` rewrites.

``exercises/`` is generated from ``solutions/`` and tracked by git: regenerating it (``make
exercises``, formgrader's Generate button) replaces its notebooks. A learner therefore works in
a copy of it, ``my_exercises/`` by default, which git ignores and nothing in the course writes
to except :func:`start`, and :func:`start` only adds files that are not there yet.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from mini_llm.learner.export import LearnerError

RELEASE = Path("exercises")
WORKSPACE = Path("my_exercises")


@dataclass
class Started:
    """What :func:`start` did: files it copied, and files it found and left as they were."""

    copied: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)


def start(
    assignments: list[str] | None = None, release: Path = RELEASE, into: Path = WORKSPACE
) -> Started:
    """Copy the release of each assignment (all of them by default) into ``into``.

    A file that already exists in ``into`` is never replaced, whatever it holds: running this
    again after the release gained an assignment or a data file adds only what is new.
    """
    available = sorted(p.name for p in release.glob("*/") if p.is_dir()) if release.is_dir() else []
    if not available:
        raise LearnerError(
            f"{release} holds no assignment folder; run this from the root of the course (the "
            "folder with exercises/), or give the release with --release"
        )
    chosen = assignments or available
    unknown = [a for a in chosen if a not in available]
    if unknown:
        raise LearnerError(
            f"no assignment {', '.join(unknown)} in {release}; there are: {', '.join(available)}"
        )
    if into.resolve() == release.resolve() or release.resolve() in into.resolve().parents:
        raise LearnerError(f"work outside the release: {into} is inside {release}")
    started = Started()
    for assignment in chosen:
        for source in sorted((release / assignment).rglob("*")):
            if not source.is_file() or ".ipynb_checkpoints" in source.parts:
                continue
            target = into / source.relative_to(release)
            if target.exists() or target.is_symlink():
                started.kept.append(target)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with source.open("rb") as reading, target.open("xb") as writing:
                shutil.copyfileobj(reading, writing)
            started.copied.append(target)
    return started
