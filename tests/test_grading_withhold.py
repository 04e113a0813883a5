"""The grader withholds the installed reference of the parts being graded, grades each part with
the reference's versions of the others, and flags answers that are the reference's own code.

Through `mini-llm grade` on chapter 1, with these learners:

* ``solver``  -- the solution: every point;
* ``importer`` -- ``from mini_llm.ngram import count_bigrams`` as the answer: loses that part,
  and the message says why;
* ``caller``  -- a function that calls ``mini_llm.ngram.bigram_probabilities``: loses that part;
* ``cascade`` -- a buggy ``sequence_probability`` (its last factor dropped) and an
  ``average_nll`` that calls it: only ``sequence_probability`` loses points, because
  ``average_nll`` is graded with the reference's ``sequence_probability``;
* ``copier``  -- the reference's own ``count_bigrams``, renamed variables and all: full marks
  (it is correct), and the report flags it for a person.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap

import nbformat
import pytest
from _exercise_helpers import (
    SOLUTIONS,
    autograded_tests,
    cell_by_grade_id,
    new_course,
    notebook_path,
    read,
)
from nbgrader.api import Gradebook

from mini_llm import ngram
from mini_llm.grading.withhold import Withheld, reference_copies

ASSIGNMENT = "ch01_bigrams"

CASCADE_SEQUENCE = """
def sequence_probability(ids, transition_probs, start_probs=None):
    ids = list(ids)
    if not ids or min(ids) < 0 or max(ids) >= len(transition_probs):
        raise ValueError("bad ids")
    p = 1.0 if start_probs is None else float(start_probs[ids[0]])
    for a, b in zip(ids[:-2], ids[1:-1]):  # the last factor is never multiplied
        p *= float(transition_probs[a][b])
    return p
"""

CASCADE_NLL = '''
import math

def average_nll(sequences, transition_probs):
    """Through my own sequence_probability, one bigram at a time."""
    total, pairs = 0.0, 0
    for sequence in sequences:
        for a, b in zip(list(sequence)[:-1], list(sequence)[1:]):
            p = sequence_probability([a, b], transition_probs)
            total += math.inf if p == 0 else -math.log(p)
            pairs += 1
    if pairs == 0:
        raise ValueError("no bigram to score")
    return total / pairs
'''


def _copied_count_bigrams() -> str:
    """The reference's count_bigrams with its variables renamed, its docstring dropped, and the
    package's helpers it needs imported (they are not parts, so they stay available)."""
    source = textwrap.dedent(inspect.getsource(ngram.count_bigrams))
    docstring = f'    """{ngram.count_bigrams.__doc__}"""\n'
    assert docstring in source
    source = source.replace(docstring, "")
    for old, new in (("pairs", "windows"), ("flat", "counted"), ("sequences", "rows")):
        source = source.replace(old, new)
    imports = "from collections.abc import Iterable\n"
    imports += "from mini_llm.ngram import SequenceLike, _check_ids, ngram_windows\n\n"
    return imports + source


STUDENTS = {
    "solver": {},
    "importer": {"count_bigrams_impl": "from mini_llm.ngram import count_bigrams\n"},
    "caller": {
        "bigram_probabilities_impl": (
            "import mini_llm.ngram as package\n\n"
            "def bigram_probabilities(counts):\n"
            "    return package.bigram_probabilities(counts)\n"
        )
    },
    "cascade": {
        "sequence_probability_impl": CASCADE_SEQUENCE,
        "average_nll_impl": CASCADE_NLL,
    },
    "copier": {"count_bigrams_impl": None},  # filled in below
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, grader_path):
    course = new_course(tmp_path_factory.mktemp("withhold") / "course", [ASSIGNMENT])
    for student, answers in STUDENTS.items():
        nb = read(notebook_path(SOLUTIONS, ASSIGNMENT))
        for grade_id, source in answers.items():
            cell = cell_by_grade_id(nb, grade_id)
            cell.source = _copied_count_bigrams() if source is None else source
        target = course / "submitted" / student / ASSIGNMENT
        target.mkdir(parents=True)
        nbformat.write(nb, target / f"{ASSIGNMENT}.ipynb")
    run = subprocess.run(
        [sys.executable, "-m", "mini_llm.cli", "grade", ASSIGNMENT, "--course-dir", str(course)],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in STUDENTS:
            grades = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student).grades
            scores[student] = {g.name: g.auto_score for g in grades if g.auto_score is not None}
    report = json.loads((course / f"grading-{ASSIGNMENT}.json").read_text())["students"]
    return scores, report


