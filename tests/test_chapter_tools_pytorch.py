"""The tools page's rendered text holds what its code measured, and its figures.

The page (book/tools_pytorch.md) sits between chapters 2 and 3. Its numbers are read back from
the build's glue record and from the visible text, and checked against a recomputation with
mini_llm where that is cheap: chapter 1's counting score on chapter 1's split, the uniform start
of the neural bigram model, its training run (a second or two), the finite differences and the
gradient-descent paths. Every comparison the prose makes is checked on those numbers.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from _book_helpers import check_figures, glued_fixture, page_fixture, shown

from mini_llm.corpus import load_corpus
from mini_llm.gradients import gradient_descent
from mini_llm.neural_bigram import NeuralBigram, train_neural_bigram
from mini_llm.ngram import (
    average_nll,
    bigram_probabilities,
    count_bigrams,
    ngram_windows,
    sequence_probability,
)
from mini_llm.vocab import Vocabulary

DOCNAME = "tools_pytorch"
FIGURES = (
    "fig-tools-matvec",
    "fig-tools-derivative",
    "fig-tools-descent",
    "fig-tools-loss",
    "fig-tools-learned",
)
DIAGRAM = "fig-tools-neural-bigram"
SUPERSCRIPT = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")

page = page_fixture(DOCNAME)
# The prose formats most values ({glue:text}`key:.4f`): each is checked with `shown`.
glued = glued_fixture(DOCNAME, in_prose=False)


def scientific(text: str) -> float:
    """'3 × 10⁻¹⁰' (how the page writes a small number) -> 3e-10."""
    mantissa, power = text.split(" × 10")
    return float(mantissa) * 10.0 ** int(power.translate(SUPERSCRIPT))


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def names_data():
    """Chapter 1's split (one name in ten held out, seed 0), its counts and its pairs."""
    names = load_corpus("names")
    vocab = Vocabulary.from_sequences(names)
    order = np.random.default_rng(0).permutation(len(names))
    held_out_size = len(names) // 10
    train = [vocab.encode_with_boundaries(names[i]) for i in order[held_out_size:]]
    held_out = [vocab.encode_with_boundaries(names[i]) for i in order[:held_out_size]]
    counts = count_bigrams(train, len(vocab))
    pairs = torch.from_numpy(ngram_windows(train, 2))
    return vocab, train, held_out, counts, pairs


def test_scientific_reads_the_pages_notation():
    assert scientific("3 × 10⁻¹⁰") == pytest.approx(3e-10)
    assert scientific("4.1 × 10⁻⁴") == pytest.approx(4.1e-4)


def test_counting_score_and_uniform_start_are_chapter_1s(page, glued, names_data):
    vocab, train, _, counts, pairs = names_data
    probs = bigram_probabilities(counts)
    assert shown(page, glued, "tools_counting_nll", ".4f") == pytest.approx(
        average_nll(train, probs), abs=1e-9
    )
    assert shown(page, glued, "tools_log_v", ".3f") == pytest.approx(math.log(len(vocab)))
    assert len(vocab) == 28 and glued["tools_v_squared"] == 28 * 28
    assert shown(page, glued, "tools_n_pairs") == f"{len(pairs):,}" == f"{counts.sum():,}"
    _, text = page
    assert "cross_entropy of the log-table: " in text  # the same score, through PyTorch
    assert "one_hot(ids, V) @ table == table[ids]: True" in text


def test_broadcasting_without_keepdim_is_shown_to_be_wrong(page):
    _, text = page
    assert re.search(r"rows sum to 1, keepdim: +True", text)
    assert re.search(r"rows sum to 1, no keepdim: +False", text)
    assert "must match the size of tensor b" in flat(text)
    assert "from the right" in text and "equal, or one of them 1" in flat(text)


def test_finite_differences_shrink_like_h_and_h_squared(page, glued):
    one_sided = shown(page, glued, "tools_power_one_sided", ".2f")
    central = shown(page, glued, "tools_power_central", ".2f")
    assert abs(one_sided - 1) < 0.1 and abs(central - 2) < 0.1
    # f(x) = x^3 - 2x at 1, h = 0.01: errors 3h + h^2 and h^2
    assert shown(page, glued, "tools_one_sided_error", ".4f") == pytest.approx(0.0301)
    assert scientific(shown(page, glued, "tools_central_error")) == pytest.approx(1e-4)


def test_gradient_descent_paths_follow_the_factor_one_minus_two_eta(page, glued):
    steps = shown(page, glued, "tools_gd_steps")
    distances = {}
    for key in ("small", "good", "large"):
        rate = shown(page, glued, f"tools_gd_rate_{key}")
        factor = shown(page, glued, f"tools_gd_factor_{key}", ".1f")
        assert factor == pytest.approx(1 - 2 * rate)
        path = gradient_descent(lambda x: 2 * (x - 3), 0.0, rate, steps)
        distances[key] = abs(path[-1] - 3)
        assert distances[key] == pytest.approx(3 * abs(1 - 2 * rate) ** steps)
    assert shown(page, glued, "tools_gd_distance_small", ".2f") == pytest.approx(distances["small"])
    assert scientific(shown(page, glued, "tools_gd_distance_good")) == pytest.approx(
        distances["good"], rel=0.2
    )
    assert shown(page, glued, "tools_gd_distance_large", ".1f") == pytest.approx(distances["large"])
    assert glued["tools_gd_rate_large"] > 1  # "a rate above 1 diverges"
    assert distances["large"] > 3 > distances["small"] > 0.1  # diverged; still far
    assert distances["good"] < 1e-6  # converged


