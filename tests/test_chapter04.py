"""Chapter 4's rendered page: the corpus figures, Zipf's law, the pairs, the loss and its
derivation, and what the vectors know.

Counts, the Zipf fit and pairs are recomputed here independently of the page; the trained
vectors' answers come from the build, so they are checked for what the prose says about them.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
from _book_helpers import check_figures, glued_fixture, html_tables, page_fixture

from mini_llm.corpus import load_corpus
from mini_llm.embeddings import (
    SkipGram,
    frequent_words,
    negative_sampling_loss,
    noise_distribution,
)
from mini_llm.vocab import word_tokens

page = page_fixture("ch04_embeddings")
glued = glued_fixture("ch04_embeddings")


@pytest.fixture(scope="module")
def shakespeare_words(glued):
    """The page's vocabulary, word counts and plays as ids: ``frequent_words`` as it calls it."""
    return frequent_words(load_corpus("shakespeare"), min_count=glued["ch04_min_count"])


def signed(value: float, spec: str) -> str:
    """A number as the prose shows it: negative ones with a minus sign (−), not a hyphen."""
    return format(value, spec).replace("-", "−")


def unsigned(shown: str) -> float:
    return float(shown.replace("−", "-"))


def table_with_header(raw: str, *columns: str) -> list[list[str]]:
    """The rows of the table whose header starts with ``columns``."""
    for rows in html_tables(raw):
        if rows and rows[0][: len(columns)] == list(columns):
            return rows
    raise AssertionError(f"no table whose header starts with {columns}")


def test_corpus_figures_are_recomputed(page, glued):
    _, text = page
    plays = load_corpus("shakespeare")
    words = [w for play in plays for w in word_tokens(play)]
    counts: dict[str, int] = {}
    for w in words:
        counts[w] = counts.get(w, 0) + 1
    min_count = glued["ch04_min_count"]
    frequent = sum(1 for n in counts.values() if n >= min_count)
    assert f"{len(plays)} plays, {len(words):,} words, {len(counts):,} distinct" in text
    assert f"{frequent:,} occur at least {min_count} times" in text
    assert f"fewer than {min_count} times are dropped" in " ".join(text.split())
    top = max(counts, key=counts.get)
    assert re.search(rf"most frequent:\s+{top} \({counts[top]:,}\)", text)
    assert glued["ch04_n_plays"] == len(plays)
    assert glued["ch04_n_words"] == f"{len(words):,}" and glued["ch04_V"] == f"{frequent:,}"
    assert "the 38 plays of chapter 1" not in text  # chapter 1 models first names


def test_zipf_fit_and_what_the_prose_says_about_it(glued, shakespeare_words):
    """Slope near −1 on log-spaced ranks; the top word below the line by the glued factor,
    every other word within the glued spread; the fit through every rank misses by > 10x."""
    _, counts, _ = shakespeare_words
    rank = np.arange(1, len(counts) + 1)
    fit_ranks = np.unique(np.geomspace(1, len(counts), 60).round().astype(int))
    slope, intercept = np.polyfit(np.log(fit_ranks), np.log(counts[fit_ranks - 1]), 1)
    fitted = np.exp(intercept) * rank**slope
    assert glued["ch04_zipf_slope"] == signed(slope, ".2f")
    assert -1.2 < slope < -0.8  # "close to Zipf's -1"
    top_ratio = fitted[0] / counts[0]
    assert glued["ch04_zipf_top_ratio"] == f"{top_ratio:.1f}" and top_ratio > 2
    spread = float(glued["ch04_zipf_spread"])
    assert np.all(np.abs(np.log(fitted[1:] / counts[1:])) <= np.log(spread) + 0.05)
    assert spread < top_ratio  # the top word is the exception the prose names
    every_slope, every_intercept = np.polyfit(np.log(rank), np.log(counts), 1)
    assert glued["ch04_zipf_every_slope"] == signed(every_slope, ".2f")
    assert float(glued["ch04_zipf_every_top_ratio"]) == pytest.approx(
        np.exp(every_intercept) / counts[0], abs=0.5
    )
    assert np.exp(every_intercept) / counts[0] > 10
    cut = glued["ch04_rank_cut"]  # "ranks above 100 are 97 % of the points"
    assert glued["ch04_share_above_100"] == f"{(rank > cut).mean():.0%}"


