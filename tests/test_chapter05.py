"""Chapter 5's rendered page: the checks against PyTorch pass, the RNN beats counting, and the
measurements show what the prose says (fading memory, vanishing/exploding gradients, clipping).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _book_helpers import html_tables, read_page

from mini_llm.corpus import load_text
from mini_llm.ngram import count_bigrams
from mini_llm.smoothing import add_k_probabilities
from mini_llm.tokenizer import CharTokenizer


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, "ch05_rnn")


def number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, f"not on the page: {pattern}"
    return float(match.group(1))


def table(raw: str, first_column: str) -> list[list[str]]:
    for rows in html_tables(raw):
        if rows and rows[0][0] == first_column:
            return rows[1:]
    raise AssertionError(f"no table with first column {first_column!r}")


def test_hand_written_rnn_equals_pytorch_and_bptt_equals_autograd(page):
    raw, text = page
    assert number(r"largest difference from torch\.nn\.RNNCell: ([\d.e+-]+)", text) < 1e-12
    assert number(r"largest difference from\s+torch\.nn\.RNN: ([\d.e+-]+)", text) < 1e-12
    rows = table(raw, "gradient")
    assert [row[0] for row in rows] == ["W_xh", "W_hh", "b_h", "h0"]
    assert all(float(row[2]) < 1e-12 for row in rows)


def test_model_size_and_the_bigram_yardstick_are_recomputed(page):
    raw, text = page
    text_chars = load_text("shakespeare")
    tokenizer = CharTokenizer.from_text(text_chars)
    V, E, H = tokenizer.vocab_size, 32, 128
    parameters = V * E + H * E + H * H + H + H * V + V  # embedding, W_xh, W_hh, b_h, head
    assert f"{len(text_chars):,} characters, {V} distinct; {parameters:,} parameters" in text

    ids = tokenizer.encode_array(text_chars)
    split = int(0.9 * len(ids))
    counts = count_bigrams([ids[:split]], V)
    val = ids[split:]
    best = min(-np.log(add_k_probabilities(counts, k)[val[:-1], val[1:]]).mean()
               for k in (1.0, 0.1, 0.01, 0.001))
    rows = {row[0].split(" (")[0]: float(row[2]) for row in table(raw, "model")}
    assert rows["bigram counts"] == pytest.approx(best, abs=6e-4)
    assert rows["RNN"] < rows["bigram counts"] - 0.3


def test_sample_continues_the_prompt(page):
    _, text = page
    start = text.rindex("ROMEO:\n")
    assert len(text[start:start + 310]) == 310 and "\n" in text[start + 7:start + 310]


def test_memory_fades_and_gradients_vanish_or_explode_as_the_prose_says(page):
    _, text = page
    k1 = number(r"change at k = 1: ([\d.e+-]+)", text)
    k10 = number(r"k = 10: ([\d.e+-]+)", text)
    k40 = number(r"k = 40: ([\d.e+-]+)", text)
    assert k1 > 10 * k10 > 100 * k40 > 0
    ratios = re.search(r"relative to the last: ρ = 0\.5: ([\d.e+-]+), ρ = 1: ([\d.e+-]+), "
                       r"ρ = 2: ([\d.e+-]+), ρ = 4: ([\d.e+-]+), trained: ([\d.e+-]+)", text)
    assert ratios, "the gradient ratios are not on the page"
    half, one, two, four, trained = map(float, ratios.groups())
    assert half < 1e-6 and four > 1e6  # astronomically small and large, as the text says
    assert half < one < two < four
    assert trained < 1e-3  # the trained model's gradient vanishes too


def test_clipping_rescues_the_run_and_equals_pytorch(page):
    _, text = page
    plain = number(r"no clipping\s+loss over the last 50 steps ([\d.]+)", text)
    clipped = number(r"clipped at norm 1\s+loss over the last 50 steps ([\d.]+)", text)
    assert clipped < plain - 1.0
    ours, theirs = re.search(r"clip_grad_norm_: norm ([\d.]+) vs ([\d.]+)", text).groups()
    assert ours == theirs
    assert number(r"clip_grad_norm_: norm [\d.]+ vs [\d.]+, largest difference ([\d.e+-]+)",
                  text) < 1e-6


def test_page_has_its_figures_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures and equations are there."""
    raw, _ = page
    assert len(re.findall(r'<img[^>]+src="[^"]+\.png"', raw)) >= 4, "loss curve, memory, gradients and clipping figures expected"
    assert raw.count('class="math') >= 8
