"""Differential checks: a learner's answer compared with the reference on generated inputs.

Hand-written cases teach (this pair is counted once, this row must sum to one), but they test
only what their author thought of. A hidden test cell therefore also generates inputs that vary
everything the part's contract allows -- other widths and shapes, a batch of one, float32 and
float64, every combination of flags, extreme and tied values, invalid input of every kind --
and compares the answer with the reference on each:

* the value, its shape, its dtype (a float dtype must be kept exactly; an integer result must
  be integers, a boolean one booleans) and its type (a ``dict`` subclass is a dict, a ``float`` may be a NumPy float);
* the arguments, which must be left as they were (a random generator may move on);
* on input the reference refuses, the same kind of exception.

:func:`expect_same_gradients` compares gradients too: it runs backward through both and compares
the gradient of every floating-point tensor argument, so a result computed elsewhere and wrapped
with ``requires_grad=True`` (a flag without a graph) is caught.

Each generated input is a :class:`Case`, which says in words what is special about it ("a
batch of one", "float32 scores", "a row with every position masked"). Cases are checked in the
order given, simplest first, and the first that fails is reported: the smallest input on which
the answer breaks. Its words become the hint's statement of the rule broken; the input itself
and the reference's value appear only in the instructor's message (``redact`` keeps the hint,
so keep numbers of two digits or more out of ``about``).
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mini_llm.checks import CheckFailed, _fail, _where, describe_call, error_name, show
from mini_llm.grading.lending import beside_the_answers

__all__ = ["Case", "case", "expect_like_reference", "expect_same_gradients"]


@dataclass(frozen=True)
class Case:
    """One generated input: the arguments, and what is special about them, in words."""

    about: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


def case(about: str, *args: Any, **kwargs: Any) -> Case:
    """``Case(about, args, kwargs)``, written like the call it stands for."""
    return Case(about, args, kwargs)


def _call(fn: Callable, arguments: Case) -> tuple[Any, BaseException | None]:
    """``fn`` on a deep copy of the case's arguments: (result or copied arguments, error)."""
    args, kwargs = copy.deepcopy((arguments.args, arguments.kwargs))
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return (fn(*args, **kwargs), (args, kwargs)), None
    except Exception as err:  # noqa: BLE001 - compared with what the reference raises
        return (None, (args, kwargs)), err


def _torch():
    import sys

    return sys.modules.get("torch")


def _is_tensor(value: Any) -> bool:
    torch = _torch()
    return torch is not None and isinstance(value, torch.Tensor)


def _is_generator(value: Any) -> bool:
    torch = _torch()
    return isinstance(value, np.random.Generator) or (
        torch is not None and isinstance(value, torch.Generator)
    )


def _float_kind(dtype: Any) -> bool:
    return (
        np.issubdtype(dtype, np.floating)
        if isinstance(dtype, np.dtype)
        else dtype.is_floating_point
    )