def test_subsampling_thins_only_the_frequent_words(page, glued, shakespeare_words):
    _, counts, _ = shakespeare_words
    frequency = counts / counts.sum()
    shown = glued["ch04_threshold"]  # 10⁻⁴, as the prose writes it
    digits = shown[2:].translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789"))
    threshold = 10.0 ** int(digits) if shown.startswith("10") else float(shown)
    assert "subsample_frequent(ids, counts, rng, THRESHOLD)" in page[1]
    assert "THRESHOLD = 1e-4" in page[1] and threshold == 1e-4  # the glue shows the code's value
    thinned = frequency > threshold  # keep probability sqrt(t / f) < 1
    assert glued["ch04_n_thinned"] == f"{thinned.sum():,}"
    assert glued["ch04_thinned_share"] == f"{frequency[thinned].sum():.0%}"
    assert thinned.sum() < 0.2 * len(counts)  # "only the ... most frequent words"


def test_share_of_windows_with_a_frequent_word_is_recomputed(page, glued, shakespeare_words):
    """The prose: most windows hold one of a few very frequent words. Counted here by a
    convolution over each play, independently of the page's loop."""
    _, text = page
    vocab, _, play_ids = shakespeare_words
    top, window = glued["ch04_top_words"], glued["ch04_window"]
    assert window == 3 and [vocab.itos[i] for i in range(4)] == ["the", "and", "i", "to"]
    kernel = np.ones(2 * window + 1)
    kernel[window] = 0  # the position itself is not in its window
    near = sum(
        int((np.convolve((ids < top).astype(float), kernel, mode="same") > 0).sum())
        for ids in play_ids
    )
    share = near / sum(len(ids) for ids in play_ids)
    assert glued["ch04_top_window_share"] == f"{share:.0%}" and share > 0.5  # "most windows"
    assert (
        "Most windows hold one of a few very frequent words: at "
        f"{share:.0%} of the positions of the text, one of the {top} most frequent words "
        f"(the, and, i, to, …) stands within {window} places, the window used below"
    ) in " ".join(text.split())


def test_word_map_groups_gather(page, glued):
    _, text = page
    same, total = map(int, re.search(r"(\d+) of (\d+) words: nearest on the map", text).groups())
    assert (glued["ch04_map_same_group"], glued["ch04_map_words"]) == (same, total)
    others = glued["ch04_group_others"]  # the other words of a word's group
    assert total % (others + 1) == 0  # groups of one size
    chance = total * others / (total - 1)
    assert glued["ch04_map_chance"] == f"{chance:.0f}"
    assert same > 2 * chance  # "groups of related words can be seen"


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
    got, formula = re.search(
        r"untrained loss ([\d.]+) = \(K \+ 1\) log 2 = ([\d.]+)", text
    ).groups()
    assert got == formula == f"{6 * math.log(2):.4f}"
    first, last = map(
        float, re.search(r"loss ([\d.]+) at the first step, ([\d.]+) over the last", text).groups()
    )
    assert first == pytest.approx(6 * math.log(2), abs=1e-3)
    assert last < first - 1.0


def test_noise_table_lifts_rare_words_and_lowers_frequent_ones(page):
    raw, _ = page
    table = table_with_header(raw, "word", "count", "power 1", "power 0.75", "power 0 (uniform)")
    rows = {row[0]: [float(x) for x in row[2:]] for row in table[1:]}
    _, power_075, uniform = zip(*rows.values(), strict=True)
    assert rows["the"][1] < rows["the"][0] and rows["ducats"][1] > rows["ducats"][0]
    assert len(set(uniform)) == 1 and all(a > 0 for a in power_075)


def test_noise_shares_in_the_prose_are_recomputed_and_075_lies_in_between(
    page, glued, shakespeare_words
):
    """The prose: the most frequent words take a large share of plain-count noise, the rare
    words most of uniform noise, and the power 0.75 lies in between on both."""
    _, text = page
    _, counts, _ = shakespeare_words
    assert np.all(np.diff(counts) <= 0)  # most frequent first, so [:top] are the top words
    top, rare = glued["ch04_noise_top"], glued["ch04_noise_rare_count"]
    top_share, rare_share = {}, {}
    for power, name in ((1.0, "1"), (0.75, "075"), (0.0, "0")):
        noise = noise_distribution(counts, power)
        top_share[name], rare_share[name] = noise[:top].sum(), noise[counts < rare].sum()
        if power > 0:  # the prose names the top words' share of counted noise
            assert glued[f"ch04_noise_top_share_{name}"] == f"{top_share[name]:.0%}"
        if power < 1:  # and the rare words' share of uniform noise and of power 0.75
            assert glued[f"ch04_noise_rare_share_{name}"] == f"{rare_share[name]:.0%}"
    assert top_share["1"] > top_share["075"] > top_share["0"]
    assert rare_share["0"] > rare_share["075"] > rare_share["1"]
    assert top_share["1"] > 0.5 and rare_share["0"] > 0.5  # large shares, as the prose implies
    shown = {name: f"{share:.0%}" for name, share in top_share.items()}
    rare_shown = {name: f"{share:.0%}" for name, share in rare_share.items()}
    assert (
        f"With the plain counts, the {top} most frequent words would make up {shown['1']} of "
        f"the noise; with equal probabilities, {rare_shown['0']} of the noise words would be "
        f"words seen fewer than {rare} times in all the plays"
    ) in " ".join(text.split())
    assert (
        f"lies in between: the {top} most frequent words make up {shown['075']} of its noise, "
        f"and the words seen fewer than {rare} times {rare_shown['075']}."
    ) in " ".join(text.split())


