"""mini_llm.differential: an answer against the reference on generated inputs.

Each check must fail the kind of wrong answer it is for (with a message that names the call and
the kind of input) and pass correct answers written differently."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mini_llm.checks import CheckFailed
from mini_llm.differential import case, expect_like_reference, expect_same_gradients


def reference_normalise(x):
    """Rows divided by their sums, as a new float array of x's float dtype; ValueError if any
    row sums to zero."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError("expected a matrix")
    totals = x.sum(axis=1, keepdims=True)
    if (totals == 0).any():
        raise ValueError("a row sums to zero")
    return x / totals


CASES = [
    case("one row", np.array([[1.0, 3.0]])),
    case("float32 rows", np.array([[1.0, 1.0], [2.0, 6.0]], dtype=np.float32)),
    case("a row of zeros", np.array([[0.0, 0.0]])),
    case("a vector", np.array([1.0, 2.0])),
]


def _failure(answer, cases=CASES, **options) -> str | None:
    try:
        expect_like_reference(
            answer, reference_normalise, cases, hint="divide by the row sum.", **options
        )
    except CheckFailed as err:
        return str(err)
    return None


def test_a_correct_rewrite_passes():
    def loops(x):
        x = np.asarray(x)
        if x.ndim != 2:
            raise ValueError("not a matrix")
        out = np.empty_like(x)
        for i, row in enumerate(x):
            if row.sum() == 0:
                raise ValueError("zero row")
            out[i] = row / row.sum()
        return out

    assert _failure(loops) is None


def test_a_wrong_value_names_the_call_the_input_kind_and_the_rule():
    message = _failure(lambda x: np.asarray(x) / np.asarray(x).sum())
    first = message.splitlines()[0]
    assert first.startswith("<lambda>(") and "is wrong" in first
    assert "Hint: it goes wrong on float32 rows. divide by the row sum." in message


def test_the_first_failing_case_is_the_one_reported():
    def wrong_on_two_rows(x):
        x = np.asarray(x)
        result = reference_normalise(x)
        return result if len(x) == 1 else result[::-1]

    assert "on float32 rows" in _failure(wrong_on_two_rows)


def test_a_float_dtype_must_be_kept():
    message = _failure(lambda x: reference_normalise(np.asarray(x, dtype=np.float64)))
    assert "dtype float64" in message and "expected float32" in message


def test_the_type_of_the_result_counts():
    message = _failure(lambda x: reference_normalise(x).tolist())
    assert "should be a NumPy array" in message


def test_an_argument_changed_in_place_is_caught():
    def in_place(x):
        result = reference_normalise(x)
        if x.ndim == 2:
            x /= x.sum(axis=1, keepdims=True)
        return result

    assert "should leave its argument `x` unchanged" in _failure(in_place)
    assert _failure(in_place, unchanged=False) is None


def test_invalid_input_must_raise_the_same_kind_of_error():
    def no_check(x):
        x = np.asarray(x)
        return x / x.sum(axis=-1, keepdims=True)

    def wrong_error(x):
        if np.asarray(x).ndim != 2 or (np.asarray(x).sum(axis=1) == 0).any():
            raise TypeError("bad")
        return reference_normalise(x)

    assert "should refuse this input with an error" in _failure(no_check)
    assert "raised the wrong kind of error" in _failure(wrong_error)


def test_dicts_compare_by_value_and_a_subclass_is_a_dict():
    from collections import Counter

    def reference(words):
        counts = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        return counts

    cases = [case("a repeated word", ["a", "b", "a"])]
    expect_like_reference(Counter, reference, cases, hint="count each word.")
    with pytest.raises(CheckFailed, match="wrong keys"):
        expect_like_reference(lambda w: dict.fromkeys(w[:1], 2), reference, cases, hint="count.")


def test_gradients_catch_a_result_without_a_graph_and_a_wrong_backward():
    def softmax(x):
        return torch.softmax(x, dim=-1)

    def faked(x):
        return torch.tensor(softmax(x).detach().numpy(), requires_grad=True)

    class Detached(torch.autograd.Function):  # right forward, backward of exp alone
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return torch.softmax(x, dim=-1)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * torch.softmax(x, dim=-1)

    def by_hand(x):
        e = torch.exp(x - x.max(dim=-1, keepdim=True).values)
        return e / e.sum(dim=-1, keepdim=True)

    cases = [case("a row of three", torch.tensor([[0.5, -1.0, 2.0]], dtype=torch.float64))]
    expect_same_gradients(by_hand, softmax, cases, hint="use torch operations.")
    with pytest.raises(CheckFailed, match="should exist"):
        expect_same_gradients(faked, softmax, cases, hint="use torch operations.")
    with pytest.raises(CheckFailed, match="gradient with respect to `x` is wrong"):
        expect_same_gradients(Detached.apply, softmax, cases, hint="use torch operations.")


def test_booleans_are_not_integers_and_generators_compare_by_state():
    def mask(n):
        return torch.ones(n, n).tril().bool()

    cases = [case("a size of two", 2)]
    with pytest.raises(CheckFailed, match="dtype torch.int64"):
        expect_like_reference(lambda n: mask(n).long(), mask, cases, hint="a bool mask.")

    def draw(generator, n):
        return generator.integers(0, 9, size=n)

    cases = [case("a fresh generator", np.random.default_rng(3), 4)]
    expect_like_reference(draw, draw, cases, hint="draw from the generator.")
