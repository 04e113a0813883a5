"""The course's files as one archive beside the book (book/_ext/course_archive.py), for a copy
without git: the archive lists its own files, and an unpacked archive archives the same."""

from __future__ import annotations

import tarfile

import _book_helpers  # noqa: F401  (puts book/_ext on sys.path)
import course_archive  # book/_ext/course_archive.py


def names_in(path):
    with tarfile.open(path) as archive:
        return sorted(archive.getnames())


def test_a_copy_without_git_archives_the_files_its_listing_names(tmp_path):
    root = tmp_path / "course"
    (root / "pkg").mkdir(parents=True)
    (root / "README.md").write_text("read me\n")
    (root / "pkg" / "module.py").write_text("x = 1\n")
    (root / "notes.txt").write_text("not part of the course\n")
    (root / course_archive.LISTING).write_text("README.md\npkg/module.py\ngone.py\n")
    target = tmp_path / course_archive.ARCHIVE
    assert course_archive.write_archive(root, target) == 2  # gone.py no longer exists
    folder = course_archive.FOLDER
    assert names_in(target) == sorted(
        [f"{folder}/README.md", f"{folder}/pkg/module.py", f"{folder}/{course_archive.LISTING}"]
    )
    with tarfile.open(target) as archive:
        archive.extractall(tmp_path / "unpacked", filter="data")
    unpacked = tmp_path / "unpacked" / folder
    assert (unpacked / "pkg" / "module.py").read_text() == "x = 1\n"
    again = tmp_path / "again.tar.gz"
    assert course_archive.write_archive(unpacked, again) == 2  # the unpacked copy, once more
    assert names_in(again) == names_in(target)


def test_a_folder_that_is_neither_checkout_nor_archive_writes_nothing(tmp_path):
    (tmp_path / "stray.txt").write_text("?\n")
    target = tmp_path / course_archive.ARCHIVE
    assert course_archive.write_archive(tmp_path, target) == 0
    assert not target.exists()
