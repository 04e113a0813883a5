"""book/chapters.yml is the one list of chapters: what is generated from it agrees with it, every
chapter's files are where it says, and publishing a planned chapter is a one-line change."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
import yaml
from _book_helpers import BOOK_DIR, REPO, manifest

MANIFEST = manifest.load()


def test_toc_and_intro_table_are_generated_from_the_manifest():
    for path, expected in manifest.generated_files(MANIFEST).items():
        assert path.read_text(encoding="utf-8") == expected, (
            f"{path.relative_to(REPO)} differs from what book/chapters.yml makes: run `make toc`"
        )


def test_every_chapter_page_assignment_and_bug_file_is_in_the_manifest():
    ready = MANIFEST.ready()
    bridges = {c.page for c in MANIFEST.chapters if c.number is None}
    pages = {p.stem for p in BOOK_DIR.glob("ch[0-9][0-9]_*.md")}
    pages |= {p.stem for p in BOOK_DIR.glob("*.md") if p.stem in bridges}
    assert pages == {c.page for c in ready}, (
        "book/chNN_*.md pages (and bridge pages) and the ready chapters of book/chapters.yml differ"
    )
    solutions = {p.parent.name for p in (REPO / "solutions").glob("*/*.ipynb")}
    assert solutions == {c.assignment for c in ready if c.assignment}, (
        "solutions/ and the assignments of the ready chapters in book/chapters.yml differ"
    )
    bug_files = {
        str(p.relative_to(REPO))
        for p in (REPO / "tests/buggy").glob("*.py")
        if not p.name.startswith("_")
    }
    assert bug_files == {c.bugs for c in ready if c.bugs}


def test_every_page_is_headed_by_its_manifest_title():
    """The page's own title (its first heading, what the navigation and the browser tab show)
    is the title the intro's table gives the chapter."""
    for chapter in MANIFEST.ready():
        text = (BOOK_DIR / f"{chapter.page}.md").read_text(encoding="utf-8")
        heading = re.search(r"^# (.+)$", text.split("\n---\n", 1)[-1], re.MULTILINE)
        assert heading, f"book/{chapter.page}.md has no '# ' title"
        assert heading.group(1).strip() == chapter.title, (
            f"book/{chapter.page}.md is titled {heading.group(1).strip()!r}, "
            f"book/chapters.yml {chapter.title!r}"
        )


def test_the_course_part_first_then_the_parts_in_order():
    toc = yaml.safe_load((BOOK_DIR / "_toc.yml").read_text(encoding="utf-8"))
    captions = [part["caption"] for part in toc["parts"]]
    assert captions[0] == "Working with the course"
    assert "numbered" not in toc["parts"][0]  # the chapters keep their numbers 1, 2, ...
    assert captions[1:] == [p for p in MANIFEST.parts if any(c.part == p for c in MANIFEST.ready())]


def test_publishing_a_chapter_is_its_status():
    """What `status: coming` -> `ready` on the next planned chapter changes in the generated
    files: it joins its part in the toc, and its row in the intro links to it."""
    # the next planned chapter; when every chapter is published, the last one as if it were not
    planned = next((c for c in MANIFEST.chapters if not c.ready), MANIFEST.chapters[-1])

    def with_status(status):
        chapters = [
            dataclasses.replace(c, status=status) if c == planned else c for c in MANIFEST.chapters
        ]
        return dataclasses.replace(MANIFEST, chapters=tuple(chapters))

    unpublished, published = with_status("coming"), with_status("ready")
    before = yaml.safe_load(manifest.render_toc(unpublished))
    after = yaml.safe_load(manifest.render_toc(published))

    def part(toc):
        found = [p["chapters"] for p in toc["parts"] if p["caption"] == planned.part]
        return [c["file"] for c in found[0]] if found else []

    # in reading order: a later chapter of the part may be published already
    assert part(after) == sorted([*part(before), planned.page])
    row = f"| {planned.label} | [{planned.title}]({planned.page}.md) |"
    assert row not in manifest.render_intro_table(unpublished)
    assert row in manifest.render_intro_table(published)
    # a Status column while a chapter is to come, none once every one is published
    all_ready = len(published.ready()) == len(published.chapters)
    assert "| coming |" in manifest.render_intro_table(unpublished)
    assert (" Status |" in manifest.render_intro_table(published)) != all_ready
    ready_after = manifest.render_intro_table(published).count(" | ready |")
    assert ready_after == (0 if all_ready else len(unpublished.ready()) + 1)


