"""Chapter 1's rendered page holds the results its code computed, and its figures.

The expected values are recomputed here with mini_llm, so a change in the package that the page
did not pick up (or a page that stopped running its code) fails.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
from _book_helpers import read_page

from mini_llm.corpus import load_corpus
from mini_llm.ngram import bigram_probabilities, count_bigrams, sample_sequence
from mini_llm.vocab import BOS, EOS, Vocabulary


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, "ch01_bigrams")


def test_datawhale_example_is_computed(page):
    _, text = page
    assert "P(datawhale agent learns) = 0.1667" in text
    assert re.search(r"\\tfrac\{1\}\{2\}\\\)\s*=\s*0\.167\.", text), "glued 0.167 missing from prose"
    assert "P(<s> datawhale agent learns </s>) = 0.500" in text


def test_sampled_names_match_the_package(page):
    _, text = page
    names = load_corpus("names")
    vocab = Vocabulary.from_sequences(names)
    order = np.random.default_rng(0).permutation(len(names))
    train = [vocab.encode_with_boundaries(names[i]) for i in order[len(names) // 10 :]]
    probs = bigram_probabilities(count_bigrams(train, len(vocab)))
    generator = np.random.default_rng(seed=1234)
    samples = [
        "".join(vocab.decode(sample_sequence(probs, generator, vocab.stoi[BOS], vocab.stoi[EOS])))
        for _ in range(15)
    ]
    assert ", ".join(samples) in text


def test_nll_table_orders_the_models_and_uses_log_27(page):
    _, text = page
    rows = {
        model: (float(train), float(held))
        for model, train, held in re.findall(r"^(uniform|unigram|bigram)\s+([\d.]+)\s+([\d.]+)$",
                                             text, flags=re.MULTILINE)
    }
    assert set(rows) == {"uniform", "unigram", "bigram"}
    assert rows["uniform"][0] == pytest.approx(math.log(27), abs=5e-4)
    assert rows["bigram"][0] < rows["unigram"][0] < rows["uniform"][0]
    assert rows["bigram"][1] < rows["unigram"][1] < rows["uniform"][1]
    assert "held-out NLL with them included: inf" in text


def test_page_has_math_figures_summary_and_exercise_link(page, built_book):
    raw, text = page
    assert "Markov assumption" in text and "Summary" in text and "Learning goals" in text
    assert raw.count('class="math') >= 3  # display and inline math left for MathJax
    images = re.findall(r'<img[^>]+src="([^"]+\.png)"', raw)
    assert len(images) >= 2, "heatmap and NLL bar chart expected"
    for src in images:
        assert (built_book / src).stat().st_size > 10_000, f"{src} looks empty"
    link = re.search(r'href="([^"]*ch01_bigrams\.ipynb)"', raw)
    assert link, "no download link to the exercise notebook"
    assert (built_book / link.group(1)).exists()