def _lost(scores: dict, student: str) -> set[str]:
    points = autograded_tests(read(notebook_path(SOLUTIONS, ASSIGNMENT)))
    return {cell for cell, full in points.items() if scores[student].get(cell) != full}


def _cells_of(part: str) -> set[str]:
    points = autograded_tests(read(notebook_path(SOLUTIONS, ASSIGNMENT)))
    return {cell for cell in points if cell in (f"{part}_tests", f"{part}_input_tests")}


def test_the_solution_keeps_every_point(graded):
    scores, _ = graded
    assert _lost(scores, "solver") == set()


@pytest.mark.parametrize(
    ("student", "part"), [("importer", "count_bigrams"), ("caller", "bigram_probabilities")]
)
def test_an_answer_that_calls_the_installed_reference_loses_its_part_and_is_told_why(
    graded, student, part
):
    scores, report = graded
    assert _lost(scores, student) == _cells_of(part)
    messages = [c["message"] for c in report[student]["cells"] if c["grade_id"] == f"{part}_tests"]
    assert "the package's own version" in messages[0] and f"write `{part}` yourself" in messages[0]


def test_a_later_part_that_calls_a_buggy_earlier_one_keeps_its_points(graded):
    scores, _ = graded
    lost = _lost(scores, "cascade")
    assert "sequence_probability_tests" in lost and lost <= _cells_of("sequence_probability")


def test_the_reference_s_own_code_is_flagged_for_a_person(graded):
    scores, report = graded
    assert _lost(scores, "copier") == set()
    flagged = [p for p in report["copier"]["problems"] if "reference's own code" in p]
    assert flagged and "count_bigrams" in flagged[0]
    assert not [p for p in report["solver"]["problems"] if "reference's own code" in p]


# ----------------------------------------------------------------------- the parts, in-process
def test_withheld_refuses_learner_code_and_lets_the_package_through():
    namespace = {"count_bigrams": "mine", "average_nll": "mine too"}
    parts = {
        "count_bigrams": "mini_llm.ngram:count_bigrams",
        "average_nll": "mini_llm.ngram:average_nll",
    }
    original = ngram.count_bigrams
    withheld = Withheld(parts, namespace)
    try:
        withheld.active = True
        with pytest.raises(RuntimeError, match="package's own version of `count_bigrams`"):
            ngram.count_bigrams([[0, 1]], 2)
        withheld.focus("average_nll")
        assert namespace["count_bigrams"] is original and namespace["average_nll"] == "mine too"
        withheld.focus(None)
        assert namespace == {"count_bigrams": "mine", "average_nll": "mine too"}
        withheld.active = False
        assert ngram.count_bigrams([[0, 1]], 2)[0, 1] == 1
    finally:
        ngram.count_bigrams = original
        ngram.average_nll = withheld.originals["average_nll"]


def test_withheld_classes_refuse_instances_and_subclasses_from_learner_code():
    from mini_llm import gpt

    original_block = gpt.Block
    withheld = Withheld({"Block": "mini_llm.gpt:Block"}, {})
    try:
        withheld.active = True
        config = gpt.GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=8)
        with pytest.raises(RuntimeError, match="package's own version of `Block`"):
            gpt.Block(config)
        with pytest.raises(RuntimeError, match="package's own version of `Block`"):

            class Mine(gpt.Block):  # refused where it is defined
                pass

        assert len(gpt.GPT(config).blocks) == 1  # the package builds its own blocks
    finally:
        gpt.Block = original_block


def test_small_definitions_are_not_flagged_as_copies():
    parts = {"count_bigrams": "mini_llm.ngram:count_bigrams"}
    answers = {"count_bigrams_impl": ["def count_bigrams(sequences, vocab_size):\n    return 0\n"]}
    assert reference_copies(parts, answers) == []
    answers = {"count_bigrams_impl": [_copied_count_bigrams()]}
    assert reference_copies(parts, answers) == ["count_bigrams"]
