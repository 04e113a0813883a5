"""The chapter manifest (book/chapters.yml) and the files generated from it.

book/chapters.yml lists every chapter once: page, title, part, status, the modules it teaches,
its assignment and known-bugs file, its execution budget. This module reads and checks it, and
writes what would otherwise be kept in step by hand: book/_toc.yml and the chapter table of
book/intro.md (between its GENERATED markers). The tests read the chapters from here too.

    python book/_ext/manifest.py          # (make toc) rewrite _toc.yml and the intro table
    python book/_ext/manifest.py --check  # exit 1, naming the files, if they are out of date
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

BOOK_DIR = Path(__file__).resolve().parents[1]
REPO = BOOK_DIR.parent
MANIFEST = BOOK_DIR / "chapters.yml"
TOC = BOOK_DIR / "_toc.yml"
INTRO = BOOK_DIR / "intro.md"

STATUSES = ("ready", "coming")
FIELDS = [
    "number",
    "page",
    "title",
    "summary",
    "part",
    "status",
    "modules",
    "assignment",
    "bugs",
    "budget_s",
]
OPTIONAL_FIELDS = ["inputs"]
PAGE_RE = re.compile(r"^ch(\d\d)_[a-z0-9_]+$")
BRIDGE_PAGE_RE = re.compile(r"^(?!ch\d\d_)[a-z][a-z0-9_]+$")
"""an unnumbered bridge chapter's page (``number: none``): the numbered chapters keep their
numbers, and with them the names of the notebooks and gradebooks learners already have"""
BEGIN_TABLE = "% BEGIN GENERATED chapter table: edit book/chapters.yml, then run `make toc`"
END_TABLE = "% END GENERATED chapter table"


class ManifestError(ValueError):
    """book/chapters.yml says something impossible (the message names the chapter and field)."""


@dataclass(frozen=True)
class Chapter:
    number: int | None  # None: an unnumbered bridge chapter, its part's only kind
    page: str
    title: str
    summary: str
    part: str
    status: str
    modules: tuple[str, ...]
    assignment: str | None
    bugs: str | None
    budget_s: float
    inputs: tuple[str, ...] = ()  # globs of files outside mini_llm the page reads

    @property
    def ready(self) -> bool:
        return self.status == "ready"

    @property
    def source(self) -> Path:
        return BOOK_DIR / f"{self.page}.md"

    @property
    def label(self) -> str:
        """What names the chapter beside its title: its number, or a bridge chapter's part."""
        return self.part if self.number is None else str(self.number)

    @property
    def heading(self) -> str:
        """How its concept modules' docstrings open: ``Chapter 3 -- <title>``, ``Tools -- …``."""
        prefix = self.part if self.number is None else f"Chapter {self.number}"
        return f"{prefix} -- {self.title}"

    @property
    def page_test(self) -> str:
        """The file of its page's tests, in tests/."""
        if self.number is None:
            return f"test_chapter_{self.page}.py"
        return f"test_chapter{self.number:02d}.py"


@dataclass(frozen=True)
class Manifest:
    parts: tuple[str, ...]
    chapters: tuple[Chapter, ...]
    front_caption: str
    front_pages: tuple[str, ...]

    def ready(self) -> list[Chapter]:
        return [c for c in self.chapters if c.ready]

    def chapter(self, key: str | int) -> Chapter:
        """A chapter by number (7, "07") or page name (ch07_attention, tools_pytorch)."""
        for chapter in self.chapters:
            names = {chapter.page}
            if chapter.number is not None:
                names |= {str(chapter.number), f"{chapter.number:02d}"}
            if str(key) in names:
                return chapter
        raise ManifestError(f"no chapter {key!r} in {MANIFEST.name}")


def _chapter(entry: dict, parts: tuple[str, ...]) -> Chapter:
    where = f"{MANIFEST.name}, chapter {entry.get('number', '?')}"
    missing = [f for f in FIELDS if f not in entry]
    unknown = sorted(set(entry) - set(FIELDS) - set(OPTIONAL_FIELDS))
    if missing or unknown:
        raise ManifestError(f"{where}: missing fields {missing}, unknown fields {unknown}")
    number = None if entry["number"] in (None, "none") else entry["number"]
    if number is None:
        if not BRIDGE_PAGE_RE.match(str(entry["page"])):
            raise ManifestError(
                f"{where}: an unnumbered chapter's page {entry['page']!r} is not a lower-case "
                "name without a chNN_ prefix"
            )
    else:
        page = PAGE_RE.match(str(entry["page"]))
        if not page or int(page.group(1)) != number:
            raise ManifestError(f"{where}: page {entry['page']!r} is not ch{number:02d}_topic")
    if entry["part"] not in parts:
        raise ManifestError(f"{where}: part {entry['part']!r} is not one of {list(parts)}")
    if entry["status"] not in STATUSES:
        raise ManifestError(f"{where}: status {entry['status']!r} is not one of {STATUSES}")
    assignment = None if entry["assignment"] in (None, "none") else str(entry["assignment"])
    bugs = None if entry["bugs"] in (None, "none") else str(entry["bugs"])
    if bugs is not None and not re.fullmatch(r"tests/buggy/[a-z0-9_]+\.py", bugs):
        raise ManifestError(f"{where}: bugs {bugs!r} is not a file tests/buggy/<name>.py")
    if (assignment is None) != (bugs is None):
        raise ManifestError(f"{where}: an assignment needs a known-bugs file, and only one does")
    chapter = Chapter(
        number=None if number is None else int(number),
        page=str(entry["page"]),
        title=str(entry["title"]).strip(),
        summary=" ".join(str(entry["summary"]).split()),
        part=str(entry["part"]),
        status=str(entry["status"]),
        modules=tuple(entry["modules"] or ()),
        assignment=assignment,
        bugs=bugs,
        budget_s=float(entry["budget_s"]),
        inputs=tuple(entry.get("inputs") or ()),
    )
    if chapter.ready:
        _check_files(chapter, where)
    return chapter


