"""Chapter 2's rendered page holds the perplexity tables and figures its code computed.

The expected values are recomputed here with mini_llm, so a page that stopped running its code,
or a change in the package that the page did not pick up, fails.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _book_helpers import html_tables, read_page

from mini_llm.corpus import load_corpus
from mini_llm.evaluation import perplexity, split_documents
from mini_llm.smoothing import NGramModel, fit_interpolation_weights
from mini_llm.vocab import BOS, Vocabulary


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, "ch02_ngrams")


@pytest.fixture(scope="module")
def names_split():
    names = load_corpus("names")
    vocab = Vocabulary.from_sequences(names)
    parts = split_documents(names, (0.8, 0.1, 0.1), seed=0)
    encoded = [[vocab.encode_with_boundaries(name) for name in part] for part in parts]
    return vocab, encoded


def table_with(raw: str, first_header: str, column: str) -> list[list[str]]:
    found = [t for t in html_tables(raw) if t and t[0][0] == first_header and column in t[0]]
    assert len(found) == 1, f"expected one table with the columns {first_header!r}, {column!r}"
    return found[0]


def test_perplexity_table_has_every_order_and_the_interpolated_values(page, names_split):
    raw, _ = page
    vocab, (train, val, _) = names_split
    table = table_with(raw, "n", "interpolated val")
    header, rows = table[0], table[1:]
    assert [row[0] for row in rows] == ["1", "2", "3", "4", "5"]
    column = {name: i for i, name in enumerate(header)}
    for row in rows:
        n = int(row[0])
        model = NGramModel(train, n, len(vocab), vocab.stoi[BOS])
        weights = fit_interpolation_weights(model.probabilities_by_order(val))
        expected = perplexity(model.interpolated_probabilities_of_next(val, weights))
        assert float(row[column["interpolated val"]]) == pytest.approx(expected, abs=0.006)
        assert row[column["unsmoothed val"]] == ("∞" if n > 1 else f"{expected:.2f}")
        if n >= 3:  # longer contexts overfit: the training names score better
            assert float(row[column["add-k train"]]) < float(row[column["add-k val"]])


def test_seed_sentences_show_the_zero_and_the_generalization_failure(page):
    raw, _ = page
    rows = {row[0]: row[1:] for row in table_with(raw, "sentence", "add-1 smoothing")[1:]}
    assert rows["datawhale agent learns"] == ["0.5000", "0.006173"]
    assert rows["datawhale robot learns"][0] == "0.0000"
    assert rows["datawhale robot learns"][1] == rows["datawhale robot works"][1] != "0.000000"


def test_perplexity_is_tied_to_the_nll_of_chapter_one(page):
    _, text = page
    ppl = re.search(r"bigram perplexity on train\s*:\s*([\d.]+)", text)
    via_nll = re.search(r"exp\(average NLL\) as in chapter 1\s*:\s*([\d.]+)", text)
    assert ppl and via_nll and ppl.group(1) == via_nll.group(1)
    assert re.search(r"uniform model over 28 symbols\s*:\s*28\.000000", text)
    assert "PPL" in text and r"\exp" in text


def test_test_perplexity_is_reported_once_for_the_model_chosen_on_validation(page, names_split):
    _, text = page
    vocab, (train, val, test) = names_split
    model = NGramModel(train, 5, len(vocab), vocab.stoi[BOS])
    weights = fit_interpolation_weights(model.probabilities_by_order(val))
    expected = perplexity(model.interpolated_probabilities_of_next(test, weights))
    assert "chosen on validation: interpolated 5-gram model" in text
    assert f"test perplexity {expected:.3f}" in text
    assert len(re.findall(r"test perplexity \d", text)) == 1


def test_sparsity_figure_and_the_other_plots_are_real_images(page, built_book):
    raw, text = page
    assert "The sparsity problem" in raw
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', raw)
    assert len(images) >= 3, "sparsity, choice of k, and train/validation figures expected"
    for src in images:
        assert (built_book / src).stat().st_size > 10_000, f"{src} looks empty"
    unseen = re.search(r"but (\d+) % of the trigrams, (\d+) % of the 5-grams", text)
    assert unseen and int(unseen.group(1)) < int(unseen.group(2))


def test_page_has_goals_math_summary_and_exercise_link(page, built_book):
    raw, text = page
    assert "Learning goals" in text and "Summary" in text
    assert raw.count('class="math') >= 8
    link = re.search(r'href="([^"]*ch02_ngrams\.ipynb)"', raw)
    assert link, "no download link to the exercise notebook"
    assert (built_book / link.group(1)).exists()
    assert np.isfinite(float(re.search(r"validation perplexity ([\d.]+), test", text).group(1)))
