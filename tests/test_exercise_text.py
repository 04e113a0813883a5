"""What the exercise notebooks and the course's guide pages say is what the chapters measure,
what the notebooks' own code prints and what their nbgrader metadata holds.

The notebooks are read from ``solutions/`` (``exercises/`` is generated from them, and
test_exercises_sync.py keeps the two equal). Where a sentence is about a computed value, the
cells that compute it are run (the reference answers in place of the learner's) and what they
print is compared with an independent computation; where it is about a chapter, with the
chapter's source, whose own claims the page asserts when it is built (tests/test_chapterNN.py
reads them back from the build).
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from itertools import product

import numpy as np
from _exercise_helpers import (
    REPO,
    SOLUTIONS,
    grader_meta,
    manual_answers,
    notebook_path,
    read,
    reference_answer,
)

from mini_llm.seq2seq import number_to_words
from mini_llm.smoothing import ngram_counts
from mini_llm.vocab import BOS, EOS, Vocabulary

BOOK = REPO / "book"


def notebook(assignment: str):
    return read(notebook_path(SOLUTIONS, assignment))


def cell_source(assignment: str, cell_id: str) -> str:
    found = [c.source for c in notebook(assignment).cells if c.get("id") == cell_id]
    assert len(found) == 1, f"{assignment} has no single cell {cell_id!r}"
    return found[0]


def flat(text: str) -> str:
    """Text with every run of whitespace (line breaks of the Markdown source) as one space."""
    return " ".join(text.split())


def run_until(assignment: str, last_id: str) -> tuple[dict, str]:
    """Run the notebook's ungraded code cells (setup, answers with the reference solution,
    "try it" cells) in order, up to and including ``last_id``: the namespace and what that
    last cell printed."""
    namespace: dict = {"__name__": "__exercise__"}
    for cell in notebook(assignment).cells:
        if cell.cell_type != "code" or grader_meta(cell).get("grade"):
            continue
        out = io.StringIO()
        with contextlib.redirect_stdout(out), np.errstate(all="ignore"):
            code = compile(reference_answer(cell.source), f"<{cell.id}>", "exec")
            exec(code, namespace)  # noqa: S102 - the course's own notebook
        if cell.get("id") == last_id:
            return namespace, out.getvalue()
    raise AssertionError(f"{assignment} has no ungraded code cell {last_id!r}")


# 1. Chapter 4 measures the lengths of the trained vectors: frequent words have the shorter ones.


def test_ch04_exercise_says_frequent_words_have_the_shorter_vectors_as_the_chapter_measures():
    chapter = flat((BOOK / "ch04_embeddings.md").read_text(encoding="utf-8"))
    # the chapter's prose, and the page's assertion of it on the measured rank correlation
    assert "in this center table the frequent words have the *shorter* vectors" in chapter
    assert 'assert norm_count_corr < 0, "the prose says frequent words have the shorter' in chapter
    nb = notebook("ch04_embeddings")
    text = flat("\n".join(c.source for c in nb.cells))
    # the premise the chapter's measurement contradicts, in any of the forms it took
    for premise in (
        r"frequent words (?:tend to )?have (?:the )?long",
        r"long \((?:often )?frequent\)",
        r"long vector: a frequent word",
        r"frequent\w* words? (?:has|have|get|gets) (?:\w+ ){0,2}longer",
    ):
        assert not re.search(premise, text, re.IGNORECASE), premise
    neighbours = flat(cell_source("ch04_embeddings", "nearest_neighbours_md"))
    assert "frequent words have the *shorter* vectors" in neighbours
    assert "a raw dot product would favour rare words" in neighbours
    analogies = flat(cell_source("ch04_embeddings", "analogy_md"))
    assert "the long vectors belong to the rare words" in analogies
    assert "frequent words have the shorter ones" in analogies


# 2. Chapter 2's trigram contexts: a context never holds </s>, and <s> only at its start.


def contexts_that_can_occur(vocab: Vocabulary, n: int) -> int:
    """The (n - 1)-token contexts a padded name can hold, enumerated: no </s>, and the <s>
    only as a prefix (the padding)."""
    bos, eos = vocab.stoi[BOS], vocab.stoi[EOS]
    count = 0
    for context in product(range(len(vocab)), repeat=n - 1):
        padding = len(context) - len(tuple(i for i in context if i != bos))
        count += eos not in context and all(i == bos for i in context[:padding])
    return count


def test_ch02_try_cell_counts_the_possible_contexts_as_the_chapter_does():
    namespace, printed = run_until("ch02_ngrams", "ngram_counts_try")
    seen, possible = map(
        int, re.search(r"(\d+) trigram contexts seen out of (\d+) possible", printed).groups()
    )
    vocab = namespace["chars"]
    assert possible == contexts_that_can_occur(vocab, 3) == 703
    contexts, _ = ngram_counts(namespace["train"], 3, len(vocab), vocab.stoi[BOS])
    assert seen == len(contexts) <= possible
    # the chapter prints the same count, from the same convention
    chapter = (BOOK / "ch02_ngrams.md").read_text(encoding="utf-8")
    assert "possible = 1 + letters + letters**2" in chapter
    assert "possible = 1 + letters + letters**2" in cell_source("ch02_ngrams", "ngram_counts_try")


# 3. Chapter 1's convention: V counts every token, the uniform guess spreads over V - 1.


def test_ch01_uniform_baseline_is_over_the_v_minus_1_next_tokens_as_in_the_chapter():
    chapter = flat((BOOK / "ch01_bigrams.md").read_text(encoding="utf-8"))
    assert 'a "uniform guess" spreads its probability over the $V - 1$ tokens' in chapter
    namespace, printed = run_until("ch01_bigrams", "average_nll_try")
    shown = re.search(
        r"bigram model: ([\d.]+) nats, uniform over the (\d+) possible next tokens "
        r"\(V = (\d+)\): log (\d+) = ([\d.]+)",
        printed,
    )
    assert shown, printed
    nll, n_next, size, n_logged, log_n_next = shown.groups()
    vocab = namespace["chars"]
    assert int(size) == len(vocab) == 28
    assert int(n_next) == int(n_logged) == len(vocab) - 1
    assert log_n_next == f"{math.log(len(vocab) - 1):.3f}"
    assert float(nll) < float(log_n_next)  # the model beats the baseline
    text = flat(cell_source("ch01_bigrams", "average_nll_md"))
    assert "$\\log (V - 1)$" in text and "uniformly over $V$ tokens" not in text
    assert "The uniform baseline: log V" not in cell_source("ch01_bigrams", "average_nll_tests")


# 4. The guide pages and the notebooks' nbgrader metadata.


def test_the_guide_gives_the_written_questions_the_points_the_notebooks_give_them():
    points = set()
    for folder in sorted(SOLUTIONS.iterdir()):
        nb = notebook(folder.name)
        answers = manual_answers(nb)
        assert len(answers) == 1, f"{folder.name}: one written question"
        graded = [grader_meta(c)["grade_id"] for c in nb.cells if grader_meta(c).get("grade")]
        assert graded[-1] in answers, f"{folder.name} does not end with its written question"
        points |= {int(p) for p in answers.values()}
    guide = flat((BOOK / "exercises.md").read_text(encoding="utf-8"))
    stated = re.search(r"Each assignment ends with a written question \(([^)]*) points", guide)
    assert stated, "exercises.md no longer says what the written question is worth"
    assert {int(p) for p in re.findall(r"\d+", stated.group(1))} == points == {4, 5}


def test_intro_and_guide_agree_that_no_test_cell_is_flagged_for_a_person():
    """Only a test cell that the trusted replay cannot judge is flagged (mini_llm/grading/
    runner.py); the reference passes every test cell in the replay, so none is
    (tests/test_grading_assignments.py checks that)."""
    intro = flat((BOOK / "intro.md").read_text(encoding="utf-8"))
    guide = flat((BOOK / "exercises.md").read_text(encoding="utf-8"))
    for page in (intro, guide):
        assert "always flagged" not in page
    assert "none of this course's is flagged for a person to check" in intro
    assert "so no test cell is flagged for a person" in guide
    assert "a test cell the replay cannot judge (none in this course)" in guide


# 6. Chapter 7's source sentences.


def test_ch07_exercise_states_the_lengths_of_the_numbers_in_words():
    lengths = [len(number_to_words(n)) for n in range(1_000_000)]
    shortest, longest = min(lengths), max(lengths)
    text = flat(cell_source("ch07_attention", "number_to_words_md"))
    assert f"A source sentence has between {shortest} and {longest} words" in text
    assert longest == len(number_to_words(777_777))  # the example the sentence gives
    # the question names the chapter's group of long numbers: from its lower bound to the
    # longest, with the digits those numbers have
    chapter = (BOOK / "ch07_attention.md").read_text(encoding="utf-8")
    low = int(re.search(r"LONG: \((\d+), longest\)", chapter).group(1))
    digits = sorted({len(str(n)) for n, size in enumerate(lengths) if size >= low})
    question = flat(cell_source("ch07_attention", "attention_question"))
    shown = " or ".join(map(str, digits))
    assert f"the long ones ({low} to {longest} words, {shown} digits)" in question
    answer = flat(cell_source("ch07_attention", "attention_answer"))  # the model answer
    number_words = {8: "eight", 9: "nine", 10: "ten", 11: "eleven"}
    assert f"up to {number_words[longest]} words" in answer
    assert f"up to {number_words[longest + 1]} words" not in answer


# 7. Chapter 11's experiment without the mask.


def test_ch11_question_says_which_model_the_mask_experiment_trained():
    chapter = (BOOK / "ch11_gpt.md").read_text(encoding="utf-8")
    steps, block = map(int, re.search(r"MASK_STEPS, MASK_BLOCK = (\d+), (\d+)", chapter).groups())
    shape = re.search(r"small_shape = dict\((.*)\)", chapter).group(1)
    layers = int(re.search(r"n_layer=(\d+)", shape).group(1))
    width = int(re.search(r"n_embd=(\d+)", shape).group(1))
    seeds = len(re.search(r"MASK_SEEDS = \(([^)]*)\)", chapter).group(1).split(","))
    recorded = json.loads((BOOK / "results" / "ch11-gpt-cpu.json").read_text())
    config = recorded["results"]["model_config"]
    question = flat(cell_source("ch11_gpt", "mask_question"))
    assert (
        f"trained a GPT ({config['n_layer']} blocks, $d = {config['n_embd']}$) on windows of "
        f"{config['block_size']} characters"
    ) in question
    words = {2: "two", 3: "three", 4: "four", 5: "five"}
    assert (
        f"a smaller GPT ({layers} blocks, $d = {width}$, a context of {block} characters, "
        f"{steps} steps on each of {words[seeds]} seeds) twice"
    ) in question
    assert "the same model" not in question
    assert (layers, width, block) != (config["n_layer"], config["n_embd"], config["block_size"])
