"""Chapter 1's rendered page holds the results its code computed, and its figures.

The expected values are recomputed here with mini_llm, so a change in the package that the page
did not pick up (or a page that stopped running its code) fails. Every number the prose states is
read back from the page and checked against the recomputation, and every comparison the prose
makes is checked on those numbers.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from _book_helpers import check_figures, page_fixture, prose

from mini_llm.corpus import load_corpus
from mini_llm.ngram import (
    average_nll,
    bigram_probabilities,
    count_bigrams,
    sample_sequence,
    sequence_probability,
)
from mini_llm.vocab import BOS, EOS, Vocabulary

page = page_fixture("ch01_bigrams")


@pytest.fixture(scope="module")
def names_model():
    """The chapter's split (one name in ten held out, seed 0) and its bigram model."""
    names = load_corpus("names")
    vocab = Vocabulary.from_sequences(names)
    order = np.random.default_rng(0).permutation(len(names))
    held_out_size = len(names) // 10
    train_names = [names[i] for i in order[held_out_size:]]
    held_out_names = [names[i] for i in order[:held_out_size]]
    train = [vocab.encode_with_boundaries(name) for name in train_names]
    held_out = [vocab.encode_with_boundaries(name) for name in held_out_names]
    counts = count_bigrams(train, len(vocab))
    return vocab, train_names, train, held_out_names, held_out, counts


def test_datawhale_example_is_computed(page):
    _, text = page
    assert "P(datawhale agent learns) = 0.1667" in text
    assert re.search(r"\\tfrac\{1\}\{2\}\\\)\s*=\s*0\.167\.", text), (
        "glued 0.167 missing from prose"
    )
    assert "P(<s> datawhale agent learns </s>) = 0.500" in text
    assert "P(<s> datawhale agent works </s>)  = 0.500" in text
    (p_framed,) = prose(text, r"\\tfrac12 \\cdot 1\\\) = NUM, and")
    assert float(p_framed) == pytest.approx(0.5)


def test_mle_is_derived_with_a_lagrange_multiplier(page):
    raw, text = page
    assert "Lagrange multiplier" in text
    assert r"\lambda_a" in raw and r"\Longrightarrow" in raw


def test_vocabulary_convention_and_count_range(page, names_model):
    _, text = page
    vocab, _, _, _, _, counts = names_model
    size, n_next = prose(text, r"The vocabulary has \\\(V\\\) = (\d+) tokens.*?Only (\d+) of them")
    assert int(size) == len(vocab) == 28 and int(n_next) == len(vocab) - 1
    low, high = prose(text, r"counts range from (\d+) to ([\d,]+)\.")
    assert int(low) == counts[counts > 0].min()
    assert int(high.replace(",", "")) == counts.max()


def test_patterns_read_off_the_counts_are_true(page, names_model):
    _, text = page
    vocab, train_names, _, _, _, counts = names_model
    end, start, q_u = prose(
        text,
        r"(\d+) % of the names end .*? after a vowel or n, (\d+) % start with a consonant, "
        r"and q is followed by u (\d+) % of the time",
    )
    vowels = set("aeiouy")
    assert int(end) == round(100 * np.mean([n[-1] in vowels | {"n"} for n in train_names]))
    assert int(start) == round(100 * np.mean([n[0] not in vowels for n in train_names]))
    q, u = vocab.stoi["q"], vocab.stoi["u"]
    assert int(q_u) == round(100 * counts[q, u] / counts[q].sum())
    assert int(end) > 50 and int(start) > 50 and int(q_u) > 90  # "patterns jump out"
    # the most likely next characters after q: only the non-zero ones are listed
    row = bigram_probabilities(counts)[q]
    top = [t for t in np.argsort(row)[::-1][:5] if row[t] > 0]
    listed = ", ".join(f"{vocab.itos[t]} {row[t]:.3f}" for t in top)
    assert re.search(rf"^P\(next \| q\): {listed}$", text, re.MULTILINE)
    assert " 0.000" not in listed


