"""Chapter 7's rendered page: the task, the held-out test numbers, the attention example, the
accuracy over three seeds and the alignments, checked for what the prose says about them."""

from __future__ import annotations

import itertools
import re

import numpy as np
import torch
from _book_helpers import glued_fixture, html_tables, page_fixture, prose

from mini_llm.seq2seq import (
    BOS,
    Seq2Seq,
    is_held_out,
    number_pairs,
    number_to_words,
    vocabularies,
)

SEEDS, STEPS, BATCH = (0, 1, 2), 400, 64  # the chapter's training streams


page = page_fixture("ch07_attention")
glued = glued_fixture("ch07_attention")


def number_of(digits: list[str]) -> int:
    return int("".join(digits))


def test_examples_are_numbers_written_out_correctly(page):
    _, text = page
    examples = re.findall(r"^([a-z ]+?)\s+-> (\d+)$", text, re.MULTILINE)
    assert len(examples) == 6
    for words, digits in examples:
        assert " ".join(number_to_words(int(digits))) == words
        assert not is_held_out(int(digits))  # drawn from the training numbers
    source, target = vocabularies()
    assert f"source vocabulary: {len(source)} tokens" in text
    assert f"target vocabulary: {len(target)} tokens (" in text


def test_the_ranges_the_task_paragraph_states_are_recomputed(page, glued):
    """Numbers from 1 (the exponent starts at 0, so 0 is never drawn) to 999,999; every one of
    them is 1 to 9 words and 1 to 6 digits; "thousand" pads with none to three zeros."""
    draws = [
        number_of(digits)
        for seed in (0, 1)
        for split in ("train", "test")
        for _, digits in number_pairs(20_000, np.random.default_rng(seed), split)
    ]
    assert 0 not in draws
    assert glued["ch07_smallest"] == f"{min(draws):,}" == "1"
    assert glued["ch07_largest"] == f"{999_999:,}"
    assert max(draws) <= 999_999
    every = range(1, 1_000_000)
    lengths = [len(number_to_words(n)) for n in every]
    assert (glued["ch07_min_words"], glued["ch07_max_words"]) == (min(lengths), max(lengths))
    assert (glued["ch07_min_digits"], glued["ch07_max_digits"]) == (1, 6)
    zeros = {3 - len(str(n % 1000)) if n % 1000 else 3 for n in range(1000, 1_000_000)}
    for n in (12_000, 30_019, 312_006, 12_345):  # "thousand" stands right before those zeros
        words, rest = number_to_words(n), n % 1000
        after = number_to_words(rest) if rest else []
        assert words[len(words) - len(after) - 1] == "thousand"
    assert min(zeros) == 0 and glued["ch07_thousand_zeros_max"] == max(zeros)
    _, text = page
    flat = " ".join(text.split())
    assert f"stands for anything up to {max(zeros)} zeros, the zeros that pad" in flat
    assert "from 0 to" not in text and "1 to 11 words" not in text


def test_both_models_and_their_budget_are_what_the_prose_says(page, glued):
    _, text = page
    assert glued["ch07_steps"] == f"{STEPS:,}" and glued["ch07_batch"] == BATCH
    source, target = vocabularies()
    sizes = {}
    for name, attention in (("without attention", False), ("with attention", True)):
        model = Seq2Seq(
            len(source), len(target), target.stoi[BOS], dim=glued["ch07_dim"], attention=attention
        )
        sizes[name] = sum(p.numel() for p in model.parameters())
    assert f"parameters: {sizes['without attention']:,} without attention; " in text
    assert f"{sizes['with attention']:,} with attention" in text
    assert sizes["without attention"] == sizes["with attention"]  # "the same number"
    assert glued["ch07_params"] == f"{sizes['with attention']:,}"
    assert "Both models have the same number of parameters" in " ".join(text.split())
    torch.manual_seed(0)  # the attention weights exist, unused, without attention
    plain = Seq2Seq(len(source), len(target), target.stoi[BOS], dim=8, attention=False)
    assert {"W_q", "W_k", "v"} <= {name for name, _ in plain.named_parameters()}
    # "still learning when the budget ends: its training loss, averaged over 50 steps at a
    # time, fell from ... to ... in the last 100 steps"
    assert glued["ch07_loss_span"] == 2 * glued["ch07_loss_window"]
    assert float(glued["ch07_plain_loss_end"]) < float(glued["ch07_plain_loss_before"])
    assert glued["ch07_loss_window"] < STEPS


