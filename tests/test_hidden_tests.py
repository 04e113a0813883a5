"""The hidden tests of every assignment catch realistic mistakes and explain them.

For every assignment in solutions/ (each graded part is a function or class that a
``<part>_impl`` cell defines and a ``<part>_tests`` cell checks), the tests of the SOLUTION
notebook run in-process:

* the reference in ``mini_llm`` (the modules named by ``REFERENCE`` in the bug file; the
  notebook's parts are drop-in replacements for them, with the same signatures) and the
  notebook's own solution pass the visible and the hidden tests;
* every known-buggy implementation in ``tests/buggy/<assignment>.py`` fails the hidden tests with
  an ``AssertionError`` whose message names the call and says what was expected, what came back,
  and a hint; for every part some bug gets past the visible tests (the hidden ones add something);
* every correct implementation written differently (``ALTERNATIVES``) passes.

A new assignment joins by adding ``tests/buggy/<assignment>.py`` (see ``tests/buggy/_registry.py``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re

import numpy as np
import pytest
import torch
from _exercise_helpers import (
    ASSIGNMENTS,
    EXERCISES,
    SOLUTIONS,
    bug_module,
    cell_by_grade_id,
    check_failure,
    graded_parts,
    grader_meta,
    losing_cell,
    notebook_path,
    part_test_cells,
    read,
    reference_answer,
    split_test_cell,
)

from mini_llm.grading.verify import redact

NOTEBOOKS = {a: read(notebook_path(SOLUTIONS, a)) for a in ASSIGNMENTS}
MODULES = {a: bug_module(a) for a in ASSIGNMENTS}
"""assignment -> its tests/buggy module, None where it is missing (a failure below)"""
COVERED = [a for a in ASSIGNMENTS if MODULES[a] is not None]

PARTS = [(a, part) for a in COVERED for part in graded_parts(NOTEBOOKS[a])]
CASES = [(a, part, b) for a, part in PARTS for b in MODULES[a].BUGS.get(part, {})]
ALTERNATIVES = [
    (a, part, alt) for a, part in PARTS for alt in MODULES[a].ALTERNATIVES.get(part, {})
]
ALTERNATIVES_REQUIRED = {
    "ch01_bigrams",
    "ch02_ngrams",
    "ch03_neural_lm",
    "ch04_embeddings",
    "ch05_rnn",
    "ch06_lstm",
    "ch07_attention",
    "ch08_self_attention",
    "ch09_transformer",
    "ch11_gpt",
}
"""assignments whose every part must have a correct alternative (others may have some)"""


def _ids(cases) -> list[str]:
    return ["-".join(case) for case in cases]


def _bugs(assignment: str, part: str) -> dict:
    return MODULES[assignment].BUGS[part]


def _tests(assignment: str, part: str, cell: str | None = None) -> tuple[str, str]:
    """(visible, hidden) tests of ``part``'s test cell ``cell`` (its first) in the solution."""
    cell = cell or f"{part}_tests"
    return split_test_cell(cell_by_grade_id(NOTEBOOKS[assignment], cell).source)


def _cells(assignment: str, part: str) -> list[str]:
    """The grade ids of ``part``'s test cells (its input checks' too, where graded apart)."""
    return part_test_cells(NOTEBOOKS[assignment], part)


def _message(assignment: str, part: str, bug_id: str, tests: int = 1) -> str | None:
    """What the hidden (``tests=1``) or visible (0) tests of the cell the bug ``bug_id`` must
    lose say of it."""
    buggy = _bugs(assignment, part)[bug_id]
    return check_failure(_tests(assignment, part, losing_cell(part, buggy))[tests], part, buggy)


def _package_function(assignment: str, part: str):
    names = MODULES[assignment].REFERENCE
    # a bug file's RENAMED maps a part to its reference's name where the two differ
    reference = getattr(MODULES[assignment], "RENAMED", {}).get(part, part)
    for name in names:
        module = importlib.import_module(name)
        if hasattr(module, reference):
            return getattr(module, reference)
    raise AssertionError(f"{assignment}: {part} is in none of the REFERENCE modules {names}")


def _notebook_function(assignment: str, part: str, folder=SOLUTIONS):
    """The part as its answer cell defines it after the answer cells above it, as the notebook
    runs them (a later part may use an earlier one): in the solution, or (from EXERCISES) in
    the untouched release, whose cells above may raise NotImplementedError as they run."""
    namespace: dict = {"np": np, "torch": torch, "nn": torch.nn, "F": torch.nn.functional}
    notebook = (
        NOTEBOOKS[assignment] if folder == SOLUTIONS else read(notebook_path(folder, assignment))
    )
    for cell in notebook.cells:
        meta = grader_meta(cell)
        if not meta.get("solution") or meta.get("grade") or cell.cell_type != "code":
            continue
        try:
            exec(reference_answer(cell.source), namespace)  # noqa: S102 - our own notebook
        except NotImplementedError:
            if folder == SOLUTIONS:
                raise
        if meta.get("grade_id") == f"{part}_impl":
            return namespace[part]
    raise AssertionError(f"{assignment} has no answer cell {part}_impl")


