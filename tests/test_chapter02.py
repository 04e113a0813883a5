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
from _book_helpers import check_figures, html_tables, page_fixture, prose

from mini_llm.corpus import load_corpus
from mini_llm.evaluation import perplexity, split_documents
from mini_llm.smoothing import (
    NGramModel,
    fit_interpolation_weights,
    lookup_counts,
    ngram_counts,
    unseen_ngram_fraction,
)
from mini_llm.vocab import BOS, EOS, Vocabulary

page = page_fixture("ch02_ngrams")


@pytest.fixture(scope="module")
def names_split():
    names = load_corpus("names")
    vocab = Vocabulary.from_sequences(names)
    parts = split_documents(names, (0.8, 0.1, 0.1), seed=0)
    encoded = [[vocab.encode_with_boundaries(name) for name in part] for part in parts]
    return vocab, encoded


@pytest.fixture(scope="module")
def val_names():
    return split_documents(load_corpus("names"), (0.8, 0.1, 0.1), seed=0)[1]


ORDERS = range(1, 7)  # the orders the page counts: 1 to 6
KS = np.logspace(-3, 0.5, 15)  # the page's grid of k


@pytest.fixture(scope="module")
def interpolated(names_split):
    """Validation perplexity and weights of the interpolated model of each order."""
    vocab, (train, val, _) = names_split
    out = {}
    for n in ORDERS:
        model = NGramModel(train, n, len(vocab), vocab.stoi[BOS])
        weights = fit_interpolation_weights(model.probabilities_by_order(val))
        out[n] = (perplexity(model.interpolated_probabilities_of_next(val, weights)), weights)
    return out


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


def test_perplexity_table_has_every_order_and_the_interpolated_values(
    results, names_split, interpolated
):
    vocab, (train, val, _) = names_split
    assert sorted(results) == list(ORDERS)
    for n, row in results.items():
        model = NGramModel(train, n, len(vocab), vocab.stoi[BOS])
        expected, _ = interpolated[n]
        assert float(row["interp. val"]) == pytest.approx(expected, abs=0.006)
        mle = perplexity(model.probabilities_of_next(val, k=0))
        assert row["MLE val"] == ("∞" if np.isinf(mle) else f"{mle:.2f}")
        assert int(row["contexts"]) == len(model.tables[-1][0])
        if n >= 3:  # longer contexts overfit: the training names score better
            assert float(row["add-k train"]) < float(row["add-k val"])


def test_three_things_that_stand_out_are_true(page, results, interpolated):
    _, text = page
    orders = sorted(results)
    addk_train = [float(results[n]["add-k train"]) for n in orders]
    addk_val = [float(results[n]["add-k val"]) for n in orders]
    interp_train = [float(results[n]["interp. train"]) for n in orders]
    interp_val = [interpolated[n][0] for n in orders]  # unrounded, recomputed
    infinite = [n for n in orders if results[n]["MLE val"] == "∞"]
    (
        first_infinite,
        top,
        train_last,
        best_n,
        best_val,
        val_last,
        top_again,
        interp_n,
        interp_best,
        top_once_more,
        interp_last,
        interp_best_again,
    ) = prose(
        text,
        r"Without smoothing every model from \\\(n\\\) = (\d) on has infinite validation "
        r"perplexity\. The training perplexity of add-k falls at every order \(the (\d)-gram is "
        r"down to NUM\), while its validation perplexity is best at \\\(n\\\) = (\d) \(NUM\) "
        r"and then rises at every order, up to NUM at \\\(n\\\) = (\d):.*?the gap between "
        r"training and validation grows at every order\. Interpolation improves at every order "
        r"up to \\\(n\\\) = (\d) \(NUM\), and no further: the (\d)-gram scores NUM, against "
        r"NUM\. Unlike add-k, it hardly suffers from the longer contexts\.",
    )
    # "every model from n = 2 on has infinite validation perplexity"
    assert infinite == list(range(int(first_infinite), orders[-1] + 1))
    assert int(top) == int(top_again) == int(top_once_more) == orders[-1]
    # add-k: the training perplexity falls at every order ...
    falls = all(a > b for a, b in itertools.pairwise(addk_train))
    assert falls
    assert float(train_last) == addk_train[-1]
    # ... while the validation perplexity is best below the largest order, then rises
    assert int(best_n) == orders[int(np.argmin(addk_val))] < orders[-1]
    assert float(best_val) == min(addk_val)
    assert all(a < b for a, b in itertools.pairwise(addk_val[int(best_n) - 1 :]))
    assert float(val_last) == addk_val[-1] > float(best_val)
    # for both kinds of model the gap between training and validation grows at every order
    gaps = [np.subtract(addk_val, addk_train), np.subtract(interp_val, interp_train)]
    assert all(all(np.diff(gap) > 0) for gap in gaps)
    # interpolation improves at every order up to its best, and no further
    best = orders[int(np.argmin(interp_val))]
    assert int(interp_n) == best < orders[-1]
    assert float(interp_best) == float(interp_best_again)
    assert float(interp_best) == pytest.approx(min(interp_val), abs=0.0006)
    assert float(interp_last) == pytest.approx(interp_val[-1], abs=0.0006)
    assert all(a > b for a, b in itertools.pairwise(interp_val[:best]))
    # "hardly suffers from the longer contexts": the largest order is under 1 % worse
    assert (interp_val[-1] - min(interp_val)) / min(interp_val) < 0.01
    # the introduction: more confident on the names counted at every order, and for both
    # kinds of model worse on new names past some order (the best one is not the largest)
    assert (
        "the model grows more confident about the text it has seen and, past some order, worse "
        "on the text it has not" in " ".join(text.split())
    )