def test_no_test_number_was_ever_trained_on(page):
    """Regenerate the chapter's three training streams and its test set: they share no number,
    and the page reports the same counts."""
    _, text = page
    test = {
        number_of(d)
        for _, d in number_pairs(2000, np.random.default_rng(99), "test", distinct=True)
    }
    trained = set()
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        for _ in range(STEPS):
            trained.update(number_of(d) for _, d in number_pairs(BATCH, rng, "train"))
    assert not trained & test
    assert all(is_held_out(n) for n in test) and not any(is_held_out(n) for n in trained)
    held_out = sum(is_held_out(n) for n in range(1_000_000))
    assert f"held out for testing: {held_out:,} of the 1,000,000 numbers" in text
    assert f"test set: {len(test):,} different held-out numbers" in text
    below = [n for n in range(1000) if not is_held_out(n)]
    drawn = len(trained.intersection(below))
    assert drawn > 0.95 * len(below)  # "short numbers come up again and again"
    assert f"numbers trained on: {len(trained):,} different ones" in text
    assert f"of the {len(below)} training numbers below 1,000: {drawn}" in text
    assert "numbers trained on that are in the test set: 0" in text
    assert (
        f"handed out {len(trained):,} different numbers, and 0 of them are in the test set"
    ) in " ".join(text.split())
    assert "one number in five" in text and 0.19 < held_out / 1e6 < 0.21


def test_the_attention_example_sums_to_one_and_ignores_padding(page):
    _, text = page
    weights = re.search(r"weights \[([\d. ]+)\]\s+sum ([\d.]+)", text)
    assert weights, "the attention example is not on the page"
    values = [float(w) for w in weights.group(1).split()]
    assert len(values) == 3 and values[2] == 0.0 and float(weights.group(2)) == 1.0
    assert "weighted mean of the first two h_j: True" in text


def accuracy_table(raw: str) -> tuple[list[str], dict[str, list[tuple[float, float, float]]]]:
    """The results table (a row per group of test numbers, a column per model): the groups and,
    per model, (mean, lowest, highest) per group."""
    cell = re.compile(r"([\d.]+)% \(([\d.]+)–([\d.]+)\)")
    for rows in html_tables(raw):
        if rows and rows[0][0] == "test numbers":
            return [row[0] for row in rows[1:]], {
                model: [
                    tuple(float(v) / 100 for v in cell.fullmatch(row[column]).groups())
                    for row in rows[1:]
                ]
                for column, model in enumerate(rows[0][1:], start=1)
            }
    raise AssertionError("no accuracy table")


def percent(value: float) -> str:
    """The page's percentages: one decimal, or two where one would show a miss as 100.0%."""
    text = f"{value:.1%}"
    return f"{value:.2%}" if text == "100.0%" and value < 1 else text


def span(low: float, high: float) -> str:
    """How the page states the seeds' range: '76.4% to 80.2%', '99.95% to 100.0%' or
    '100.0% each'."""
    low_text, high_text = percent(low), percent(high)
    return f"{low_text} each" if low_text == high_text else f"{low_text} to {high_text}"