def _parameters(fn) -> list[tuple]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


# ------------------------------------------------------------------------- every assignment


def test_there_are_assignments():
    assert {"ch01_bigrams", "ch02_ngrams", "ch03_neural_lm"} <= set(ASSIGNMENTS)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_graded_part_has_at_least_two_known_bugs(assignment):
    module = MODULES[assignment]
    assert module is not None, f"add tests/buggy/{assignment}.py (see tests/buggy/_registry.py)"
    parts = graded_parts(NOTEBOOKS[assignment])
    assert parts, f"{assignment}: no graded parts"
    # The bug file lists the parts in notebook order: a renamed, dropped, added or moved part
    # is noticed here.
    assert list(module.BUGS) == parts, (
        f"{assignment}: bugs registered for {list(module.BUGS)}, graded parts are {parts}"
    )
    for part in parts:
        assert len(module.BUGS[part]) >= 2, f"{assignment}.{part}: need two buggy implementations"
    assert set(module.ALTERNATIVES) <= set(parts), (
        f"alternatives for parts that are not graded: {set(module.ALTERNATIVES) - set(parts)}"
    )
    assert module.REFERENCE and all(n.startswith("mini_llm.") for n in module.REFERENCE)


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=_ids(PARTS))
def test_notebook_functions_have_the_package_signatures(assignment, part):
    assert _parameters(_notebook_function(assignment, part)) == _parameters(
        _package_function(assignment, part)
    )


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=_ids(PARTS))
def test_known_bugs_and_alternatives_have_the_package_signatures(assignment, part):
    """A learner's answer has the part's signature, and so has every registered one: those
    made with ``variant`` take the reference's (``like``), not their implementation's knobs."""
    expected = _parameters(_package_function(assignment, part))
    for table in (MODULES[assignment].BUGS, MODULES[assignment].ALTERNATIVES):
        for key, fn in table.get(part, {}).items():
            if not inspect.isclass(fn):
                assert _parameters(fn) == expected, f"{part} {key!r}: {inspect.signature(fn)}"


def test_a_variant_has_its_reference_s_signature_and_changes_what_it_names():
    """tests/buggy/_registry.py's ``variant``: the caller's arguments, defaults filled in, with
    the named ones replaced (a value), computed (``derived``) or added (a knob of the
    implementation); ``returns`` changes the result."""
    from buggy._registry import derived, variant

    def reference(a, b=2, *, c=3):
        return a, b, c

    def implementation(a, b=2, *, c=3, knob=0):
        return a, b, c, knob

    changed = variant(
        implementation,
        like=reference,
        b=derived(lambda args: args.b * 10),
        knob=1,
        returns=lambda result, args: (*result, args.a),
    )
    assert inspect.signature(changed) == inspect.signature(reference)
    assert changed(1) == (1, 20, 3, 1, 1)
    assert changed(1, 5, c=7) == (1, 50, 7, 1, 1)
    with pytest.raises(TypeError):
        changed(1, knob=2)  # not a parameter of the part: a learner's function has no such knob
    assert variant(reference, c=0)(4, c=9) == (4, 2, 0)


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=_ids(PARTS))
def test_package_and_notebook_solution_pass_visible_and_hidden_tests(assignment, part):
    for cell in _cells(assignment, part):
        visible, hidden = _tests(assignment, part, cell)
        for implementation in (
            _package_function(assignment, part),
            _notebook_function(assignment, part),
        ):
            assert check_failure(visible, part, implementation) is None, cell
            assert check_failure(hidden, part, implementation) is None, cell


@pytest.mark.parametrize(("assignment", "part", "bug_id"), CASES, ids=_ids(CASES))
def test_hidden_tests_fail_the_buggy_implementation_with_a_teaching_message(
    assignment, part, bug_id
):
    message = _message(assignment, part, bug_id)
    assert message is not None, (
        f"the hidden tests of {assignment}.{part} accept the bug {bug_id!r}: "
        f"{_bugs(assignment, part)[bug_id].__doc__}"
    )
    # A teaching message: which call, what was expected, what came back, and why.
    assert f"{part}(" in message.splitlines()[0], message
    for label in ("expected:", "got:", "Hint:"):
        assert label in message, f"{label!r} missing from the message for {bug_id}:\n{message}"


@pytest.mark.parametrize(("assignment", "part", "bug_id"), CASES, ids=_ids(CASES))
def test_a_known_bug_loses_only_its_own_cell(assignment, part, bug_id):
    """Where a part's input checks are graded apart, a bug in the algorithm keeps the input
    checks' points and a bug in the input checks keeps the algorithm's: one mistake, one loss."""
    buggy = _bugs(assignment, part)[bug_id]
    for cell in set(_cells(assignment, part)) - {losing_cell(part, buggy)}:
        message = check_failure(_tests(assignment, part, cell)[1], part, buggy)
        assert message is None, f"{bug_id} also fails {cell}:\n{message}"


SPECIFIC_NUMBER = re.compile(r"(?<![\w.])-?\d[\d.]*\d(?!\w)")
"""a number of two or more digits (12, 0.5, 1000): single digits are too common to count"""


