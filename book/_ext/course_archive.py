"""Put the whole course beside the built book, as ``mini_llm-course.tar.gz``.

A reader of the book may not have the course's files (the package, the exercises, the tests,
the Makefile); the intro and the exercises guide link to this archive so that the pages are
enough to start. It holds the files git tracks (in a checkout) or the files listed in the
archive's own ``COURSE_FILES`` (in a copy unpacked from an archive), under one folder
``mini_llm-course/``: what a clone gives, without the virtual environment or build output.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

ARCHIVE = "mini_llm-course.tar.gz"
FOLDER = "mini_llm-course"
LISTING = "COURSE_FILES"  # the archive's own list of its files, for a copy without git

logger = logging.getLogger(__name__)


def course_files(root: Path) -> list[str]:
    """The course's files, relative to ``root``: git's tracked files, else ``COURSE_FILES``."""
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True
        ).stdout.decode()
        files = [name for name in out.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        listing = root / LISTING
        if not listing.is_file():
            return []
        files = listing.read_text(encoding="utf-8").splitlines()
    return sorted(name for name in files if name != LISTING and (root / name).is_file())


def write_archive(root: Path, target: Path) -> int:
    """Write the archive of ``root``'s course files to ``target``; the number of files."""
    files = course_files(root)
    if not files:
        return 0
    partial = target.with_name(target.name + ".partial")
    with tarfile.open(partial, "w:gz") as archive:
        for name in files:
            archive.add(root / name, f"{FOLDER}/{name}", recursive=False)
        listing = ("\n".join(files) + "\n").encode()
        info = tarfile.TarInfo(f"{FOLDER}/{LISTING}")
        info.size, info.mode = len(listing), 0o644
        archive.addfile(info, io.BytesIO(listing))
    partial.replace(target)
    return len(files)


def build_finished(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = Path(app.srcdir).resolve().parent
    count = write_archive(root, Path(app.outdir) / ARCHIVE)
    if count:
        logger.info(f"course archive: {count} files in {ARCHIVE}")
    else:
        logger.info(f"no {ARCHIVE}: {root} is neither a git checkout nor an unpacked archive")


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", build_finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