def _difference(got: Any, expected: Any, rtol: float, atol: float, where: str = "") -> str | None:
    """What differs between ``got`` and ``expected`` (None when nothing does), as words."""
    at = f" at {where}" if where else ""
    if expected is None:
        return None if got is None else f"should be None{at}, got {type(got).__name__}"
    if isinstance(expected, np.random.Generator):  # equal when they would draw the same
        same = isinstance(got, np.random.Generator) and (
            got.bit_generator.state == expected.bit_generator.state
        )
        return None if same else f"is a random generator in another state{at}"
    if _is_tensor(expected):
        torch_bool = _torch().bool
        if not _is_tensor(got):
            return f"should be a torch tensor{at}, got {type(got).__name__}"
        if tuple(got.shape) != tuple(expected.shape):
            return f"has shape {tuple(got.shape)}{at}, expected {tuple(expected.shape)}"
        if got.dtype != expected.dtype and (
            expected.is_floating_point()
            or got.is_floating_point() != expected.is_floating_point()
            or torch_bool in (got.dtype, expected.dtype)
        ):
            return f"has dtype {got.dtype}{at}, expected {expected.dtype}"
        got, expected = got.detach().double().numpy(), expected.detach().double().numpy()
    if isinstance(expected, np.ndarray):
        got_array = np.asarray(got) if not isinstance(got, np.ndarray) else got
        if not isinstance(got, np.ndarray) and not _is_tensor(got):
            return f"should be a NumPy array{at}, got {type(got).__name__}"
        if got_array.shape != expected.shape:
            return f"has shape {got_array.shape}{at}, expected {expected.shape}"
        if _float_kind(expected.dtype) and got_array.dtype != expected.dtype:
            return f"has dtype {got_array.dtype}{at}, expected {expected.dtype}"
        if np.issubdtype(expected.dtype, np.integer) and not np.issubdtype(
            got_array.dtype, np.integer
        ):
            return f"has dtype {got_array.dtype}{at}, expected integers"
        if (expected.dtype == bool) != (got_array.dtype == bool):
            return f"has dtype {got_array.dtype}{at}, expected {expected.dtype}"
        if _float_kind(expected.dtype):
            same = np.isclose(got_array, expected, rtol=rtol, atol=atol, equal_nan=True)
        else:
            same = got_array == expected
        if not np.all(same):
            wrong = int(np.size(same) - np.count_nonzero(same))
            return f"has {wrong} of {expected.size} entries wrong{at}"
        return None
    if isinstance(expected, dict):
        if not isinstance(got, dict):
            return f"should be a dict{at}, got {type(got).__name__}"
        if set(got) != set(expected):
            missing, extra = set(expected) - set(got), set(got) - set(expected)
            return (
                f"has the wrong keys{at}: {len(missing)} missing ({show(sorted(missing, key=repr))}), "
                f"{len(extra)} not expected ({show(sorted(extra, key=repr))})"
            )
        for key in expected:
            found = _difference(got[key], expected[key], rtol, atol, f"{where}[{key!r}]")
            if found:
                return found
        return None
    if isinstance(expected, (list, tuple)):
        kind = list if isinstance(expected, list) else tuple
        if not isinstance(got, kind):
            return f"should be a {kind.__name__}{at}, got {type(got).__name__}"
        if len(got) != len(expected):
            return f"has {len(got)} items{at}, expected {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            found = _difference(g, e, rtol, atol, f"{where}[{i}]")
            if found:
                return found
        return None
    if isinstance(expected, (bool, np.bool_)):
        if not isinstance(got, (bool, np.bool_)):
            return f"should be True or False{at}, got {type(got).__name__}"
        return None if bool(got) == bool(expected) else f"is {got}{at}, expected {expected}"
    if isinstance(expected, (int, np.integer)):
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            return f"should be an int{at}, got {type(got).__name__}"
        return None if int(got) == int(expected) else f"is wrong{at}"
    if isinstance(expected, (float, np.floating)):
        if isinstance(got, bool) or not isinstance(got, (float, int, np.floating, np.integer)):
            return f"should be a float{at}, got {type(got).__name__}"
        ok = np.isclose(float(got), float(expected), rtol=rtol, atol=atol, equal_nan=True)
        return None if ok else f"is wrong{at}"
    return None if got == expected else f"is wrong{at}"


def _rule(arguments: Case, hint: str) -> str:
    """The hint of a failed case: on what kind of input the answer breaks, then why."""
    return f"it goes wrong on {arguments.about}. {hint}".strip()


def _names(fn: Callable, arguments: Case) -> list[str]:
    """The names of the case's positional arguments, for "changed its argument x"."""
    import inspect

    try:
        parameters = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        parameters = []
    return [parameters[i] if i < len(parameters) else f"#{i}" for i in range(len(arguments.args))]


def _same_error(answer: Callable, call: str, raised: BaseException, err, hint: str) -> None:
    """The answer must refuse what the reference refuses, with the same kind of exception."""
    names = type(raised).__name__
    if err is None:
        _fail(call, "should refuse this input with an error.", f"{names} raised", "no error", hint)
    if not isinstance(err, type(raised)):
        _fail(call, "raised the wrong kind of error.", names, f"{type(err).__name__}: {err}", hint)


