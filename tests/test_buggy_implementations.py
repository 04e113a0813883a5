"""The hidden tests of ch01_bigrams catch realistic mistakes and explain them.

The hidden tests are taken from the SOLUTION notebook and run in-process: the reference
functions of ``mini_llm.ngram`` must pass them, and every known-buggy implementation in
``tests/buggy/ch01_bigrams.py`` must fail them with an ``AssertionError`` whose message names the
function and says what was expected, what came back, and a hint.
"""

from __future__ import annotations

import importlib.util
import inspect

import numpy as np
import pytest
from _exercise_helpers import (
    REPO,
    SOLUTIONS,
    cell_by_grade_id,
    graded_parts,
    notebook_path,
    read,
    reference_answer,
    split_test_cell,
)

from mini_llm import ngram

ASSIGNMENT = "ch01_bigrams"
SOLUTION_NB = read(notebook_path(SOLUTIONS, ASSIGNMENT))
PARTS = graded_parts(SOLUTION_NB)


def _load_module():
    spec = importlib.util.spec_from_file_location(
        "buggy_ch01_bigrams", REPO / "tests" / "buggy" / "ch01_bigrams.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_BUGGY = _load_module()
BUGS = _BUGGY.BUGS
CASES = [(part, bug_id) for part in PARTS for bug_id in BUGS.get(part, {})]


def _tests(part: str) -> tuple[str, str]:
    return split_test_cell(cell_by_grade_id(SOLUTION_NB, f"{part}_tests").source)


def _run_checks(code: str, part: str, implementation) -> None:
    """Execute test code with ``implementation`` bound to the exercise function's name."""
    namespace = {"__name__": "__exercise__", part: implementation}
    exec(compile(code, f"<{part}_tests>", "exec"), namespace)  # noqa: S102 - our own notebook


def _failure(code: str, part: str, implementation) -> str | None:
    """The AssertionError message the checks raise, or None when they pass."""
    with np.errstate(all="ignore"):
        try:
            _run_checks(code, part, implementation)
        except AssertionError as err:
            return str(err)
    return None


def test_every_graded_part_has_at_least_two_known_bugs():
    assert PARTS == [
        "count_bigrams",
        "bigram_probabilities",
        "sequence_probability",
        "sample_sequence",
        "average_nll",
    ]
    for part in PARTS:
        assert len(BUGS.get(part, {})) >= 2, f"{part}: need at least two buggy implementations"
    assert set(BUGS) <= set(PARTS), (
        f"bugs for functions that are not graded: {set(BUGS) - set(PARTS)}"
    )


def _parameters(fn) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("part", PARTS)
def test_notebook_functions_have_the_package_signatures(part):
    namespace: dict = {"np": np}
    exec(reference_answer(cell_by_grade_id(SOLUTION_NB, f"{part}_impl").source), namespace)  # noqa: S102
    assert _parameters(namespace[part]) == _parameters(getattr(ngram, part))


@pytest.mark.parametrize("part", PARTS)
def test_reference_passes_visible_and_hidden_tests(part):
    visible, hidden = _tests(part)
    assert _failure(visible, part, getattr(ngram, part)) is None
    assert _failure(hidden, part, getattr(ngram, part)) is None


@pytest.mark.parametrize("part", PARTS)
def test_notebook_solution_passes_hidden_tests(part):
    namespace: dict = {"np": np}
    exec(reference_answer(cell_by_grade_id(SOLUTION_NB, f"{part}_impl").source), namespace)  # noqa: S102
    assert _failure(_tests(part)[1], part, namespace[part]) is None


@pytest.mark.parametrize(("part", "bug_id"), CASES, ids=[f"{p}-{b}" for p, b in CASES])
def test_hidden_tests_fail_the_buggy_implementation(part, bug_id):
    buggy = BUGS[part][bug_id]
    message = _failure(_tests(part)[1], part, buggy)
    assert message is not None, (
        f"the hidden tests of {part} accept the bug {bug_id!r}: {buggy.__doc__}"
    )
    # A teaching message: which call, what was expected, what came back, and why.
    assert message.startswith(part) or f"{part}(" in message.splitlines()[0], message
    for label in ("expected:", "got:", "Hint:"):
        assert label in message, f"{label!r} missing from the message for {bug_id}:\n{message}"


def test_hidden_tests_catch_bugs_that_the_visible_tests_miss():
    """Hidden tests are not a repeat of the visible ones: for every part, some bug gets past
    the visible tests and is caught only by the hidden ones."""
    for part in PARTS:
        visible, _ = _tests(part)
        slipped = [
            bug_id for bug_id, fn in BUGS[part].items() if _failure(visible, part, fn) is None
        ]
        assert slipped, f"{part}: every known bug is already caught by the visible tests"


def test_message_for_a_dropped_last_pair_shows_expected_and_got():
    message = _failure(
        _tests("count_bigrams")[0], "count_bigrams", BUGS["count_bigrams"]["drops_last_pair"]
    )
    assert message.splitlines() == [
        "count_bigrams([[0, 1, 1]], vocab_size=3)[1, 1] is wrong.",
        "  expected: 1",
        "  got:      0",
        "  Hint: 1 follows 1 once. Every consecutive pair counts, including the last one.",
    ]


def test_message_for_nan_rows_names_the_input_and_the_fix():
    message = _failure(
        _tests("bigram_probabilities")[1],
        "bigram_probabilities",
        BUGS["bigram_probabilities"]["nan_on_empty_rows"],
    )
    first = message.splitlines()[0]
    assert first.startswith("bigram_probabilities([[0, 0, 0],"), message
    assert "nan" in message and "1 / V" in message


def test_unwritten_function_says_so():
    def count_bigrams(sequences, vocab_size):
        raise NotImplementedError()

    message = _failure(_tests("count_bigrams")[0], "count_bigrams", count_bigrams)
    assert "NotImplementedError" in message and "not written yet" in message


@pytest.mark.parametrize("part", PARTS)
def test_every_check_in_the_test_cells_gives_a_hint(part):
    """A check without a hint could fail with a bare expected/got; every one must say why."""
    import ast

    source = cell_by_grade_id(SOLUTION_NB, f"{part}_tests").source
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("expect_")
    ]
    assert calls, f"{part}: no checks found"
    unhinted = [
        ast.get_source_segment(source, c).splitlines()[0]
        for c in calls
        if not any(k.arg == "hint" for k in c.keywords)
    ]
    assert not unhinted, f"{part}: checks without a hint: {unhinted}"


ALTERNATIVES = [
    (part, alt_id, fn) for part in PARTS for alt_id, fn in _BUGGY.ALTERNATIVES.get(part, {}).items()
]


@pytest.mark.parametrize(
    ("part", "alt_id", "implementation"), ALTERNATIVES, ids=[f"{p}-{a}" for p, a, _ in ALTERNATIVES]
)
def test_correct_implementations_written_differently_pass(part, alt_id, implementation):
    """Loops, plain lists, log space, an inverse-CDF sampler: any correct answer gets the points."""
    visible, hidden = _tests(part)
    assert _failure(visible, part, implementation) is None
    assert _failure(hidden, part, implementation) is None


def test_every_part_has_a_correct_alternative():
    assert {part for part, _, _ in ALTERNATIVES} == set(PARTS)
