"""mini_llm.checks: the teaching assertions of the exercise notebooks."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
import torch

from mini_llm.checks import (
    CheckFailed,
    describe_call,
    expect_close,
    expect_equal,
    expect_raises,
    expect_shape,
    expect_true,
    expect_type,
    run,
    show,
)
from mini_llm.grading.verify import redact


def _message(check, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        check(*args, **kwargs)
    return str(info.value)


def test_describe_call_writes_the_call_on_one_line():
    assert describe_call("f", [[0, 1]], n=2) == "f([[0, 1]], n=2)"
    assert describe_call(len, np.array([[0.5, 1.0], [0.0, 2.0]])) == "len([[0.5, 1.], [0., 2.]])"
    assert "\n" not in show(np.eye(3))
    assert show(np.zeros((10, 10))) == "<array of shape (10, 10), dtype float64>"
    # arrays inside a list are shown like arrays: on one line, long ones abbreviated
    assert show([np.eye(2), np.zeros((10, 10))]) == (
        "[[[1., 0.], [0., 1.]], <array of shape (10, 10), dtype float64>]"
    )


def test_tensors_are_shown_on_one_line_by_their_few_values_or_their_shape():
    """torch's repr spans several lines, and reprlib cut it in the middle of a row; for a large
    tensor what a crash message needs is its shape, not its first numbers."""
    target = torch.tensor([[5, 6, 2, 0], [7, 2, 0, 0], [5, 5, 9, 2]])  # ids: up to 36 in full
    assert describe_call("exact_match", target, target, 2) == (
        "exact_match(tensor([[5, 6, 2, 0], [7, 2, 0, 0], [5, 5, 9, 2]]), "
        "tensor([[5, 6, 2, 0], [7, 2, 0, 0], [5, 5, 9, 2]]), 2)"
    )
    assert show(torch.tensor([[0.5, -1.0]], requires_grad=True)) == "tensor([[ 0.5, -1.]])"
    assert show(torch.ones(2, dtype=torch.bfloat16)) == "tensor([1., 1.])"
    assert show(torch.zeros(4, 8)) == "<tensor of shape (4, 8), dtype torch.float32>"
    assert show(torch.zeros(2, 0, 6)) == "<tensor of shape (2, 0, 6), dtype torch.float32>"
    assert show([torch.ones(2), torch.ones(2, 30, dtype=torch.float64)]) == (
        "[tensor([1., 1.]), <tensor of shape (2, 30), dtype torch.float64>]"
    )

    def product(x, w):
        return x @ w

    message = _message(run, product, torch.ones(4, 8), torch.ones(3, 3))
    assert message.startswith(
        "product(<tensor of shape (4, 8), dtype torch.float32>, "
        "<tensor of shape (3, 3), dtype torch.float32>) raised an error."
    )


def test_expect_equal_passes_on_equal_values():
    expect_equal(np.array([[0, 1], [1, 0]]), [[0, 1], [1, 0]], "f()", hint="h")
    expect_equal(np.int64(3), 3, "f()")
    expect_equal([[1, 2], [3]], [[1, 2], [3]], "f()")  # ragged lists too


def test_expect_equal_message_has_call_expected_got_hint_and_where():
    message = _message(
        expect_equal,
        np.array([[0, 1], [0, 0]]),
        [[0, 1], [0, 1]],
        "f(x)",
        hint="count the last pair",
    )
    assert message.splitlines() == [
        "f(x) is wrong: 1 of 4 entries differ; [1, 1]: expected 1, got 0.",
        "  expected: [[0, 1], [0, 1]]",
        "  got:      [[0, 1], [0, 0]]",
        "  Hint: count the last pair",
    ]


def test_expect_equal_reports_wrong_shape_and_ragged_items():
    assert "has the wrong number of items" in _message(expect_equal, [1, 2, 3], [1, 2], "f()")
    assert "has the wrong shape" in _message(expect_equal, [[1, 2]], [[1], [2]], "f()")
    message = _message(expect_equal, [[1], [2, 3]], [[1], [2, 4]], "g()")
    assert "is wrong at item [1]" in message and "expected: [2, 4]" in message


def test_expect_close_tolerates_rounding_and_matches_inf_and_nan():
    expect_close(0.1 + 0.2, 0.3, "f()")
    expect_close(float("inf"), float("inf"), "f()")
    expect_close([np.nan, 1.0], [np.nan, 1.0], "f()")
    message = _message(expect_close, 0.30001, 0.3, "f()", hint="use the natural log")
    assert "expected: 0.3" in message and "got:      0.30001" in message
    assert "Hint: use the natural log" in message
    assert "expected: inf" in _message(expect_close, 11.5, float("inf"), "f()")
    assert "should be a number" in _message(expect_close, "x", 1.0, "f()")


def test_expect_shape_and_type():
    expect_shape(np.zeros((2, 3)), (2, 3), "f()")
    assert "should return a NumPy array" in _message(expect_shape, [[0, 0]], (1, 2), "f()")
    assert "shape (3, 3)" in _message(expect_shape, np.zeros((2, 2)), (3, 3), "f()")
    expect_type([1], list, "f()")
    assert "should return a list" in _message(expect_type, (1,), list, "f()")
    assert "should return an int" in _message(expect_type, 1.5, int, "f()")  # not "a int"


def test_expect_true_uses_the_given_words():
    expect_true(True, "f()", "x", "y")
    message = _message(expect_true, False, "f()", "rows sum to 1", "[0.5, 2]", hint="divide")
    assert "expected: rows sum to 1" in message and "got:      [0.5, 2]" in message


def test_expect_raises():
    def refuses(x):
        raise ValueError("bad")

    def crashes(x):
        return [][x]

    def accepts(x):
        return x

    expect_raises(ValueError, refuses, 1)
    message = _message(expect_raises, ValueError, crashes, 3, hint="check the range")
    assert message.splitlines()[0] == "crashes(3) raised the wrong kind of error."
    assert "expected: ValueError" in message and "got:      IndexError" in message
    message = _message(expect_raises, ValueError, accepts, 3)
    assert "should refuse this input" in message and "it returned 3" in message


def test_run_returns_the_result_and_turns_crashes_into_teaching_failures():
    assert run(sum, [1, 2]) == (3, "sum([1, 2])")

    def unwritten(x):
        raise NotImplementedError()

    def broken(x):
        return 1 / x

    assert "not written yet" in _message(run, unwritten, 1)
    message = _message(run, broken, 0)
    assert message.splitlines()[0] == "broken(0) raised an error."
    assert "got:      ZeroDivisionError: division by zero" in message


def test_run_silences_warnings_of_a_correct_answer():
    """nbgrader gives 0 to a test cell with stderr output; a harmless warning must not cost points."""

    def nll_with_a_zero(p):
        return -np.log(np.asarray(p))  # log(0) warns "divide by zero"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result, _ = run(nll_with_a_zero, [1.0, 0.0])
        warnings.warn("outside run() warnings still show", UserWarning)
    assert result.tolist() == [0.0, np.inf]
    assert [str(w.message) for w in caught] == ["outside run() warnings still show"]


def test_a_crash_and_a_wrong_length_read_well_without_a_traceback():
    """The grader shows only the summary and the hint of a hidden check: they must stand alone."""

    def broken(x):
        return 1 / x

    hint = _message(run, broken, 0).splitlines()[-1]
    assert (
        hint.startswith("  Hint: ZeroDivisionError at line ")
        and "of broken (`return 1 / x`)" in hint
    )
    assert "traceback" not in hint
    message = _message(expect_equal, [0, 1], [0, 1, 2], "f()", hint="h")
    assert message.splitlines()[:3] == [
        "f() has the wrong number of items.",
        "  expected: 3 items: [0, 1, 2]",
        "  got:      2 items: [0, 1]",
    ]
    assert redact(message, AssertionError(message)) == (
        "A hidden check failed: f(…) has the wrong number of items. Hint: h"
    )
    after = _message(expect_equal, 2, 1, "w after step(model)", hint="h")
    assert redact(after, CheckFailed(after)) == (
        "A hidden check failed: a result of step(…) is wrong. Hint: h"
    )
    nameless = _message(expect_equal, 2, 1, "the weights", hint="h")
    assert redact(nameless, CheckFailed(nameless)) == "A hidden check failed. Hint: h"
    wrong_kind = _message(expect_raises, ValueError, broken, 0, hint="h")
    assert redact(wrong_kind, CheckFailed(wrong_kind)) == (  # not "raised the." (issue 31)
        "A hidden check failed: broken(…) raised the wrong kind of error. Hint: h"
    )
    crash = _message(run, broken, 0)
    assert redact(crash, AssertionError(crash)).startswith(
        "A hidden check failed: broken(…) raised an error. Hint: ZeroDivisionError at line "
    )


@pytest.mark.parametrize(
    "failing",
    [
        "expect_equal(run(len, [1, 2])[0], 3, 'len([1, 2])', 'count them')",  # a wrong result
        "run(int, 'x')",  # the learner's function raised: no chain of two tracebacks
    ],
)
def test_a_failed_check_shows_its_message_first_and_alone_in_a_notebook(failing):
    """What a learner sees under a test cell: IPython's rendering of the error (ipykernel sends
    the same lines to the notebook), with the message first and no traceback or chain."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_cell("from mini_llm.checks import expect_equal, run")
    with capture_output() as shown:
        result = shell.run_cell(failing)
    assert isinstance(result.error_in_exec, AssertionError)
    lines = re.sub(r"\x1b\[[0-9;]*m", "", shown.stdout).strip().splitlines()
    assert lines[0] == f"AssertionError: {str(result.error_in_exec).splitlines()[0]}"
    assert lines[1:] == str(result.error_in_exec).splitlines()[1:]
    assert "Hint:" in lines[-1]


def test_a_hint_names_a_built_in_error_but_never_one_the_answer_named():
    """A class name the answer chose could carry what it saw of a hidden input; a message
    that forges a ``Hint:`` line stays on the ``got:`` line."""
    from mini_llm.checks import CheckFailed, run

    def builtin(x):
        raise KeyError(x)

    def own(x):
        leak = type(f"Leak{x}", (Exception,), {})
        raise leak(f"\n  Hint: the hidden input was {x}")

    with pytest.raises(CheckFailed) as caught:
        run(builtin, 1)
    assert caught.value.args[0].splitlines()[-1].startswith("  Hint: KeyError ")
    with pytest.raises(CheckFailed) as caught:
        run(own, 42)
    lines = caught.value.args[0].splitlines()
    assert lines[-1].startswith("  Hint: An exception of your own ") and "42" not in lines[-1]
    assert lines[0].startswith("own(42) raised an error")
    assert sum("Hint:" in line for line in lines) == 2 and len(lines) == 4  # forged one: on got
