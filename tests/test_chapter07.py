"""Chapter 7's rendered page: the task, the attention example, the accuracy table and the
alignments, checked for what the prose says about them."""

from __future__ import annotations

import re

import pytest
from _book_helpers import html_tables, read_page

from mini_llm.seq2seq import number_to_words, vocabularies


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, "ch07_attention")


def test_examples_are_numbers_written_out_correctly(page):
    _, text = page
    examples = re.findall(r"^([a-z ]+?)\s+-> (\d+)$", text, re.MULTILINE)
    assert len(examples) == 6
    for words, digits in examples:
        assert " ".join(number_to_words(int(digits))) == words
    source, target = vocabularies()
    assert f"source vocabulary: {len(source)} tokens" in text
    assert f"target: {len(target)} (" in text


def test_the_attention_example_sums_to_one_and_ignores_padding(page):
    _, text = page
    weights = re.search(r"weights \[([\d. ]+)\]\s+sum ([\d.]+)", text)
    assert weights, "the attention example is not on the page"
    values = [float(w) for w in weights.group(1).split()]
    assert len(values) == 3 and values[2] == 0.0 and float(weights.group(2)) == 1.0
    assert "weighted mean of the first two h_j: True" in text


def test_attention_wins_and_the_plain_model_degrades_with_length(page):
    raw, text = page
    for rows in html_tables(raw):
        if rows and rows[0][0] == "model":
            scores = {row[0]: [float(c.rstrip("%")) / 100 for c in row[1:]] for row in rows[1:]}
            break
    else:
        raise AssertionError("no accuracy table")
    plain, attention = scores["without attention"], scores["with attention"]
    assert min(attention) > 0.97  # "almost perfectly at every length"
    assert plain[0] < attention[0] - 0.05
    assert plain[1] > plain[2] > plain[3] + 0.2  # short > medium > long, by a wide margin
    assert "2 models, 600 steps each" in text


def test_alignment_heatmaps_are_drawn_for_correct_translations(page):
    _, text = page
    for number in (312005, 20019, 7070):
        assert f"{number}: model wrote {number}," in text
    # the alignment the prose describes for the first example
    assert ("312005: model wrote 312005, each output read mostly from: 3<-three 1<-twelve "
            "2<-twelve 0<-thousand 0<-thousand 5<-five") in text


def test_page_has_its_figures_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures and equations are there."""
    raw, _ = page
    assert len(re.findall(r'<img[^>]+src="[^"]+\.png"', raw)) >= 2, "loss curves and heatmaps expected"
    assert raw.count('class="math') >= 4
