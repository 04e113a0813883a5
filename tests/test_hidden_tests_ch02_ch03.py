"""The hidden tests of ch02_ngrams and ch03_neural_lm catch realistic mistakes and explain them.

The same standard as ``test_buggy_implementations.py`` for ch01: the hidden tests of the
SOLUTION notebook run in-process; the package's functions (the notebook's functions are
drop-in replacements for them) and the notebook's own solutions must pass them; every
known-buggy implementation in ``tests/buggy/<assignment>.py`` must fail them with a message that
names the call and says what was expected, what came back, and a hint.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect

import numpy as np
import pytest
import torch
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

PACKAGE_MODULES = {
    "ch02_ngrams": ("mini_llm.smoothing", "mini_llm.evaluation"),
    "ch03_neural_lm": ("mini_llm.mlp_lm",),
}
"""assignment -> the mini_llm modules that hold the reference of each graded function"""


def _load_bugs(assignment: str) -> dict:
    spec = importlib.util.spec_from_file_location(
        f"buggy_{assignment}", REPO / "tests" / "buggy" / f"{assignment}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BUGS


NOTEBOOKS = {a: read(notebook_path(SOLUTIONS, a)) for a in PACKAGE_MODULES}
BUGS = {a: _load_bugs(a) for a in PACKAGE_MODULES}
PARTS = [(a, part) for a, nb in NOTEBOOKS.items() for part in graded_parts(nb)]
CASES = [(a, part, bug_id) for a, part in PARTS for bug_id in BUGS[a].get(part, {})]


def _package_function(assignment: str, part: str):
    for name in PACKAGE_MODULES[assignment]:
        module = importlib.import_module(name)
        if hasattr(module, part):
            return getattr(module, part)
    raise AssertionError(f"{part} is in none of {PACKAGE_MODULES[assignment]}")


def _notebook_function(assignment: str, part: str):
    namespace: dict = {"np": np, "torch": torch, "nn": torch.nn, "F": torch.nn.functional}
    source = cell_by_grade_id(NOTEBOOKS[assignment], f"{part}_impl").source
    exec(reference_answer(source), namespace)  # noqa: S102 - our own notebook
    return namespace[part]


def _tests(assignment: str, part: str) -> tuple[str, str]:
    return split_test_cell(cell_by_grade_id(NOTEBOOKS[assignment], f"{part}_tests").source)


def _failure(code: str, part: str, implementation) -> str | None:
    """The AssertionError message the checks raise with ``implementation`` bound to ``part``."""
    namespace = {"__name__": "__exercise__", part: implementation}
    with np.errstate(all="ignore"):
        try:
            exec(compile(code, f"<{part}_tests>", "exec"), namespace)  # noqa: S102
        except AssertionError as err:
            return str(err)
    return None


def test_graded_parts_and_at_least_two_bugs_each():
    assert [p for a, p in PARTS if a == "ch02_ngrams"] == [
        "ngram_counts", "add_k_probabilities", "interpolate", "perplexity"]
    assert [p for a, p in PARTS if a == "ch03_neural_lm"] == [
        "context_target_pairs", "MLPLanguageModel", "training_step", "evaluate_perplexity"]
    for assignment, part in PARTS:
        assert len(BUGS[assignment].get(part, {})) >= 2, f"{assignment}.{part}: need two bugs"
    for assignment, bugs in BUGS.items():
        graded = {p for a, p in PARTS if a == assignment}
        assert set(bugs) <= graded, f"bugs for functions that are not graded: {set(bugs) - graded}"


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=[f"{a}-{p}" for a, p in PARTS])
def test_notebook_functions_have_the_package_signatures(assignment, part):
    def parameters(fn):
        return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]

    assert parameters(_notebook_function(assignment, part)) == \
        parameters(_package_function(assignment, part))


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=[f"{a}-{p}" for a, p in PARTS])
def test_package_and_notebook_solution_pass_visible_and_hidden_tests(assignment, part):
    for implementation in (_package_function(assignment, part),
                           _notebook_function(assignment, part)):
        for code in _tests(assignment, part):
            assert _failure(code, part, implementation) is None


@pytest.mark.parametrize(("assignment", "part", "bug_id"), CASES,
                         ids=[f"{a}-{p}-{b}" for a, p, b in CASES])
def test_hidden_tests_fail_the_buggy_implementation_with_a_teaching_message(assignment, part,
                                                                            bug_id):
    buggy = BUGS[assignment][part][bug_id]
    message = _failure(_tests(assignment, part)[1], part, buggy)
    assert message is not None, f"{part} hidden tests accept the bug {bug_id!r}: {buggy.__doc__}"
    assert f"{part}(" in message.splitlines()[0], message
    for label in ("expected:", "got:", "Hint:"):
        assert label in message, f"{label!r} missing from the message for {bug_id}:\n{message}"


@pytest.mark.parametrize(("assignment", "part"), PARTS, ids=[f"{a}-{p}" for a, p in PARTS])
def test_some_bug_gets_past_the_visible_tests_and_only_the_hidden_ones_catch_it(assignment, part):
    visible, _ = _tests(assignment, part)
    slipped = [b for b, fn in BUGS[assignment][part].items() if _failure(visible, part, fn) is None]
    assert slipped, f"{part}: every known bug is already caught by the visible tests"


def test_message_for_a_perplexity_without_the_mean():
    message = _failure(_tests("ch02_ngrams", "perplexity")[0], "perplexity",
                       BUGS["ch02_ngrams"]["perplexity"]["sum_not_mean"])
    assert message.splitlines() == [
        "perplexity([0.5, 0.5, 0.5]) is wrong.",
        "  expected: 2.0",
        "  got:      7.999999999999998",
        "  Hint: every token got 1/2: as unsure as a fair coin, perplexity 2.",
    ]