def test_sampled_names_match_the_package(page, names_model):
    _, text = page
    vocab, _, _, _, _, counts = names_model
    probs = bigram_probabilities(counts)
    generator = np.random.default_rng(seed=1234)
    start, end = vocab.stoi[BOS], vocab.stoi[EOS]

    def draw(model, count):
        return [
            "".join(vocab.decode(sample_sequence(model, generator, start, end)))
            for _ in range(count)
        ]

    flowing = " ".join(text.split())  # the printed lists wrap at 88 characters
    assert ", ".join(draw(probs, 15)) in flowing
    uniform = np.full_like(probs, 1 / (len(vocab) - 1))
    uniform[:, start] = 0.0
    uniform_samples = draw(uniform, 8)
    assert ", ".join(name or '""' for name in uniform_samples) in flowing

    # The prose explains the empty uniform name and the spread of a geometric length.
    n_empty, expected, sd, n_shown, sd_again, se, mean_uniform, n_shown_again = prose(
        text,
        r"(\d+) of the uniform names is empty.*?with mean .*?= (\d+) letters and a standard "
        r"deviation .*?≈ NUM, about as large as the mean\..*?the mean of (\d+) of them is "
        r"uncertain by about NUM / √\d+ ≈ (\d+) letters, so an average of NUM letters for "
        r"these (\d+) is no surprise\.",
    )
    V = len(vocab)
    lengths = [len(s) for s in uniform_samples]
    assert int(n_empty) == sum(name == "" for name in uniform_samples) >= 1
    assert int(expected) == V - 2
    assert float(sd) == float(sd_again) == pytest.approx(math.sqrt((V - 1) * (V - 2)), abs=0.05)
    assert int(n_shown) == int(n_shown_again) == len(uniform_samples)
    standard_error = math.sqrt((V - 1) * (V - 2)) / math.sqrt(len(uniform_samples))
    assert int(se) == round(standard_error)
    assert float(mean_uniform) == pytest.approx(np.mean(lengths), abs=0.05)
    # "no surprise": the mean lies within two standard errors of V - 2 (the page asserts it too)
    assert abs(np.mean(lengths) - (V - 2)) < 2 * standard_error


def test_bigram_names_are_measured_against_the_training_names(page, names_model):
    _, text = page
    vocab, train_names, _, _, _, counts = names_model
    probs = bigram_probabilities(counts)
    start, end = vocab.stoi[BOS], vocab.stoi[EOS]
    rng = np.random.default_rng(seed=5678)
    many = ["".join(vocab.decode(sample_sequence(probs, rng, start, end))) for _ in range(2000)]
    vowels = set("aeiouy")

    def shape(group):
        lengths = np.array([len(name) for name in group])
        shown = [name for name in group if name]
        return (
            lengths.mean(),
            lengths.std(),
            100 * np.mean([n[-1] in vowels | {"n"} for n in shown]),
            100 * np.mean([n[0] not in vowels for n in shown]),
        )

    expected = {"training names": shape(train_names), "bigram samples": shape(many)}
    for label, values in expected.items():  # the printed table
        printed = re.search(label + r" +(\d+\.\d+) +(\d+\.\d+) +(\d+)% +(\d+)%", text)
        assert printed, f"no printed row for {label}"
        assert float(printed.group(1)) == pytest.approx(values[0], abs=0.005)
        assert float(printed.group(2)) == pytest.approx(values[1], abs=0.005)
        assert int(printed.group(3)) == round(values[2])
        assert int(printed.group(4)) == round(values[3])

    n_many, mean_b, mean_t, end_b, start_b, end_t, start_t = prose(
        text,
        r"On average they are: over ([\d,]+) bigram names the mean length is "
        r"NUM letters, against NUM for the training names; (\d+) % end in a vowel or n and "
        r"(\d+) % start with a consonant, against the (\d+) % and (\d+) % we counted",
    )
    train, bigram = expected["training names"], expected["bigram samples"]
    assert int(n_many.replace(",", "")) == len(many)
    assert float(mean_b) == pytest.approx(bigram[0], abs=0.05)
    assert float(mean_t) == pytest.approx(train[0], abs=0.05)
    assert (int(end_b), int(start_b)) == (round(bigram[2]), round(bigram[3]))
    assert (int(end_t), int(start_t)) == (round(train[2]), round(train[3]))
    # "On average they are" shaped like names: the mean length within half a letter, both
    # shares within 5 points (the page asserts the same)
    assert abs(bigram[0] - train[0]) < 0.5
    assert abs(bigram[2] - train[2]) < 5 and abs(bigram[3] - train[3]) < 5

    sd_b, sd_t, shortest, longest = prose(
        text,
        r"Their lengths spread more, though \(a standard deviation of NUM letters "
        r"against NUM\), which is why the names above run from (\w+) to (\w+)\.",
    )
    assert float(sd_b) == pytest.approx(bigram[1], abs=0.05)
    assert float(sd_t) == pytest.approx(train[1], abs=0.05)
    assert bigram[1] > train[1]  # "spread more"
    generator = np.random.default_rng(seed=1234)  # the fifteen names shown on the page
    shown = [
        "".join(vocab.decode(sample_sequence(probs, generator, start, end))) for _ in range(15)
    ]
    assert (shortest, longest) == (min(shown, key=len), max(shown, key=len))


