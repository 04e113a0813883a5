"""Chapter 4's rendered page: the corpus figures, the pairs, the loss, and what the vectors know.

Counts and pairs are recomputed here independently of the page; the trained vectors' answers
come from the build, so they are checked for what the prose says about them.
"""

from __future__ import annotations

import math
import re

import pytest
from _book_helpers import html_tables, read_page

from mini_llm.corpus import load_corpus
from mini_llm.vocab import word_tokens


@pytest.fixture(scope="module")
def page(built_book):
    return read_page(built_book, "ch04_embeddings")


def table_with_header(raw: str, *columns: str) -> list[list[str]]:
    """The rows of the table whose header starts with ``columns``."""
    for rows in html_tables(raw):
        if rows and rows[0][:len(columns)] == list(columns):
            return rows
    raise AssertionError(f"no table whose header starts with {columns}")


def test_corpus_figures_are_recomputed(page):
    _, text = page
    words = [w for play in load_corpus("shakespeare") for w in word_tokens(play)]
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    frequent = sum(1 for n in counts.values() if n >= 5)
    assert (f"{len(words):,} words, {len(counts):,} distinct; {frequent:,} occur at least 5 "
            "times") in text
    top = max(counts, key=counts.get)
    assert f"most frequent: {top} ({counts[top]:,})" in text


def test_pairs_of_the_example_line_are_every_word_within_two_places(page):
    _, text = page
    line = ["to", "be", "or", "not", "to", "be", "that", "is", "the", "question"]
    near_not = [line[j] for j in range(len(line)) if 0 < abs(j - line.index("not")) <= 2]
    total = sum(1 for i in range(len(line)) for j in range(len(line)) if 0 < abs(i - j) <= 2)
    assert f"{len(line)} words, window 2 -> {total} pairs" in text
    shown = re.search(r"\d+ pairs; those with center 'not':\s*(\(not.+)", text).group(1)
    assert sorted(re.findall(r"\(not, (\w+)\)", shown)) == sorted(near_not)


def test_untrained_loss_is_k_plus_one_log_two_and_training_lowers_it(page):
    _, text = page
    got, formula = re.search(r"untrained loss ([\d.]+) = \(K \+ 1\) log 2 = ([\d.]+)", text).groups()
    assert got == formula == f"{6 * math.log(2):.4f}"
    first, last = map(float, re.search(r"loss ([\d.]+) at the first step, ([\d.]+) over the last",
                                       text).groups())
    assert first == pytest.approx(6 * math.log(2), abs=1e-3)
    assert last < first - 1.0


def test_noise_table_lifts_rare_words_and_lowers_frequent_ones(page):
    raw, _ = page
    table = table_with_header(raw, "word", "count", "power 1", "power 0.75", "power 0 (uniform)")
    rows = {row[0]: [float(x) for x in row[2:]] for row in table[1:]}
    _, power_075, uniform = zip(*rows.values(), strict=True)
    assert rows["the"][1] < rows["the"][0] and rows["ducats"][1] > rows["ducats"][0]
    assert len(set(uniform)) == 1 and all(a > 0 for a in power_075)


def test_neighbours_are_distinct_other_words_showing_what_the_prose_names(page):
    raw, _ = page
    table = table_with_header(raw, "word", "nearest neighbours (most similar first)")
    neighbours = {row[0]: row[1].split(", ") for row in table[1:]}
    assert len(neighbours) == 8
    for word, found in neighbours.items():
        assert len(found) == len(set(found)) == 6 and word not in found
    named = {  # what the paragraph under the table points to
        "king": {"henry", "edward", "richard", "warwick", "york", "lancaster", "liege", "vi"},
        "night": {"day", "morrow", "morning", "midnight", "noon", "hours", "evening"},
        "thou": {"art", "dost", "wilt"},
        "rome": {"roman", "romans", "tribunes", "tribune", "senators", "capitol", "patricians",
                 "emperor", "caesar's", "emperor's"},
    }
    for word, expected in named.items():
        assert len(set(neighbours[word]) & expected) >= 2, (word, neighbours[word])


def test_analogies_beat_the_random_control_and_the_page_reports_them_honestly(page):
    raw, text = page
    rows = table_with_header(raw, "question")[1:]
    assert len(rows) == 16
    right = 0
    for question, expected, answer, others, verdict in rows:
        a, b, c = re.match(r"(\S+) : (\S+) :: (\S+) : \?", question).groups()
        top = [answer, *others.split(", ")]
        assert not {a, b, c} & set(top), question
        assert verdict == ("yes" if answer == expected else "top 5" if expected in top else "no")
        right += verdict == "yes"
    hits, hits_5, random_hits = map(int, re.search(
        r"trained vectors: (\d+) of 16 right at the first guess, (\d+) in the top 5; "
        r"random vectors: (\d+) of 16", text).groups())
    assert hits == right and hits_5 >= hits
    assert random_hits < hits < 16  # better than chance, and the misses are real
    verdicts = {row[0]: row[4] for row in rows}
    assert verdicts["man : king :: woman : ?"] == "yes"
    assert verdicts["he : his :: she : ?"] == verdicts["i : my :: he : ?"] == "yes"


def test_page_has_its_figures_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures and equations are there."""
    raw, _ = page
    assert len(re.findall(r'<img[^>]+src="[^"]+\.png"', raw)) >= 3, "Zipf/subsampling, loss curve and word map figures expected"
    assert raw.count('class="math') >= 6