def test_a_bridge_chapter_is_unnumbered_and_the_numbers_go_on_around_it():
    """An unnumbered chapter (``number: none``) sits in a part of its own, which the toc does
    not number, and the intro labels it by its part; the numbered chapters keep 1, 2, ..."""
    chapters = tuple(dataclasses.replace(c, status="ready") for c in MANIFEST.chapters)
    published = dataclasses.replace(MANIFEST, chapters=chapters)
    toc = yaml.safe_load(manifest.render_toc(published))
    table = manifest.render_intro_table(published)
    bridges = [c for c in chapters if c.number is None]
    assert [c.page for c in bridges] == ["tools_pytorch"]
    for bridge in bridges:
        part = next(p for p in toc["parts"] if p["caption"] == bridge.part)
        assert "numbered" not in part, part
        assert [c["file"] for c in part["chapters"]] == [bridge.page]
        assert f"| {bridge.part} | [{bridge.title}]({bridge.page}.md) |" in table
        assert bridge.heading == f"{bridge.part} -- {bridge.title}"
        assert bridge.page_test == f"test_chapter_{bridge.page}.py"
    numbered = [c for c in chapters if c.number is not None]
    assert [c.number for c in numbered] == list(range(1, len(numbered) + 1))
    assert MANIFEST.chapter(3).page == "ch03_neural_lm"
    assert MANIFEST.chapter("tools_pytorch").number is None


def test_the_first_chapter_of_a_part_opens_the_part():
    chapters = [dataclasses.replace(c, status="ready") for c in MANIFEST.chapters]
    toc = yaml.safe_load(manifest.render_toc(dataclasses.replace(MANIFEST, chapters=chapters)))
    assert [p["caption"] for p in toc["parts"]] == ["Working with the course", *MANIFEST.parts]
    for part in toc["parts"][1:]:
        in_part = [c.page for c in chapters if c.part == part["caption"]]
        assert [c["file"] for c in part["chapters"]] == in_part, part["caption"]
    assert [c["file"] for c in toc["parts"][-2]["chapters"]] == ["ch12_gpu_training"]


def _entry(**change) -> dict:
    entry = {
        "number": 1,
        "page": "ch01_bigrams",
        "title": "T",
        "summary": "S",
        "part": "Counting",
        "status": "coming",
        "modules": [],
        "assignment": "none",
        "bugs": "none",
        "budget_s": 90,
    }
    return {**entry, **change}


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([_entry(part="Counted")], "part 'Counted' is not one of"),
        ([_entry(status="done")], "status 'done' is not one of"),
        ([_entry(page="ch02_bigrams")], "is not ch01_topic"),
        ([_entry(number="none")], "an unnumbered chapter's page 'ch01_bigrams' is not"),
        (
            [_entry(), _entry(number="none", page="tools", title="U")],
            "part 'Counting' mixes numbered and unnumbered chapters",
        ),
        ([{k: v for k, v in _entry().items() if k != "budget_s"}], "missing fields ['budget_s']"),
        ([_entry(), _entry(number=3, page="ch03_x")], "numbered 1, 2, ... in order"),
        ([_entry(assignment="ch01_x")], "needs a known-bugs file"),
        (
            [_entry(status="ready", page="ch01_nowhere")],
            "files are missing: ['book/ch01_nowhere.md'",
        ),
    ],
)
def test_a_wrong_manifest_is_a_clear_error(tmp_path: Path, entries, message):
    path = tmp_path / "chapters.yml"
    path.write_text(yaml.safe_dump({"parts": ["Counting"], "chapters": entries}))
    with pytest.raises(manifest.ManifestError, match=re.escape(message)):
        manifest.load(path)


def test_out_of_date_files_are_reported(tmp_path, monkeypatch, capsys):
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: intro\n")
    monkeypatch.setattr(manifest, "TOC", toc)
    intro = tmp_path / "intro.md"
    intro.write_text((BOOK_DIR / "intro.md").read_text(encoding="utf-8"))
    monkeypatch.setattr(manifest, "INTRO", intro)
    assert manifest.main(["--check"]) == 1
    assert "_toc.yml is out of date" in capsys.readouterr().out
    assert manifest.main([]) == 0
    assert manifest.main(["--check"]) == 0
    assert toc.read_text() == (BOOK_DIR / "_toc.yml").read_text()
