"""Chapter 3's rendered page: the MLP beats the best n-gram, and the page shows its evidence.

The n-gram rows of the comparison table are recomputed here with mini_llm; the MLP's numbers
come from the training run on the page, so they are checked for what they must show (lower
validation perplexity than every n-gram, the checks of cross-entropy and autograd passing).
"""

from __future__ import annotations

import re

import pytest
from _book_helpers import html_tables, read_page

from mini_llm.corpus import load_corpus
from mini_llm.evaluation import perplexity, split_documents
from mini_llm.smoothing import NGramModel, fit_interpolation_weights
from mini_llm.vocab import BOS, Vocabulary


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, "ch03_neural_lm")


@pytest.fixture(scope="module")
def comparison(page):
    """The rows of the table 'model | size | train perplexity | validation perplexity'."""
    raw, _ = page
    for rows in html_tables(raw):
        if rows and rows[0] == ["model", "size", "train perplexity", "validation perplexity"]:
            return {row[0]: (row[1], float(row[2]), float(row[3])) for row in rows[1:]}
    raise AssertionError("no model comparison table on the page")


def test_the_mlp_beats_every_ngram_model_on_validation(comparison):
    mlp = [name for name in comparison if name.startswith("MLP")]
    assert len(mlp) == 1
    ngrams = [name for name in comparison if "gram" in name]
    assert len(ngrams) == 3
    best_ngram = min(comparison[name][2] for name in ngrams)
    assert comparison[mlp[0]][2] < best_ngram
    # and it overfits less than the 5-gram, as the prose under the table says
    gap = {name: comparison[name][2] - comparison[name][1] for name in comparison}
    assert gap[mlp[0]] < gap["interpolated 5-gram"]
    # fewer numbers than the best n-gram's count tables
    size = {name: int(comparison[name][0].replace(",", "")) for name in comparison}
    assert size[mlp[0]] < min(size[name] for name in ngrams[1:])


def test_ngram_rows_are_the_models_of_chapter_two(comparison):
    names = load_corpus("names")
    vocab = Vocabulary.from_sequences(names)
    parts = split_documents(names, (0.8, 0.1, 0.1), seed=0)
    train, val = ([vocab.encode_with_boundaries(n) for n in part] for part in parts[:2])
    for n in (3, 4, 5):
        model = NGramModel(train, n, len(vocab), vocab.stoi[BOS])
        weights = fit_interpolation_weights(model.probabilities_by_order(val))
        expected = perplexity(model.interpolated_probabilities_of_next(val, weights))
        assert comparison[f"interpolated {n}-gram"][2] == pytest.approx(expected, abs=0.006)


def test_cross_entropy_equals_the_nll_and_autograd_matches_finite_differences(page):
    _, text = page
    ce, by_hand = re.search(r"F\.cross_entropy: ([\d.]+)\s+by hand: ([\d.]+)", text).groups()
    assert ce == by_hand
    bigram = re.search(r"cross-entropy ([\d.]+), chapter 1's average_nll ([\d.]+)", text)
    assert bigram and bigram.group(1) == bigram.group(2)
    relative = float(re.search(r"relative difference: ([\d.e+-]+)", text).group(1))
    assert relative < 1e-4


def test_training_curve_embeddings_and_samples_are_on_the_page(page, built_book):
    raw, text = page
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', raw)
    assert len(images) >= 3, "gradient noise, loss curve and embedding figures expected"
    for src in images:
        assert (built_book / src).stat().st_size > 10_000, f"{src} looks empty"
    assert "pca_lowrank" in text and "Letter embeddings" in raw
    samples = re.search(r"\(\* = a name of the training set: (\d+) of (\d+)\)", text)
    assert samples and int(samples.group(2)) == 20
    test_line = re.search(r"test perplexity: MLP ([\d.]+), interpolated 5-gram ([\d.]+)", text)
    assert test_line, "the test perplexities are reported once, at the end"


def test_fixed_window_makes_different_names_indistinguishable(page):
    _, text = page
    assert re.search(r"largest difference between their next-letter distributions: 0\.0\b", text)
    assert "Recurrent networks" in text


def test_page_has_goals_math_summary_and_exercise_link(page, built_book):
    raw, text = page
    assert "Learning goals" in text and "Summary" in text
    assert raw.count('class="math') >= 8
    link = re.search(r'href="([^"]*ch03_neural_lm\.ipynb)"', raw)
    assert link, "no download link to the exercise notebook"
    assert (built_book / link.group(1)).exists()