def specific_numbers(text: str) -> set[float]:
    """The numbers of two or more digits in ``text``, by value: 28 in a hint is 28.0 expected."""
    found = set()
    for number in SPECIFIC_NUMBER.findall(text):
        try:
            found.add(float(number))
        except ValueError:  # "1.2.3", a version or a date: not a number of the case
            continue
    return found


@pytest.mark.parametrize(("assignment", "part", "bug_id"), CASES, ids=_ids(CASES))
def test_feedback_on_a_hidden_check_gives_away_neither_its_input_nor_its_answer(
    assignment, part, bug_id
):
    """A failed hidden check shows the learner only the function, the kind of failure and the
    hint (``redact``): no number of the hidden call or of its expected value may come back
    through the hint."""
    message = _message(assignment, part, bug_id)
    first, *rest = message.splitlines()
    if "raised an error" in first:
        return  # the hint names the learner's own line of code, not the test's case
    shown = redact(message, AssertionError(message)).partition("Hint:")[2]
    case = " ".join([first, *(line for line in rest if line.lstrip().startswith("expected:"))])
    revealed = specific_numbers(shown) & specific_numbers(case)
    assert not revealed, f"the hint repeats {sorted(revealed)} of the hidden case:\n{message}"


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=_ids(PARTS))
def test_some_bug_gets_past_the_visible_tests_and_only_the_hidden_ones_catch_it(assignment, part):
    """Hidden tests are not a repeat of the visible ones."""
    visible, _ = _tests(assignment, part)
    slipped = [
        b for b, fn in _bugs(assignment, part).items() if check_failure(visible, part, fn) is None
    ]
    assert slipped, f"{assignment}.{part}: every known bug is already caught by the visible tests"


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=_ids(PARTS))
def test_every_check_in_the_test_cells_gives_a_hint(assignment, part):
    """A check without a hint could fail with a bare expected/got; every one must say why."""
    source = "\n".join(
        cell_by_grade_id(NOTEBOOKS[assignment], cell).source for cell in _cells(assignment, part)
    )
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("expect_")
    ]
    assert calls, f"{assignment}.{part}: no checks found"
    unhinted = [
        ast.get_source_segment(source, c).splitlines()[0]
        for c in calls
        if not any(k.arg == "hint" for k in c.keywords)
    ]
    assert not unhinted, f"{assignment}.{part}: checks without a hint: {unhinted}"


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=_ids(PARTS))
def test_unwritten_part_says_so(assignment, part):
    """The release's answer cell, untouched (it raises NotImplementedError), fails the visible
    tests with a message that says the part is not written yet."""
    unwritten = _notebook_function(assignment, part, folder=EXERCISES)
    message = check_failure(_tests(assignment, part)[0], part, unwritten)
    assert message is not None
    assert "NotImplementedError" in message and "not written yet" in message, message


@pytest.mark.parametrize(("assignment", "part", "alt_id"), ALTERNATIVES, ids=_ids(ALTERNATIVES))
def test_correct_implementations_written_differently_pass(assignment, part, alt_id):
    """Loops, plain lists, log space, an inverse-CDF sampler: any correct answer gets the points."""
    implementation = MODULES[assignment].ALTERNATIVES[part][alt_id]
    for cell in _cells(assignment, part):
        visible, hidden = _tests(assignment, part, cell)
        assert check_failure(visible, part, implementation) is None, cell
        assert check_failure(hidden, part, implementation) is None, cell


@pytest.mark.parametrize(
    "assignment",
    sorted(ALTERNATIVES_REQUIRED | {a for a, _, _ in ALTERNATIVES}),
)
def test_every_part_has_a_correct_alternative(assignment):
    assert {part for a, part, _ in ALTERNATIVES if a == assignment} == set(
        graded_parts(NOTEBOOKS[assignment])
    )


# ------------------------------------------------------------- messages of one assignment


def test_ch01_message_for_a_dropped_last_pair_shows_expected_and_got():
    message = _message("ch01_bigrams", "count_bigrams", "drops_last_pair", tests=0)
    assert message.splitlines() == [
        "count_bigrams([[0, 1, 1]], vocab_size=3)[1, 1] is wrong.",
        "  expected: 1",
        "  got:      0",
        "  Hint: 1 follows 1 once. Every consecutive pair counts, including the last one.",
    ]


def test_ch01_message_for_nan_rows_names_the_input_and_the_fix():
    message = _message("ch01_bigrams", "bigram_probabilities", "nan_on_empty_rows")
    first = message.splitlines()[0]
    assert first.startswith("bigram_probabilities([[0, 0, 0],"), message
    assert "nan" in message and "1 / V" in message


def test_ch02_message_for_a_perplexity_without_the_mean():
    message = _message("ch02_ngrams", "perplexity", "sum_not_mean", tests=0)
    assert message.splitlines() == [
        "perplexity([0.5, 0.5, 0.5]) is wrong.",
        "  expected: 2.0",
        "  got:      7.999999999999998",
        "  Hint: every token got 1/2: as unsure as a fair coin, perplexity 2.",
    ]
