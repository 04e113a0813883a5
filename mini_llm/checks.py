"""Checks that teach: the assertions used by the exercise notebooks' test cells.

A failed check raises ``AssertionError`` (a :class:`CheckFailed`, which a notebook shows alone,
with no traceback) with a message that says which call was checked, what was expected, what came
back, and a hint about the usual cause, for example::

    count_bigrams([[0, 1, 1]], vocab_size=3)[1, 1] is wrong.
      expected: 1
      got:      0
      Hint: every consecutive pair counts, including the last one.

The helpers are small on purpose: a test cell is a list of calls on explicit inputs, each
followed by one ``expect_*`` on its result.

* ``run(fn, *args, **kwargs)`` calls ``fn`` and returns ``(result, call)`` where ``call`` is the
  call written out as text; if ``fn`` raises, the error becomes an ``AssertionError`` that names
  the call (``NotImplementedError`` says the function is not written yet).
* ``expect_equal(got, expected, call, hint)`` -- exact equality (numbers, lists, arrays).
* ``expect_close(got, expected, call, hint, rtol, atol)`` -- floating-point equality; ``inf``
  matches ``inf`` and ``nan`` matches ``nan``.
* ``expect_shape(got, shape, call, hint)`` -- an array of the given shape.
* ``expect_type(got, types, call, hint)`` -- an instance of the given type(s).
* ``expect_true(condition, call, expected, got, hint)`` -- any other property, described in words.
* ``expect_raises(errors, fn, *args, hint=..., **kwargs)`` -- the call must raise one of
  ``errors`` (bad input must be refused with a clear error, not answered wrongly).
* ``show(value)`` and ``describe_call(fn, *args, **kwargs)`` -- the short text used in messages.
"""

from __future__ import annotations

import reprlib
import sys
import sysconfig
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "CheckFailed",
    "describe_call",
    "expect_close",
    "expect_equal",
    "expect_raises",
    "expect_shape",
    "expect_true",
    "expect_type",
    "run",
    "show",
]

_MAX_SHOWN_DIFFERENCES = 3

_short = reprlib.Repr()
_short.maxlist = 8
_short.maxtuple = 8
_short.maxstring = 40
_short.maxother = 60