def test_seed_sentences_show_the_zero_and_the_generalization_failure(page):
    raw, text = page
    rows = {row[0]: row[1:] for row in table_with(raw, "sentence", "add-1 smoothing")[1:]}
    assert rows["datawhale agent learns"] == ["0.5000", "0.006173"]
    assert rows["datawhale robot learns"][0] == "0.0000"
    assert rows["datawhale robot learns"][1] == rows["datawhale robot works"][1] != "0.000000"
    # "well below the agent sentences"
    assert float(rows["datawhale robot learns"][1]) < float(rows["datawhale agent learns"][1])
    # the scrambled sentence: every pair uncounted, so zero without and lowest with smoothing
    scrambled = rows.pop("works datawhale robot")
    assert scrambled[0] == "0.0000"
    assert float(scrambled[1]) < min(float(row[1]) for row in rows.values())
    flowing = " ".join(text.split()).replace("“", '"').replace("”", '"')
    assert 'the scrambled "works datawhale robot" is made only of pairs never counted' in flowing
    seed = [["datawhale", "agent", "learns"], ["datawhale", "agent", "works"]]
    counted = {pair for s in seed for pair in itertools.pairwise([BOS, *s, EOS])}
    assert not counted & set(itertools.pairwise([BOS, "works", "datawhale", "robot", EOS]))


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


def test_sparsity_numbers_in_the_prose_and_summary(page, names_split, results, val_names):
    _, text = page
    vocab, (train, val, _) = names_split
    V, bos = len(vocab), vocab.stoi[BOS]
    n_val = sum(len(ids) - 1 for ids in val)
    unseen = {n: unseen_ngram_fraction(train, val, n, V, bos) for n in range(1, 9)}
    for n, share in unseen.items():  # the printed counts, with their share
        count = round(share * n_val)
        assert f"n = {n}: {count:5,} of the {n_val:,} validation n-grams ({share:6.2%})" in text
    one, total, two, total_again, examples, three, five, eight = prose(
        text,
        r"At \\\(n = 1\\\), (\d+) of the ([\d,]+) validation tokens \(letters and "
        r"end tokens\) are missing from training\. At \\\(n = 2\\\), (\d+) of the ([\d,]+) "
        r"validation bigrams never "
        r"occurs in training \(([^)]*)\): .*?Then the share climbs: (\d+) % of the trigrams, "
        r"(\d+) % of the 5-grams and (\d+) % of the 8-grams never occur",
    )
    assert total == total_again == f"{n_val:,}"
    assert (int(one), int(two)) == (round(unseen[1] * n_val), round(unseen[2] * n_val))
    assert int(two) > 0 and results[2]["MLE val"] == "∞", "one zero makes the bigram infinite"
    contexts, counts = ngram_counts(train, 2, V, bos)
    found = [
        f"{vocab.itos[a]}→{vocab.itos[b]} in {name}"
        for name, ids in zip(val_names, val)
        for a, b in itertools.pairwise(ids)
        if lookup_counts(contexts, counts, np.array([[a]]))[0, b] == 0
    ]
    assert len(found) == int(two) and examples == ", ".join(found[:3])
    assert [int(three), int(five), int(eight)] == [round(100 * unseen[n]) for n in (3, 5, 8)]
    assert int(three) < int(five) < int(eight)
    # the introduction: "every extra token of memory leaves more of a new text unseen"
    assert all(a < b for a, b in itertools.pairwise(unseen.values()))
    assert "every extra token of memory leaves more of a new text unseen" in " ".join(text.split())
    summary_five, summary_eight = prose(
        text,
        r"Sparsity grows fast with \\\(n\\\): (\d+) % of the validation 5-grams \(and "
        r"(\d+) % of the 8-grams\)",
    )
    assert (summary_five, summary_eight) == (five, eight)