def expect_like_reference(
    answer: Callable,
    reference: Callable,
    cases: Iterable[Case],
    *,
    hint: str = "",
    rtol: float = 1e-6,
    atol: float = 1e-8,
    unchanged: bool = True,
) -> None:
    """On every case, ``answer`` must do what ``reference`` does: the same value (shape, dtype,
    type), its arguments left unchanged (``unchanged``), the same kind of exception where the
    reference raises one. The first case on which it does not is reported."""
    reference_name = getattr(answer, "__name__", "answer")
    for arguments in cases:
        call = describe_call(reference_name, *arguments.args, **arguments.kwargs)
        rule = _rule(arguments, hint)
        (expected, _), raised = _call(reference, arguments)
        (got, (args, kwargs)), err = _call(answer, arguments)
        if raised is not None:
            _same_error(answer, call, raised, err, rule)
            continue
        if err is not None:
            if isinstance(err, NotImplementedError):
                raise CheckFailed(
                    f"{call} raised NotImplementedError: this function is not "
                    "written yet.\n  Hint: replace `raise NotImplementedError()` "
                    "with your code."
                ) from err
            _fail(
                call,
                "raised an error.",
                "a result, not an error",
                f"{type(err).__name__}: {err}",
                f"{error_name(err)} {_where(err)}; {rule}",
            )
        found = _difference(got, expected, rtol, atol)
        if found:
            _fail(call, "is wrong: the result " + found + ".", show(expected), show(got), rule)
        if unchanged:
            names = _names(reference, arguments)
            given = list(zip(names, args)) + list(kwargs.items())
            original = list(arguments.args) + list(arguments.kwargs.values())
            for (name, now), before in zip(given, original):
                if _is_generator(before):
                    continue  # drawing from it is what it is for
                if _difference(now, before, 0.0, 0.0) is not None:
                    _fail(
                        call,
                        f"should leave its argument `{name}` unchanged.",
                        "the argument as it was given",
                        "it was changed in place",
                        f"work on a copy (x = x.copy(), or x.clone() for a tensor); {rule}",
                    )


# ------------------------------------------------------------------------------- gradients
def _cotangent(value: Any, seed: int):
    """Fixed random weights of ``value``'s shape: the gradient of ``(value * w).sum()`` checks
    every entry of the output, not only their sum."""
    torch = _torch()
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(value.shape, generator=generator, dtype=torch.float64).to(value.dtype)


def _outputs(result: Any) -> list:
    if _is_tensor(result):
        return [result]
    if isinstance(result, (list, tuple)):
        return [t for item in result for t in _outputs(item)]
    return []


def _gradients(fn: Callable, args: tuple, kwargs: dict, seed: int) -> tuple[Any, list]:
    """``fn(*args, **kwargs)`` and the gradients of its floating-point tensor arguments (None
    where a gradient is missing) after backward through a weighted sum of its tensor outputs."""
    torch = _torch()
    inputs = [
        a.detach().clone().requires_grad_(True) if _is_tensor(a) and a.is_floating_point() else a
        for a in args
    ]
    result = fn(*inputs, **kwargs)
    outputs = [o for o in _outputs(result) if o.is_floating_point() and o.requires_grad]
    if outputs:
        total = sum((o * _cotangent(o, seed + i)).sum() for i, o in enumerate(outputs))
        torch.autograd.backward(total)  # a leaf wrapped with requires_grad=True gets no graph
    grads = [
        None if a.grad is None else a.grad.detach().clone()
        for a in inputs
        if _is_tensor(a) and a.is_floating_point()
    ]
    detached = [o.detach() for o in _outputs(result)]
    return detached, grads


_gradients_beside = beside_the_answers(_gradients)
"""``_gradients`` run where the learner's function lives (in the grader's sandbox)."""


def expect_same_gradients(
    answer: Callable,
    reference: Callable,
    cases: Iterable[Case],
    *,
    hint: str = "",
    rtol: float = 1e-5,
    atol: float = 1e-7,
) -> None:
    """On every case, backward through ``answer``'s tensor outputs gives every floating-point
    tensor argument the gradient it gets through ``reference``'s. Positional tensors only."""
    name = getattr(answer, "__name__", "answer")
    for seed, arguments in enumerate(cases):
        call = describe_call(name, *arguments.args, **arguments.kwargs)
        rule = _rule(arguments, hint)
        _, expected = _gradients(reference, arguments.args, arguments.kwargs, seed)
        try:
            _, got = _gradients_beside(answer, arguments.args, arguments.kwargs, seed)
        except Exception as err:  # noqa: BLE001
            _fail(
                call,
                "raised an error.",
                "a result, not an error",
                f"{type(err).__name__}: {err}",
                f"{error_name(err)} {_where(err)}; {rule}",
            )
        names = _names(reference, arguments)
        floats = [
            n for n, a in zip(names, arguments.args) if _is_tensor(a) and a.is_floating_point()
        ]
        for label, g, e in zip(floats, got, expected):
            if e is None:
                continue
            if g is None:
                _fail(
                    call + f": the gradient with respect to `{label}`",
                    "should exist.",
                    "a gradient",
                    "None: the result is not connected to this input by autograd",
                    f"compute the result with torch operations on the tensors you are given "
                    f"(no NumPy, no .detach(), no .item()); {rule}",
                )
            found = _difference(g, e, rtol, atol)
            if found:
                _fail(
                    call + f": the gradient with respect to `{label}`",
                    "is wrong: it " + found + ".",
                    show(e),
                    show(g),
                    rule,
                )