def _is_tensor(value: Any) -> bool:
    """A torch tensor, recognised without importing torch (this module needs only NumPy)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _show_tensor(value: Any) -> str:
    """A tensor as ``show`` writes an array, on one line: ``tensor([[5, 6], [7, 2]])`` for a few
    values (up to 8 floats, 36 integers), else its shape and dtype, which is what a message
    about a large tensor most needs (torch's own repr spans several lines, and reprlib cut it
    in the middle of a row)."""
    try:
        values = value.detach().cpu()
        if values.is_floating_point():
            values = values.double()  # NumPy has no bfloat16
        array = values.numpy()
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return _short.repr(value)  # sparse, meta or otherwise unconvertible tensors
    if 0 < array.size <= (8 if value.is_floating_point() else 36):
        return f"tensor({show(array)})"
    return f"<tensor of shape {tuple(array.shape)}, dtype {value.dtype}>"


def show(value: Any) -> str:
    """A short, readable repr: arrays, tensors and long lists are abbreviated."""
    if _is_tensor(value):
        return _show_tensor(value)
    if isinstance(value, np.ndarray):
        if value.size <= 36:
            text = np.array2string(value, separator=", ", precision=6, max_line_width=10_000)
            text = " ".join(text.split())  # one line, also for a matrix
            return text.replace(" ,", ",").replace(" ]", "]")
        return f"<array of shape {value.shape}, dtype {value.dtype}>"
    if isinstance(value, np.floating):
        return format(value.item(), ".8g")
    if isinstance(value, np.generic):
        return repr(value.item())
    if isinstance(value, np.random.Generator):
        return "<numpy Generator>"
    if isinstance(value, (list, tuple)) and any(
        isinstance(v, np.ndarray) or _is_tensor(v) for v in value
    ):
        items = [show(v) for v in value[: _short.maxlist]]
        items += ["..."] if len(value) > _short.maxlist else []
        return f"[{', '.join(items)}]" if isinstance(value, list) else f"({', '.join(items)})"
    if callable(value) and hasattr(value, "__name__"):
        return value.__name__
    return _short.repr(value)


def describe_call(fn: Callable | str, *args: Any, **kwargs: Any) -> str:
    """The call ``fn(*args, **kwargs)`` written out as short text, e.g. ``f([[0, 1]], n=2)``."""
    name = fn if isinstance(fn, str) else getattr(fn, "__name__", repr(fn))
    parts = [show(a) for a in args] + [f"{k}={show(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(parts)})"


class CheckFailed(AssertionError):
    """A failed check. In a notebook it shows as its message alone -- the call, what was
    expected, what came back, the hint -- with no traceback through this module and no chained
    exception above it: IPython lets an exception render itself (``_render_traceback_``).
    Everywhere else it is a plain ``AssertionError``."""

    def _render_traceback_(self) -> list[str]:
        first, *rest = str(self).splitlines() or [""]
        return [f"\x1b[0;31mAssertionError:\x1b[0m {first}", *rest]


def _one_line(text: str) -> str:
    """Text from the answer (a value, an error message) on one line: it cannot then pass for
    another line of the message, a ``Hint:`` say."""
    return text.replace("\r", "\\r").replace("\n", "\\n")


def _fail(call: str, what: str, expected: str | None, got: str | None, hint: str) -> None:
    lines = [_one_line(f"{call} {what}")]
    if expected is not None:
        lines.append(f"  expected: {_one_line(expected)}")
    if got is not None:
        lines.append(f"  got:      {_one_line(got)}")
    if hint:
        lines.append(f"  Hint: {hint.replace(chr(10), ' ')}")
    raise CheckFailed("\n".join(lines))


def run(fn: Callable, *args: Any, **kwargs: Any) -> tuple[Any, str]:
    """Call ``fn(*args, **kwargs)``; return ``(result, call-as-text)``.

    An exception raised by ``fn`` is turned into an ``AssertionError`` that names the call, so
    a crash reads like any other failed check. Warnings (NumPy's ``log(0)`` RuntimeWarning, say)
    are silenced: nbgrader scores a test cell that writes to stderr as zero, and a correct answer
    must not lose its points to a warning.
    """
    call = describe_call(fn, *args, **kwargs)
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return fn(*args, **kwargs), call
    except NotImplementedError as err:
        raise CheckFailed(
            f"{call} raised NotImplementedError: this function is not written yet.\n"
            "  Hint: replace `raise NotImplementedError()` with your code, run that cell, "
            "then run this one again."
        ) from err
    except Exception as err:
        raise CheckFailed(
            f"{_one_line(call)} raised an error.\n"
            "  expected: a result, not an error\n"
            f"  got:      {_one_line(f'{type(err).__name__}: {err}')}\n"
            f"  Hint: {error_name(err)} {_where(err)}: make your function handle this input."
        ) from err


def error_name(err: BaseException) -> str:
    """The kind of ``err`` as a hint may name it: a built-in exception by its name, any other
    as "An exception of your own" (a name the answer chose could carry what it saw)."""
    kind = type(err)
    if kind.__module__.partition(".")[0] in ("builtins", "numpy", "torch"):
        return kind.__name__
    return "An exception of your own"


def _where(err: BaseException) -> str:
    """The line of the learner's code that raised ``err``, as text for a message that must stand
    on its own (the grader shows no traceback): the deepest frame outside Python, the installed
    libraries and ``mini_llm``."""
    libraries = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    libraries.add(str(Path(__file__).resolve().parent))
    frames = traceback.extract_tb(err.__traceback__)[1:]  # [0] is run() itself
    own = [f for f in frames if not any(f.filename.startswith(d) for d in libraries if d)]
    if not own:
        return "in your code"
    frame = own[-1]
    line = f" (`{frame.line.strip()}`)" if frame.line else ""
    return f"at line {frame.lineno} of {frame.name}{line}"


def _as_array(value: Any) -> np.ndarray | None:
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001 - ragged or exotic objects are simply not arrays
        return None
    return None if array.dtype == object else array


def _differences(got: np.ndarray, expected: np.ndarray, mismatch: np.ndarray) -> str:
    where = np.argwhere(mismatch)
    shown = []
    for index in where[:_MAX_SHOWN_DIFFERENCES]:
        idx = tuple(int(i) for i in index)
        label = ", ".join(map(str, idx))
        shown.append(f"[{label}]: expected {show(expected[idx])}, got {show(got[idx])}")
    more = f" (and {len(where) - len(shown)} more)" if len(where) > len(shown) else ""
    return f"{len(where)} of {mismatch.size} entries differ{more}; " + "; ".join(shown)


def _plain(value: Any) -> Any:
    """Arrays, NumPy scalars and tuples as plain Python lists and numbers, for ``==``."""
    if isinstance(value, (np.ndarray, np.generic)):
        return value.tolist()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _compare_items(got: Any, expected: Sequence, call: str, hint: str) -> None:
    """Exact comparison of a ragged list (for example a list of samples of different lengths)."""
    if not isinstance(got, (list, tuple, np.ndarray)):
        _fail(call, f"should be a list of {len(expected)} items.", show(expected), show(got), hint)
    if len(got) != len(expected):
        _fail(
            call,
            "has the wrong number of items.",
            f"{len(expected)} items",
            f"{len(got)} items: {show(got)}",
            hint,
        )
    for i, (g, e) in enumerate(zip(got, expected)):
        if _plain(g) != _plain(e):
            _fail(call, f"is wrong at item [{i}].", show(e), show(g), hint)


def _compare(
    got: Any, expected: Any, call: str, hint: str, close: bool, rtol: float, atol: float
) -> None:
    expected_array = _as_array(expected)
    got_array = _as_array(got)
    if expected_array is None and isinstance(expected, (list, tuple)):
        _compare_items(got, expected, call, hint)
        return
    if expected_array is None or expected_array.ndim == 0:
        # a single value
        if got_array is None or got_array.ndim != 0 and got_array.size != 1:
            _fail(call, "should be a single value.", show(expected), show(got), hint)
        if close:
            try:
                g = float(np.asarray(got).reshape(()))
            except (TypeError, ValueError):
                _fail(call, "should be a number.", show(expected), show(got), hint)
            e = float(expected)
            ok = (np.isnan(e) and np.isnan(g)) or bool(np.isclose(g, e, rtol=rtol, atol=atol))
            if not ok:
                _fail(call, "is wrong.", repr(e), repr(g), hint)
        elif not bool(np.all(got_array == expected_array)):
            _fail(call, "is wrong.", show(expected), show(got), hint)
        return
    if got_array is None or got_array.ndim == 0:
        kind = f"an array of shape {expected_array.shape}"
        _fail(call, f"should be {kind}.", show(expected), show(got), hint)
    if got_array.ndim == expected_array.ndim == 1 and len(got_array) != len(expected_array):
        _fail(
            call,
            "has the wrong number of items.",
            f"{len(expected_array)} items: {show(expected_array)}",
            f"{len(got_array)} items: {show(got_array)}",
            hint,
        )
    if got_array.shape != expected_array.shape:
        _fail(
            call,
            "has the wrong shape.",
            f"{show(expected_array)}, shape {expected_array.shape}",
            f"{show(got_array)}, shape {got_array.shape}",
            hint,
        )
    if close:
        try:
            g = got_array.astype(np.float64)
        except (TypeError, ValueError):
            _fail(call, "should hold numbers.", show(expected), show(got), hint)
        e = expected_array.astype(np.float64)
        mismatch = ~(np.isclose(g, e, rtol=rtol, atol=atol) | (np.isnan(g) & np.isnan(e)))
    else:
        mismatch = got_array != expected_array
    if mismatch.any():
        small = expected_array.size <= 36
        _fail(
            call,
            "is wrong: " + _differences(got_array, expected_array, mismatch) + ".",
            show(expected_array) if small else None,
            show(got_array) if small else None,
            hint,
        )


def expect_equal(got: Any, expected: Any, call: str, hint: str = "") -> None:
    """``got`` must equal ``expected`` exactly (numbers, lists and arrays compared by value)."""
    _compare(got, expected, call, hint, close=False, rtol=0.0, atol=0.0)


def expect_close(
    got: Any, expected: Any, call: str, hint: str = "", rtol: float = 1e-7, atol: float = 1e-12
) -> None:
    """``got`` must equal ``expected`` up to rounding; ``inf`` matches ``inf``, ``nan`` ``nan``."""
    _compare(got, expected, call, hint, close=True, rtol=rtol, atol=atol)


def expect_shape(got: Any, shape: Sequence[int], call: str, hint: str = "") -> None:
    """``got`` must be a NumPy array of shape ``shape``."""
    shape = tuple(shape)
    if not isinstance(got, np.ndarray):
        _fail(
            call,
            "should return a NumPy array.",
            f"an array of shape {shape}",
            f"{type(got).__name__} {show(got)}",
            hint,
        )
    if got.shape != shape:
        _fail(call, "has the wrong shape.", f"shape {shape}", f"shape {got.shape}", hint)


def expect_type(got: Any, types: type | tuple[type, ...], call: str, hint: str = "") -> None:
    """``got`` must be an instance of ``types``."""
    if not isinstance(got, types):
        names = (
            " or ".join(t.__name__ for t in types) if isinstance(types, tuple) else types.__name__
        )
        article = "an" if names[0] in "aeiouAEIOU" else "a"
        _fail(
            call,
            f"should return {article} {names}.",
            names,
            f"{type(got).__name__} {show(got)}",
            hint,
        )


def expect_true(condition: Any, call: str, expected: str, got: str, hint: str = "") -> None:
    """A property that ``expect_equal`` cannot state, described in words for the message."""
    if not bool(condition):
        _fail(call, "is wrong.", expected, got, hint)


def expect_raises(
    errors: type[BaseException] | tuple[type[BaseException], ...],
    fn: Callable,
    *args: Any,
    hint: str = "",
    **kwargs: Any,
) -> None:
    """``fn(*args, **kwargs)`` must raise one of ``errors``."""
    call = describe_call(fn, *args, **kwargs)
    names = (
        " or ".join(e.__name__ for e in errors) if isinstance(errors, tuple) else errors.__name__
    )
    try:
        result = fn(*args, **kwargs)
    except errors:
        return
    except NotImplementedError as err:
        raise CheckFailed(
            f"{call} raised NotImplementedError: this function is not written yet.\n"
            "  Hint: replace `raise NotImplementedError()` with your code."
        ) from err
    except Exception as err:  # noqa: BLE001
        _fail(call, "raised the wrong kind of error.", names, f"{type(err).__name__}: {err}", hint)
    _fail(
        call,
        "should refuse this input with an error.",
        f"{names} raised",
        f"no error; it returned {show(result)}",
        hint,
    )