def test_attention_wins_over_three_seeds_and_the_plain_model_degrades_with_length(page):
    raw, text = page
    groups, scores = accuracy_table(raw)
    assert groups[0] == "all (2,000)"
    test_pairs = number_pairs(2000, np.random.default_rng(99), "test", distinct=True)
    longest = max(len(words) for words, _ in test_pairs)
    counts = [
        sum(low <= len(words) <= high for words, _ in test_pairs)
        for low, high in ((1, 3), (4, 6), (7, longest))
    ]
    assert groups[1:] == [
        f"1–3 words ({counts[0]:,})",
        f"4–6 words ({counts[1]:,})",
        f"7–{longest} words ({counts[2]:,})",
    ]
    plain, attention = scores["without attention"], scores["with attention"]
    for mean, low, high in attention:  # "almost perfectly at every length", every seed
        assert low > 0.97 and low <= mean <= high
    for mean, low, high in plain + attention:  # no miss is rounded up to 100.0%
        assert (percent(mean) == "100.0%") == (low == high == 1.0)
    if any(low < 1 for _, low, _ in attention[1:]):  # a seed missed a number of some length,
        assert attention[0][1] < 1  # so its score on all of them is below 100%
    assert plain[1][0] > plain[2][0] > plain[3][0] + 0.1  # falls with the length of the input
    gap = attention[0][0] - plain[0][0]
    assert gap > 0.1  # "the gap between the models is much larger" than the seeds' spread
    for mean, low, high in (plain[0], attention[0]):
        assert high - low < gap / 2
    flat = " ".join(text.split())
    assert (
        f"gets {percent(plain[0][0])} of the held-out numbers exactly right "
        f"({span(*plain[0][1:])} over the seeds), from {percent(plain[1][0])} of the short ones "
        f"down to {percent(plain[3][0])} of the longest"
    ) in flat
    assert f"the three seeds score {span(*attention[0][1:])}, and length" in flat
    assert f"hardly matters ({percent(attention[3][0])} of the longest)" in flat
    assert "6 models, 400 steps each" in text
    before, end = re.search(r"fell from ([\d.]+) to ([\d.]+)", flat).groups()
    assert float(end) < float(before)  # "still learning when the budget ends"


def test_alignments_are_drawn_for_correct_translations_of_held_out_numbers(page):
    _, text = page
    printed = re.findall(
        r"^(\d+) \(held out: (\w+)\): model wrote (\d+)\n\s+(.+)$", text, re.MULTILINE
    )
    assert len(printed) == 3
    for number, held_out, wrote, _ in printed:
        assert held_out == "True" and is_held_out(int(number)) and wrote == number
    number, _, _, pairs = printed[0]
    read = [pair.split("<-") for pair in pairs.split()]
    glued = ", ".join(f"{digit} from “{word}”" for digit, word in read)
    assert f"the model reads {glued}:" in " ".join(text.split())
    assert [digit for digit, _ in read] == [*number, "</s>"]