def _check_files(chapter: Chapter, where: str) -> None:
    """A ready chapter's files exist (a coming one's need not)."""
    needed = [chapter.source]
    if chapter.assignment:
        needed.append(REPO / "solutions" / chapter.assignment / f"{chapter.assignment}.ipynb")
        needed.append(REPO / chapter.bugs)
    needed += [REPO / (m.replace(".", "/") + ".py") for m in chapter.modules]
    absent = [str(p.relative_to(REPO)) for p in needed if not p.is_file()]
    if absent:
        raise ManifestError(
            f"{where} ({chapter.page}) is ready but these files are missing: {absent}"
        )


def load(path: Path = MANIFEST) -> Manifest:
    """Read and check the manifest; a ManifestError says what is wrong and where."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    parts = tuple(data["parts"])
    chapters = tuple(_chapter(entry, parts) for entry in data["chapters"])
    numbers = [c.number for c in chapters if c.number is not None]
    if numbers != list(range(1, len(numbers) + 1)):
        raise ManifestError(f"{path.name}: chapters must be numbered 1, 2, ... in order: {numbers}")
    order = [parts.index(c.part) for c in chapters]
    if order != sorted(order):
        raise ManifestError(f"{path.name}: chapters must follow the order of the parts {parts}")
    for part in parts:
        kinds = {c.number is None for c in chapters if c.part == part}
        if len(kinds) > 1:
            raise ManifestError(
                f"{path.name}: part {part!r} mixes numbered and unnumbered chapters"
            )
    assignments = [c.assignment for c in chapters if c.assignment]
    if len(set(assignments)) != len(assignments):
        raise ManifestError(f"{path.name}: two chapters share an assignment: {assignments}")
    front = data.get("front") or {}
    return Manifest(parts, chapters, str(front.get("caption", "")), tuple(front.get("pages", ())))


def render_toc(manifest: Manifest) -> str:
    """book/_toc.yml: the unnumbered front part (first in the sidebar, where a reader at
    1280 x 800 sees it without scrolling), then the ready chapters under their parts."""
    lines = [
        "# GENERATED from book/chapters.yml by `make toc` (python book/_ext/manifest.py).",
        "# Do not edit: change chapters.yml and run `make toc`; a test checks the two agree.",
        "format: jb-book",
        "root: intro",
        "parts:",
    ]
    if manifest.front_pages:
        lines += [f"  - caption: {manifest.front_caption}", "    chapters:"]
        lines += [f"      - file: {page}" for page in manifest.front_pages]
    for part in manifest.parts:
        chapters = [c for c in manifest.ready() if c.part == part]
        if chapters:
            lines += [f"  - caption: {part}"]
            lines += ["    numbered: true"] if chapters[0].number is not None else []
            lines += ["    chapters:", *(f"      - file: {c.page}" for c in chapters)]
    return "\n".join(lines) + "\n"


def render_intro_table(manifest: Manifest) -> str:
    """The intro's chapter table: every chapter, a link for the ready ones. The Status column
    is there only while some chapter is still to come: a column of "ready" tells nothing."""
    with_status = not all(c.ready for c in manifest.chapters)
    header = "| # | Chapter | What you build and learn |"
    rule = "|---|---------|--------------------------|"
    if with_status:
        header, rule = header + " Status |", rule + "--------|"
    rows = [header, rule]
    for c in manifest.chapters:
        title = f"[{c.title}]({c.page}.md)" if c.ready else c.title
        status = f" {c.status} |" if with_status else ""
        rows.append(f"| {c.label} | {title} | {c.summary} |{status}")
    return "\n".join([BEGIN_TABLE, "", *rows, "", END_TABLE])


def with_intro_table(intro: str, table: str) -> str:
    """``intro`` with the text between its GENERATED markers replaced by ``table``."""
    start, end = intro.find(BEGIN_TABLE), intro.find(END_TABLE)
    if start < 0 or end < start:
        raise ManifestError(f"{INTRO.name} has no '{BEGIN_TABLE}' ... '{END_TABLE}' region")
    return intro[:start] + table + intro[end + len(END_TABLE) :]


def generated_files(manifest: Manifest) -> dict[Path, str]:
    """Path -> the content it must have."""
    intro = with_intro_table(INTRO.read_text(encoding="utf-8"), render_intro_table(manifest))
    return {TOC: render_toc(manifest), INTRO: intro}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only report out-of-date files")
    args = parser.parse_args(argv)
    try:
        files = generated_files(load())
    except ManifestError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    stale = [p for p, text in files.items() if p.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"{os.path.relpath(path, REPO)} is out of date with chapters.yml: run `make toc`")
        return 1 if stale else 0
    for path in stale:
        path.write_text(files[path], encoding="utf-8")
        print(f"wrote {os.path.relpath(path, REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