def test_autograd_agrees_with_finite_differences_in_float64_only(page, glued):
    _, text = page
    diff64 = scientific(shown(page, glued, "tools_check_diff64"))
    diff32 = shown(page, glued, "tools_check_diff32", ".2f")
    largest = shown(page, glued, "tools_check_largest", ".3f")
    assert diff64 < 1e-8
    assert diff32 > largest > 1000 * diff64  # "more than the largest entry of the gradient"
    assert glued["tools_check_loss"] == pytest.approx(3.8, abs=0.5)
    assert shown(page, glued, "tools_check_names") == 200
    assert "x.grad after a second one: tensor(2.)" in text  # gradients accumulate
    assert re.search(r"torch\.autograd\.grad: tensor\(1\.\)\s+x\.grad: None", text)
    assert "same outputs after loading: True" in text
    assert "same seed, same weights: True" in text


def test_neural_bigram_reaches_the_counting_score(page, glued, names_data):
    vocab, train, _, counts, pairs = names_data
    counting = average_nll(train, bigram_probabilities(counts))
    rate = shown(page, glued, "tools_rate", ".0f")
    steps = shown(page, glued, "tools_steps")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the page runs it; small tensors are fastest on one
    try:
        model = NeuralBigram(len(vocab))
        losses = train_neural_bigram(model, pairs[:, 0], pairs[:, 1], rate, steps)
        with torch.no_grad():
            final = F.cross_entropy(model(pairs[:, 0]), pairs[:, 1]).item()
    finally:
        torch.set_num_threads(threads)
    assert losses[0] == pytest.approx(math.log(len(vocab)), abs=1e-5)
    assert shown(page, glued, "tools_final_nll", ".4f") == pytest.approx(final, abs=1e-5)
    gap = shown(page, glued, "tools_gap", ".4f")
    assert gap == pytest.approx(final - counting, abs=1e-5)
    assert 0 < gap < 0.01  # "within 0.01 nats" (the loss figure's caption: "close")
    assert all(np.diff(losses) < 0)  # "every one of its steps lowered the loss"

    slow = shown(page, glued, "tools_final_slow", ".4f")
    fast = shown(page, glued, "tools_final_fast", ".4f")
    assert glued["tools_rate_slow"] < rate < glued["tools_rate_fast"]
    assert slow > glued["tools_final_nll"] and fast > glued["tools_final_nll"]
    assert shown(page, glued, "tools_rises_fast") > steps // 4
    assert min(slow, fast) > counting  # "no curve goes below the counting score"
    _, text = page
    assert "the same losses as the loop above: True" in text
    assert "the </s> row is still all zeros: True" in text
    share = shown(page, glued, "tools_median_share", ".1f")
    totals = counts.sum(axis=1)
    assert share == pytest.approx(100 * np.median(totals[totals > 0]) / totals.sum())


def test_the_gradient_vanishing_at_the_counts_is_derived(page):
    raw, text = page
    assert "Lagrange multiplier" in text and "convex" in text
    assert r"\frac{N_a}{N}" in raw and r"\operatorname{softmax}" in raw


def test_held_out_names_get_a_finite_score(page, glued, names_data):
    _, _, held_out, counts, _ = names_data
    probs = bigram_probabilities(counts)
    assert math.isinf(average_nll(held_out, probs))
    scorable = [ids for ids in held_out if sequence_probability(ids, probs) > 0]
    assert shown(page, glued, "tools_n_held_out") == len(held_out)
    assert shown(page, glued, "tools_n_unscorable") == len(held_out) - len(scorable) > 0
    held = shown(page, glued, "tools_held_nll", ".4f")
    assert math.isfinite(held) and glued["tools_final_nll"] < held < glued["tools_log_v"]
    counting = shown(page, glued, "tools_counting_scorable", ".4f")
    assert counting == pytest.approx(average_nll(scorable, probs), abs=1e-9)
    neural = shown(page, glued, "tools_held_nll_scorable", ".4f")
    assert counting < neural < counting + 0.02  # "counting is slightly ahead"
    assert scientific(shown(page, glued, "tools_never_min")) > 0  # never zero
    assert 0 < glued["tools_never_max"] < 0.05  # "small"
    assert shown(page, glued, "tools_n_rare_pairs") >= 10


def test_page_has_figures_diagram_reading_and_exercise_link(page, built_book):
    raw, text = page
    assert "Learning goals" in text and "Summary" in text and "Further reading" in text
    check_figures(
        raw,
        *FIGURES,
        DIAGRAM,
        at_least=len(FIGURES),
        why="the product, derivative, descent, loss and learned-vs-counted figures",
        built_book=built_book,
        referred=True,
        math=10,
    )
    assert "Autograd mechanics" in text and "Rumelhart" in text
    link = re.search(r'href="([^"]*tools_pytorch\.ipynb)"', raw)
    assert link, "no download link to the exercise notebook"
    assert (built_book / link.group(1)).exists()