def test_the_introduction_example_is_counted(page, names_split):
    _, text = page
    vocab, (train, _, _) = names_split
    V, bos = len(vocab), vocab.stoi[BOS]

    def row(context):
        contexts, counts = ngram_counts(train, len(context) + 1, V, bos)
        return lookup_counts(contexts, counts, vocab.encode(context)[None, :])[0]

    after_n, after_ann = row(["n"]), row(["a", "n", "n"])
    a, e, n = (vocab.stoi[t] for t in "aen")
    p_n, then_n, total, p_a_ann, p_a_n, p_e_ann, p_e_n = prose(
        text,
        r"so it gives a third n the same (\d+) % as after any n\. In the training names, ann "
        r"is followed by a third n (\d+) times out of (\d+), by a (\d+) % of the time "
        r"\(against (\d+) % after any n\) and by e (\d+) % \(against (\d+) %\)",
    )

    def percent(counts, t):
        return round(100 * counts[t] / counts.sum())

    assert int(p_n) == percent(after_n, n)
    assert (int(then_n), int(total)) == (after_ann[n], after_ann.sum())
    assert (int(p_a_ann), int(p_a_n)) == (percent(after_ann, a), percent(after_n, a))
    assert (int(p_e_ann), int(p_e_n)) == (percent(after_ann, e), percent(after_n, e))
    # the trigram table: contexts seen, out of those that can occur (no </s>, <s> only first)
    seen, possible = re.search(
        r"trigram table: (\d+) contexts seen, out of (\d+) possible", text
    ).groups()
    letters = V - 2
    assert int(seen) == len(ngram_counts(train, 3, V, bos)[0]) <= int(possible)
    assert int(possible) == 1 + letters + letters**2
    assert f"'ann' occurs {after_ann.sum()} times as a context" in text


def test_choice_of_k_and_interpolation_weights_match_the_prose(page, names_split):
    raw, text = page
    vocab, (train, val, _) = names_split
    V, bos = len(vocab), vocab.stoi[BOS]
    curves = {
        n: [perplexity(NGramModel(train, n, V, bos).probabilities_of_next(val, k=k)) for k in KS]
        for n in ORDERS
    }
    for n, curve in curves.items():  # the printed search
        printed = re.search(
            rf"n = {n}: best k [\d.e-]+ +perplexity (\d+\.\d+), at the grid's ends "
            r"(\d+\.\d+) and (\d+\.\d+), worst (\d+\.\d+)",
            text,
        )
        assert printed, f"the search for n = {n} is no longer printed"
        assert [float(v) for v in printed.groups()] == [
            round(v, 2) for v in (min(curve), curve[0], curve[-1], max(curve))
        ]
    rarest_count, rarest, median, spread = prose(
        text,
        r"every context of the bigram model is seen at least (\d+) times in training \(the "
        r"rarest is (\w); the median one is seen ([\d,]+) times\).*?change by at most NUM % "
        r"over the whole grid\. The 3-, 4-, 5- and 6-gram curves are U-shaped",
    )
    low = max(100 * (max(curves[n]) / min(curves[n]) - 1) for n in (1, 2))
    high = min(100 * (max(curves[n]) / min(curves[n]) - 1) for n in (4, 5))
    assert float(spread) == pytest.approx(low, abs=0.06)
    assert high > 10 * float(spread), "higher orders care much more about k"
    contexts, counts = ngram_counts(train, 2, V, bos)
    totals = counts.sum(axis=1)
    assert (
        int(rarest_count) == totals.min() and rarest == vocab.itos[contexts[np.argmin(totals)][0]]
    )
    assert int(median.replace(",", "")) == int(np.median(totals))
    expected_u = [
        n
        for n, curve in curves.items()
        if 0 < np.argmin(curve) < len(KS) - 1 and min(curve[0], curve[-1]) > 1.05 * min(curve)
    ]
    assert expected_u == [3, 4, 5, 6], "the prose: the 3-, 4-, 5- and 6-gram curves"

    header = table_with(raw, "n", f"λ{'₀₁₂₃₄₅₆₇₈₉'[ORDERS[-1]]}")
    lambdas = [float(w) for w in header[-1][1:]]
    max_n, top, top_n, max_again, last, first = prose(
        text,
        r"Fitted for the (\d)-gram model, they give the largest share, NUM, to the "
        r"(\d)-gram estimate\. The model’s own (\d)-gram contexts get NUM, almost nothing, "
        r"and the unigram keeps NUM for emergencies",
    )
    assert int(max_n) == int(max_again) == ORDERS[-1] == len(lambdas)
    assert int(top_n) == 1 + int(np.argmax(lambdas))
    assert float(top) == pytest.approx(max(lambdas), abs=0.006)
    assert float(last) == pytest.approx(lambdas[-1], abs=0.0006)
    assert lambdas[-1] < 0.05  # "almost nothing"
    assert float(first) == pytest.approx(lambdas[0], abs=0.0006) and 0 < lambdas[0] < 0.05
    # the same weight, recalled where the perplexity table is discussed
    own_n, own_weight = prose(
        text, r"only the share they earn there \(the (\d)-gram’s own term gets NUM\)"
    )
    assert int(own_n) == ORDERS[-1] and own_weight == last