def test_nats_and_the_lagrange_multiplier_are_explained(page):
    _, text = page
    assert "the unit of the result is the nat" in " ".join(text.split())
    assert "A Lagrange multiplier is an extra unknown" in " ".join(text.split())


def test_nll_table_reports_held_out_names_both_ways(page, names_model):
    _, text = page
    vocab, _, train, held_out_names, held_out, counts = names_model
    probs = bigram_probabilities(counts)
    rows = {
        model: tuple(float(v) for v in values)
        for model, *values in re.findall(
            r"^(uniform|unigram|bigram)\s+(\d+\.\d+)\s+(\d+\.\d+)\s+([\d.]+|inf)$",
            text,
            flags=re.MULTILINE,
        )
    }
    assert set(rows) == {"uniform", "unigram", "bigram"}
    assert rows["uniform"][0] == pytest.approx(math.log(27), abs=5e-4)
    for column in (0, 1):  # train, and held out without the zero-probability names
        assert rows["bigram"][column] < rows["unigram"][column] < rows["uniform"][column]
    # all held-out names: the bigram model is infinite, the baselines stay finite
    assert math.isinf(rows["bigram"][2])
    assert math.isfinite(rows["unigram"][2]) and math.isfinite(rows["uniform"][2])
    assert rows["bigram"][0] == pytest.approx(average_nll(train, probs), abs=5e-4)
    assert "held-out NLL with them included: inf" in text

    impossible = [
        n for n, ids in zip(held_out_names, held_out) if sequence_probability(ids, probs) == 0.0
    ]
    (n_impossible,) = prose(text, r"held-out names without those (\d+)")
    assert int(n_impossible) == len(impossible) > 0
    scorable = [ids for n, ids in zip(held_out_names, held_out) if n not in impossible]
    assert rows["bigram"][1] == pytest.approx(average_nll(scorable, probs), abs=5e-4)

    uniform, train_nll, held_nll, unigram_all = prose(
        text,
        r"brings the NLL from NUM down to NUM nats per prediction on the names it "
        r"counted, and to NUM on the scorable held-out names.*?still scores NUM",
    )
    assert float(uniform) == pytest.approx(rows["uniform"][0], abs=0.005)
    assert float(train_nll) == pytest.approx(rows["bigram"][0], abs=0.005)
    assert float(held_nll) == pytest.approx(rows["bigram"][1], abs=0.005)
    assert float(unigram_all) == pytest.approx(rows["unigram"][2], abs=0.005)
    # "almost as good": held out within a few hundredths of training
    assert 0 <= float(held_nll) - float(train_nll) < 0.05
    (n_left_out,) = prose(text, r"Leaving out the (\d+) names it cannot score flatters")
    assert int(n_left_out) == len(impossible)
    assert "also on the held-out names it can score" in " ".join(text.split())
    (log_next,) = prose(text, r"scores \\\(\\log \(V - 1\)\\\) = NUM nats")
    assert float(log_next) == pytest.approx(math.log(len(vocab) - 1), abs=0.005)


def test_page_has_math_figures_summary_and_exercise_link(page, built_book):
    raw, text = page
    assert "Markov assumption" in text and "Summary" in text and "Learning goals" in text
    assert raw.count('class="math') >= 3  # display and inline math left for MathJax
    figures = ("fig-ch01-markov", "fig-ch01-counts", "fig-ch01-nll")
    why = "heatmap and NLL bar chart expected"
    check_figures(raw, *figures, at_least=2, why=why, built_book=built_book, referred=True)
    assert "Further reading" in text and "Shannon" in text
    link = re.search(r'href="([^"]*ch01_bigrams\.ipynb)"', raw)
    assert link, "no download link to the exercise notebook"
    assert (built_book / link.group(1)).exists()


def test_unknown_words_and_unseen_pairs_are_shown_not_asserted(page):
    _, text = page
    flowing = " ".join(text.split())
    assert "UnknownTokenError: token 'robot' is not in the vocabulary" in flowing
    (p_unseen,) = prose(text, r"P\(<s> datawhale learns </s>\) = NUM")
    assert float(p_unseen) == 0.0
    assert 'because "learns" never followed "datawhale"' in flowing.replace("“", '"').replace(
        "”", '"'
    )