def test_page_has_its_figures_diagram_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures, diagram and equations are there."""
    raw, _ = page
    assert len(re.findall(r'<img[^>]+src="[^"]+\.png"', raw)) >= 2, "loss curves and heatmaps"
    assert raw.count('class="math') >= 4
    assert re.search(r"<(object|img)[^>]+graphviz", raw), "the encoder-decoder diagram"


def test_the_zero_that_pads_nineteen_is_read_from_the_word_the_weights_show(page):
    """The prose names the word the printed weights give the most to, for the zero of 30019
    that no word of its own says (the first digit after the thousands)."""
    _, text = page
    line = r"^30019 \(held out: True\): model wrote 30019\n\s+(.+)$"
    printed = re.search(line, text, re.MULTILINE)
    read = [pair.split("<-") for pair in printed.group(1).split()]
    pad = len(str(30019 // 1000))
    digit, word = read[pad]
    assert digit == "0" and word == "thousand" != read[pad + 1][1]
    assert (
        "For thirty thousand nineteen it reads the zero that pads nineteen to three digits, a "
        f"digit that comes from no word of its own, from {word}, the word that stands for it."
    ) in " ".join(text.split())
    assert "nineteen after thousand needs a zero" not in " ".join(text.split())


def digit_table(raw: str) -> tuple[list[str], dict[str, list[tuple[str, float, float, float]]]]:
    """The table by number of digits: the groups and, per model, per group, the mean as the page
    writes it and (mean, lowest, highest) as shares."""
    cell = re.compile(r"(([\d.]+)%) \(([\d.]+)–([\d.]+)\)")
    for rows in html_tables(raw):
        if rows and rows[0][0] == "number of digits":
            scores = {}
            for column, model in enumerate(rows[0][1:], start=1):
                found = [cell.fullmatch(row[column]).groups() for row in rows[1:]]
                scores[model] = [(t, *(float(v) / 100 for v in vs)) for t, *vs in found]
            return [row[0] for row in rows[1:]], scores
    raise AssertionError("no table by number of digits")


def test_the_plain_models_mistakes_are_shown_and_measured_by_digits(page, glued):
    """The first six test numbers the seed-0 model without attention gets wrong, in the test
    set's order; its accuracy by number of digits; and what its wrong answers have in common."""
    raw, text = page
    flat = " ".join(text.split())
    test_pairs = number_pairs(2000, np.random.default_rng(99), "test", distinct=True)
    position = {"".join(digits): i for i, (_, digits) in enumerate(test_pairs)}
    examples = re.findall(
        r"^([a-z ]+)\n\s+correct: (\d+), without attention: (\S*), with attention: (\S*)$",
        text,
        re.MULTILINE,
    )
    assert len(examples) == 6
    for words, right, plain, attention in examples:
        assert words == " ".join(number_to_words(int(right))) and right in position
        assert plain != right and attention == right  # "writes all six correctly"
    order = [position[right] for _, right, _, _ in examples]
    assert order == sorted(order)  # in the order of the test set
    assert "The model with attention writes all six correctly." in flat
    # "the right digits in a wrong order, and a 0 left out"
    assert any(sorted(plain) == sorted(right) for _, right, plain, _ in examples)
    assert any(plain.count("0") < right.count("0") for _, right, plain, _ in examples)

    groups, scores = digit_table(raw)
    lengths = [len(digits) for _, digits in test_pairs]
    spans = ((1, 3), (4, 4), (5, 5), (6, 6))
    counts = [sum(low <= n <= high for n in lengths) for low, high in spans]
    assert groups == [
        f"{low}–{high} ({count:,})" if low < high else f"{low} ({count:,})"
        for (low, high), count in zip(spans, counts)
    ]
    plain, attention = scores["without attention"], scores["with attention"]
    means = [mean for _, mean, _, _ in plain]
    assert all(a > b for a, b in itertools.pairwise(means))  # falls with every digit past three
    assert all(mean > 0.99 for _, mean, _, _ in attention)  # "hardly matters"
    for _, mean, low, high in plain + attention:
        assert low <= mean <= high
    overall = accuracy_table(raw)[1]
    for model, rows in scores.items():  # the groups make up the whole test set
        weighted = sum(mean * n for (_, mean, _, _), n in zip(rows, counts)) / sum(counts)
        assert abs(weighted - overall[model][0][0]) < 0.001, model
    lowest = min(attention, key=lambda row: row[1])[0]
    assert (
        f"from {plain[0][0]} on the numbers of one to three digits to {plain[-1][0]} on those "
        f"of six, while the number of digits hardly matters to the model with attention: it "
        f"scores at least {lowest} on every group"
    ) in flat

    errors, reordered, first_right = prose(
        flat,
        r"Of the ([\d,]+) wrong answers of the three seeds without attention, NUM% contain "
        "exactly the right digits in another order, and NUM% begin with the right digit",
    )
    assert errors == glued["ch07_plain_errors"]
    wrong = len(SEEDS) * len(test_pairs) * (1 - overall["without attention"][0][0])
    assert abs(int(errors.replace(",", "")) - wrong) <= 3  # the first table, rounded
    assert float(reordered) > 50 and float(first_right) > 90
    in_test, in_errors = prose(
        flat, "Numbers with a 0 in them are NUM% of the test set but NUM% of these wrong answers"
    )
    with_zero = np.mean(["0" in "".join(digits) for _, digits in test_pairs])
    assert in_test == f"{with_zero:.1%}"[:-1]
    assert float(in_errors) > 1.5 * float(in_test)  # "far more than their share"
    assert "most of its wrong answers have the right digits in a wrong order" in flat