def test_test_perplexity_is_reported_once_for_the_model_chosen_on_validation(
    page, names_split, interpolated
):
    _, text = page
    vocab, (train, val, test) = names_split
    best = min(interpolated, key=lambda n: interpolated[n][0])
    model = NGramModel(train, best, len(vocab), vocab.stoi[BOS])
    expected = perplexity(model.interpolated_probabilities_of_next(test, interpolated[best][1]))
    assert f"chosen on validation: interpolated {best}-gram model" in text
    assert f"test perplexity {expected:.3f}" in text
    assert len(re.findall(r"test perplexity \d", text)) == 1
    test_ppl, val_ppl, n_weights, n_names = prose(
        text,
        r"The test perplexity, NUM, is close to the NUM measured on validation\..*?"
        r"They are only (\d+) numbers, though, fitted to ([\d,]+) names: .*?too\. The test "
        r"names confirm it\.",
    )
    assert float(test_ppl) == pytest.approx(expected, abs=0.005)
    assert float(val_ppl) == pytest.approx(interpolated[best][0], abs=0.005)
    # "close to" the validation perplexity, and so "the test names confirm it": within 3 %
    assert abs(expected / interpolated[best][0] - 1) < 0.03
    assert int(n_weights) == best == len(interpolated[best][1])
    assert int(n_names.replace(",", "")) == len(val)


def test_figures_diagram_notes_and_further_reading(page, built_book):
    raw, text = page
    figures = ("fig-ch02-context", "fig-ch02-sparsity", "fig-ch02-choose-k", "fig-ch02-gap")
    why = "sparsity, choice of k, and train/validation figures expected"
    check_figures(raw, *figures, at_least=3, why=why, built_book=built_book, referred=True)
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


def test_the_longer_the_context_the_more_samples_copy_a_training_name(page, names_split):
    """Samples of each order, and the share that are training names, as printed; the prose
    gives the bigram's and the 6-gram's share and why the 6-gram copies."""
    _, text = page
    printed = re.findall(
        r"^(\d)-gram: +(\d+\.\d)% training names +e\.g\. (.*)$", text, re.MULTILINE
    )
    assert [int(n) for n, _, _ in printed] == list(ORDERS)
    shares = [float(share) / 100 for _, share, _ in printed]
    assert all(a < b for a, b in itertools.pairwise(shares[1:]))  # grows from the bigram on
    assert all(len(samples.split(", ")) == 6 for _, _, samples in printed)
    bigram, last = prose(text, r"from NUM\s*% for the bigram to NUM\s*% for the 6-gram")
    assert (float(bigram), float(last)) == (round(shares[1] * 100), round(shares[-1] * 100))
    assert shares[-1] > 0.8
    # "of the contexts of five symbols seen in training, N% were followed by one letter only"
    vocab, (train, _, _) = names_split
    _, counts = NGramModel(train, 6, len(vocab), vocab.stoi[BOS]).tables[-1]
    single = ((counts > 0).sum(axis=1) == 1).mean()
    (shown,) = prose(text, r"seen in training, NUM\s*% were followed by one letter only")
    assert float(shown) == round(single * 100) and single > 0.5
