"""Chapter 2's rendered page holds the perplexity tables and figures its code computed.

The expected values are recomputed here with mini_llm, so a page that stopped running its code,
or a change in the package that the page did not pick up, fails. Every number the prose states is
read back from the page, and every comparison the prose makes is checked on the numbers.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from _book_helpers import html_tables, prose, read_page

from mini_llm.corpus import load_corpus
from mini_llm.evaluation import perplexity, split_documents
from mini_llm.smoothing import NGramModel, fit_interpolation_weights, unseen_ngram_fraction
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


@pytest.fixture(scope="module")
def results(page):
    """The rows of the train/validation table, by order n, as {column: value}."""
    raw, _ = page
    table = table_with(raw, "n", "interp. val")
    header = table[0]
    return {int(row[0]): dict(zip(header, row)) for row in table[1:]}


def test_perplexity_table_has_every_order_and_the_interpolated_values(results, names_split):
    vocab, (train, val, _) = names_split
    assert sorted(results) == [1, 2, 3, 4, 5]
    for n, row in results.items():
        model = NGramModel(train, n, len(vocab), vocab.stoi[BOS])
        weights = fit_interpolation_weights(model.probabilities_by_order(val))
        expected = perplexity(model.interpolated_probabilities_of_next(val, weights))
        assert float(row["interp. val"]) == pytest.approx(expected, abs=0.006)
        assert row["MLE val"] == ("∞" if n > 1 else f"{expected:.2f}")
        assert int(row["contexts"]) == len(model.tables[-1][0])
        if n >= 3:  # longer contexts overfit: the training names score better
            assert float(row["add-k train"]) < float(row["add-k val"])


def test_three_things_that_stand_out_are_true(page, results):
    _, text = page
    addk_train = [float(results[n]["add-k train"]) for n in sorted(results)]
    addk_val = [float(results[n]["add-k val"]) for n in sorted(results)]
    interp_val = [float(results[n]["interp. val"]) for n in sorted(results)]
    train5, best_n, best_val, val5, interp_n, interp_best = prose(
        text,
        r"the 5-gram is down to NUM with add-k\), while the validation perplexity of add-k "
        r"is best at \\\(n\\\) = (\d) \(NUM\) and then rises again, to NUM at "
        r"\\\(n = 5\\\).*?Interpolation keeps improving up to \\\(n\\\) = (\d), the largest "
        r"order tried \(NUM\)",
    )
    assert all(results[n]["MLE val"] == "∞" for n in range(2, 6))
    assert all(a > b for a, b in itertools.pairwise(addk_train)), "train falls steadily"
    assert float(train5) == addk_train[-1]
    assert int(best_n) == 1 + int(np.argmin(addk_val)) and float(best_val) == min(addk_val)
    assert all(a < b for a, b in zip(addk_val[int(best_n) - 1 :], addk_val[int(best_n) :]))
    assert float(val5) == addk_val[-1] > float(best_val)
    assert all(a > b for a, b in itertools.pairwise(interp_val)), "interpolation keeps improving"
    assert int(interp_n) == 5 and float(interp_best) == interp_val[-1]


def test_seed_sentences_show_the_zero_and_the_generalization_failure(page):
    raw, _ = page
    rows = {row[0]: row[1:] for row in table_with(raw, "sentence", "add-1 smoothing")[1:]}
    assert rows["datawhale agent learns"] == ["0.5000", "0.006173"]
    assert rows["datawhale robot learns"][0] == "0.0000"
    assert rows["datawhale robot learns"][1] == rows["datawhale robot works"][1] != "0.000000"
    # "well below the agent sentences"
    assert float(rows["datawhale robot learns"][1]) < float(rows["datawhale agent learns"][1])


def test_perplexity_is_tied_to_the_nll_of_chapter_one_and_one_convention_for_v(page):
    raw, text = page
    ppl = re.search(r"bigram perplexity on train\s*:\s*(\d+\.\d+)", text)
    via_nll = re.search(r"exp\(average NLL\) as in chapter 1\s*:\s*(\d+\.\d+)", text)
    assert ppl and via_nll and ppl.group(1) == via_nll.group(1)
    # chapter 1's convention: the uniform guess is over the V - 1 = 27 tokens that can come next
    assert re.search(r"uniform over the 27 next symbols\s*:\s*27\.000000", text)
    size, n_next = prose(text, r"vocabulary of \\\(V\\\) = (\d+) symbols.*?\\\(V - 1\\\) = (\d+)")
    assert (int(size), int(n_next)) == (28, 27)
    assert "PPL" in text and r"\exp" in text
    assert "average\\_nll" not in raw and "average\\_nll" not in text  # no literal backslash


def test_sparsity_numbers_in_the_prose_and_summary(page, names_split):
    _, text = page
    vocab, (train, val, _) = names_split
    unseen = {
        n: 100 * unseen_ngram_fraction(train, val, n, len(vocab), vocab.stoi[BOS])
        for n in (1, 3, 5, 8)
    }
    one, three, five, eight = prose(
        text,
        r"\((\d+) % unseen at \\\(n = 1\\\)\), but (\d+) % of the trigrams, (\d+) % of the "
        r"5-grams and (\d+) % of the 8-grams never occur",
    )
    assert [int(one), int(three), int(five), int(eight)] == [round(unseen[n]) for n in unseen]
    assert int(one) == 0 < int(three) < int(five) < int(eight)
    summary_five, summary_eight = prose(
        text,
        r"Sparsity grows fast with \\\(n\\\): (\d+) % of the validation 5-grams \(and "
        r"(\d+) % of the 8-grams\)",
    )
    assert (summary_five, summary_eight) == (five, eight)


def test_choice_of_k_and_interpolation_weights_match_the_prose(page, names_split):
    raw, text = page
    (spread,) = prose(text, r"change by at most NUM % over the whole grid")
    curves = {}
    for n, best, worst in re.findall(
        r"n = (\d): best k [\d.e-]+, validation perplexity (\d+\.\d+) \(worst over the "
        r"grid (\d+\.\d+)\)",
        text,
    ):
        curves[int(n)] = (float(best), float(worst))
    assert sorted(curves) == [1, 2, 3, 4, 5]
    low = max(100 * (curves[n][1] / curves[n][0] - 1) for n in (1, 2))
    high = min(100 * (curves[n][1] / curves[n][0] - 1) for n in (4, 5))
    assert float(spread) == pytest.approx(low, abs=0.1)
    assert high > 10 * float(spread), "higher orders care much more about k"
    # the 4- and 5-gram curves are U-shaped: their best k lies inside the grid
    best_k = dict(re.findall(r"n = (\d): best k ([\d.e-]+),", text))
    grid = np.logspace(-3, 0.5, 15)
    for n in ("4", "5"):
        assert grid[0] < float(best_k[n]) < grid[-1]
        assert curves[int(n)][1] > 1.2 * curves[int(n)][0], "k matters for long contexts"

    weights = table_with(raw, "n", "λ₅")[-1]
    lambdas = [float(w) for w in weights[1:]]
    l4, l5, l1 = prose(
        text,
        r"\(\\\(\\lambda_4\\\) = NUM\).*?\(\\\(\\lambda_5\\\) = NUM\).*?"
        r"\(\\\(\\lambda_1\\\) = NUM\)",
    )
    assert int(np.argmax(lambdas)) == 3, "the 4-gram estimate gets the largest weight"
    assert float(l4) == pytest.approx(lambdas[3], abs=0.006)
    assert float(l5) == pytest.approx(lambdas[4], abs=0.006) and lambdas[4] < 0.5
    assert float(l1) == pytest.approx(lambdas[0], abs=0.0006) and 0 < lambdas[0] < 0.05


def test_test_perplexity_is_reported_once_for_the_model_chosen_on_validation(page, names_split):
    _, text = page
    vocab, (train, val, test) = names_split
    model = NGramModel(train, 5, len(vocab), vocab.stoi[BOS])
    weights = fit_interpolation_weights(model.probabilities_by_order(val))
    expected = perplexity(model.interpolated_probabilities_of_next(test, weights))
    assert "chosen on validation: interpolated 5-gram model" in text
    assert f"test perplexity {expected:.3f}" in text
    assert len(re.findall(r"test perplexity \d", text)) == 1


def test_figures_diagram_notes_and_further_reading(page, built_book):
    raw, text = page
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', raw)
    assert len(images) >= 3, "sparsity, choice of k, and train/validation figures expected"
    for src in images:
        assert (built_book / src).stat().st_size > 10_000, f"{src} looks empty"
    for name in ("fig-ch02-context", "fig-ch02-sparsity", "fig-ch02-choose-k", "fig-ch02-gap"):
        assert f'id="{name}"' in raw, f"figure {name} missing"
        assert f'href="#{name}"' in raw, f"figure {name} is never referred to"
    assert "Backoff and Kneser–Ney" in text and "uniform distribution" in text
    for author in ("Jelinek", "Katz", "Kneser", "Chen"):
        assert author in text, f"{author} missing from the further reading"


def test_page_has_goals_math_summary_and_exercise_link(page, built_book):
    raw, text = page
    assert "Learning goals" in text and "Summary" in text
    assert raw.count('class="math') >= 8
    link = re.search(r'href="([^"]*ch02_ngrams\.ipynb)"', raw)
    assert link, "no download link to the exercise notebook"
    assert (built_book / link.group(1)).exists()
    assert np.isfinite(float(re.search(r"validation perplexity (\d+\.\d+), test", text).group(1)))