def test_negative_sampling_loss_is_the_derived_log_likelihood():
    """The derivation's last lines: the loss is −log σ(s_o) − Σ log(1 − σ(s_n)), and its
    gradient is σ(s_o) − 1 for the real context and σ(s_n) for each noise word."""
    scores = torch.randn(7, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    scores.requires_grad_(True)
    loss = negative_sampling_loss(scores)
    p = torch.sigmoid(scores.detach())
    by_formula = -(torch.log(p[:, 0]) + torch.log(1 - p[:, 1:]).sum(dim=1)).mean()
    assert loss.item() == pytest.approx(by_formula.item(), rel=1e-12)
    loss.backward()
    expected = torch.cat([p[:, :1] - 1, p[:, 1:]], dim=1) / len(scores)
    assert torch.allclose(scores.grad, expected, atol=1e-12)


def test_the_center_table_is_the_word_vectors(page):
    _, text = page
    model = SkipGram(10, 4)
    assert model.vectors().data_ptr() == model.center.weight.data_ptr()
    assert re.search(
        r"the\s+center\s+table\s+is\s+the\s+one\s+kept\s+as\s+the\s+word\s+vectors", text
    )


def test_training_time_and_vector_lengths_are_glued(page, glued):
    _, text = page
    seconds = re.search(r"4000 steps in (\d+) s;", text).group(1)
    assert glued["ch04_seconds"] == seconds
    pairs = int(
        re.search(r"window 3: ([\d,]+) \(center, context\) pairs", text)[1].replace(",", "")
    )
    batch = int(glued["ch04_batch_size"].replace(",", ""))
    assert glued["ch04_steps"] == "4,000" and batch == 4096
    assert glued["ch04_epochs"] == f"{4000 * batch / pairs:.0f}"
    assert "in seconds" not in text  # the measured time is what the page states
    corr = glued["ch04_norm_count_corr"]
    assert unsigned(corr) < -0.3 and corr.startswith("−")  # "frequent words: shorter vectors"
    assert 'label=f"untrained: {NEGATIVES + 1} log 2"' in text  # Fig. 4.4's legend, computed


def test_the_exercise_says_what_the_page_measures_about_vector_lengths(page, glued):
    """The exercise's parts 4 and 5 explain cosine similarity by the lengths of the trained
    vectors: they must name the direction of the length-frequency relation the page measured."""
    import nbformat
    from _exercise_helpers import SOLUTIONS, notebook_path

    corr = unsigned(glued["ch04_norm_count_corr"])
    assert "the frequent words have the shorter vectors" in " ".join(page[1].split())
    nb = nbformat.read(notebook_path(SOLUTIONS, "ch04_embeddings"), as_version=4)
    cells = {cell.get("id"): " ".join(cell.source.split()) for cell in nb.cells}
    shorter, longer = ("shorter", "longer") if corr < 0 else ("longer", "shorter")
    assert f"frequent words have the *{shorter}* vectors" in cells["nearest_neighbours_md"]
    assert f"frequent words have the {shorter} ones" in cells["analogy_md"]
    assert f"frequent words have the *{longer}*" not in cells["nearest_neighbours_md"]
    assert "frequent words tend to have long" not in " ".join(cells.values())


def test_neighbours_are_distinct_other_words_showing_what_the_prose_names(page):
    raw, text = page
    table = table_with_header(raw, "word", "nearest neighbours (most similar first)")
    # smartquotes renders emperor's as emperor’s; compare with straight apostrophes
    neighbours = {row[0]: row[1].replace("\u2019", "'").split(", ") for row in table[1:]}
    assert len(neighbours) == 8
    for word, found in neighbours.items():
        assert len(found) == len(set(found)) == 6 and word not in found
    # Near king: kings' names mixed with words that stand beside them in the history plays
    # (nobles, numerals of reigns, forms of address), and no other words.
    kings = {"henry", "edward", "richard", "john", "lear", "duncan", "claudius", "harry"}
    nobles = {"warwick", "york", "lancaster", "gloucester", "clarence", "somerset", "suffolk"}
    nobles |= {"norfolk", "exeter", "buckingham", "northumberland", "westmoreland", "salisbury"}
    nobles |= {"bolingbroke", "bedford", "oxford", "derby", "hereford", "richmond", "france"}
    beside = nobles | {"ii", "iii", "iv", "v", "vi", "viii"} | {"liege", "sovereign", "majesty"}
    near_king = set(neighbours["king"])
    assert len(near_king & kings) >= 2 and near_king & beside and near_king <= kings | beside
    flowing = " ".join(text.split())
    assert (
        "near king, the names of kings mixed with words that stand beside them in the history "
        "plays (such as their nobles, the numerals of their reigns and forms of address)"
    ) in flowing
    assert "the names of kings near king" not in flowing  # they are not all kings' names
    named = {  # what the paragraph under the table points to
        "night": {"day", "morrow", "morning", "midnight", "noon", "hours", "evening"},
        "thou": {"art", "dost", "wilt"},
        "rome": {
            "roman",
            "romans",
            "tribunes",
            "tribune",
            "senators",
            "capitol",
            "patricians",
            "emperor",
            "caesar's",
            "emperor's",
        },
    }
    for word, expected in named.items():
        assert len(set(neighbours[word]) & expected) >= 2, (word, neighbours[word])


def test_analogies_beat_the_random_control_and_the_page_reports_them_honestly(page, glued):
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
    hits, hits_5, random_hits = map(
        int,
        re.search(
            r"trained vectors: (\d+) of 16 right at the first guess, (\d+) in the top 5\s+"
            r"random vectors: (\d+) of 16",
            text,
        ).groups(),
    )
    assert hits == right and hits_5 >= hits
    assert (
        glued["ch04_hits"],
        glued["ch04_hits_at_5"],
        glued["ch04_random_hits"],
        glued["ch04_n_questions"],
    ) == (hits, hits_5, random_hits, 16)
    assert random_hits < hits < 16  # better than chance, and the misses are real
    # "the rule that leaves a, b and c out flatters every such count": it does here
    assert 0 < glued["ch04_self_answers"] <= 16
    verdicts = {row[0]: row[4] for row in rows}
    assert verdicts["man : king :: woman : ?"] == "yes"
    assert verdicts["he : his :: she : ?"] == verdicts["i : my :: he : ?"] == "yes"


def test_the_counting_baseline_is_about_as_good_as_training(page, glued):
    """The PPMI + SVD vectors of the same pairs, from three seeds, printed and glued alike:
    each seed far above the random control, their mean close to the trained vectors'."""
    _, text = page
    printed = [
        tuple(map(int, found))
        for found in re.findall(
            r"PPMI \+ SVD, seed \d: (\d+) of 16 at the first guess, (\d+) in the top 5", text
        )
    ]
    assert len(printed) == 3
    firsts, top5s = zip(*printed)
    assert glued["ch04_ppmi_firsts"] == f"{min(firsts)}–{max(firsts)}"
    assert glued["ch04_ppmi_top5s"] == f"{min(top5s)}–{max(top5s)}"
    assert min(firsts) >= glued["ch04_random_hits"] + 3
    assert abs(np.mean(firsts) - glued["ch04_hits"]) <= 2
    assert abs(np.mean(top5s) - glued["ch04_hits_at_5"]) <= 3
    positive = re.search(r"([\d,]+) of the ([\d,]+) \(center, context\) cells are positive", text)
    cells, total = (int(x.replace(",", "")) for x in positive.groups())
    assert total == int(glued["ch04_V"].replace(",", "")) ** 2
    assert glued["ch04_ppmi_positive"] == f"{cells / total:.1%}"


def test_page_has_its_figures_and_math(page):
    """Goals, summary, exercise link and non-empty figures are checked for every chapter in
    test_book.py; here, that this chapter's own figures and equations are there."""
    names = ("zipf", "subsampling", "sgns-diagram", "loss", "map")
    check_figures(page[0], *(f"fig-ch04-{name}" for name in names), at_least=4, math=10)
