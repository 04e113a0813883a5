"""The registry every ``tests/buggy/<assignment>.py`` is built with, and the helpers they share.

A bug file starts with::

    from ._registry import new_registry

    REFERENCE = ("mini_llm.ngram",)  # the modules that hold the reference of each graded part
    BUGS, ALTERNATIVES, bug, correct = new_registry()

and then registers, for every graded part (the function or class a ``<part>_impl`` cell
defines), known-buggy versions with ``@bug(part, bug_id, description)`` and, optionally, correct
versions written differently from the reference with ``@correct(part, alt_id)``. Each registered
object is renamed to ``part``, as a learner's own answer would be. ``tests/test_hidden_tests.py``
and ``tests/test_autograde.py`` read ``REFERENCE``, ``BUGS`` and ``ALTERNATIVES``.

A bug that is the reference (or a private implementation the bug file shares) with one thing
changed is registered without restating its signature::

    bug.variant("noam_learning_rate", "warmup_exponent", "step · warmup^-0.5", _noam, exponent=-0.5)

registers ``variant(_noam, exponent=-0.5)`` (see :func:`variant`), and where several bugs vary
one implementation, ``bug.variants`` names the part and the implementation once::

    noam_bug = bug.variants("noam_learning_rate", _noam, like=transformer.noam_learning_rate)
    noam_bug("warmup_exponent", "step · warmup^-0.5", exponent=-0.5)
    noam_bug("max_not_min", "max() of the two terms", pick=max)

A bug whose only mistake is in refusing invalid input (no ``ValueError`` for a negative size)
is registered with ``@bug.input(part, bug_id, description)``: where a part's input checks are
graded apart (a ``<part>_input_tests`` cell), it must lose those points and keep the others.

An argument computed from the call's own is ``bug.derived(f)`` (:class:`derived`). A bug file
imports ``new_registry`` alone from here (``checked_ids`` too where it needs it) and takes the
rest from what ``new_registry()`` returns: ``tests/test_grading_assignments.py`` hands in a bug
as one answer cell, this file's text and the bug file's without that import line.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from types import SimpleNamespace

import numpy as np

Registry = dict[str, dict[str, Callable]]
"""exercise part name -> {id -> implementation}, in the order of registration"""


def new_registry() -> tuple[Registry, Registry, Callable, Callable]:
    """``(BUGS, ALTERNATIVES, bug, correct)`` for one bug file."""
    bugs: Registry = {}
    alternatives: Registry = {}

    def _register(table: Registry, name: str, key: str, description: str | None):
        def register(fn: Callable) -> Callable:
            fn.__name__ = fn.__qualname__ = name
            if description is not None:
                fn.__doc__ = description
            assert key not in table.get(name, {}), f"{name}: {key!r} registered twice"
            table.setdefault(name, {})[key] = fn
            return fn

        return register

    def bug(name: str, bug_id: str, description: str) -> Callable[[Callable], Callable]:
        """Register a buggy version of the exercise part ``name``."""
        return _register(bugs, name, bug_id, description)

    def correct(name: str, alt_id: str) -> Callable[[Callable], Callable]:
        """Register a correct version of ``name`` written differently from the reference."""
        return _register(alternatives, name, alt_id, None)

    def bug_variant(name: str, bug_id: str, description: str, fn: Callable, /, **changes):
        """Register ``variant(fn, **changes)`` as a buggy version of ``name``."""
        return bug(name, bug_id, description)(variant(fn, **changes))

    def bug_variants(name: str, fn: Callable, /, **shared) -> Callable:
        """``register(bug_id, description, **changes)``, which registers
        ``variant(fn, **shared, **changes)`` as a buggy version of ``name``: one line a bug
        where several vary the same implementation (``shared``: ``like=`` its reference)."""

        def register(bug_id: str, description: str, /, **changes) -> Callable:
            return bug_variant(name, bug_id, description, fn, **shared, **changes)

        return register

    def input_bug(name: str, bug_id: str, description: str) -> Callable[[Callable], Callable]:
        """Register a version of ``name`` whose only mistake is in refusing invalid input: it
        must lose the points of ``<name>_input_tests`` and keep those of ``<name>_tests``."""
        register = bug(name, bug_id, description)

        def mark(fn: Callable) -> Callable:
            fn.input_bug = True
            return register(fn)

        return mark

    bug.input = input_bug
    bug.variant = bug_variant
    bug.variants = bug_variants
    bug.derived = derived
    return bugs, alternatives, bug, correct


class derived:
    """An argument of a :func:`variant` computed from the call's arguments: ``f(args)``, where
    ``args.name`` is the value the caller gave ``name`` (or its default)."""

    def __init__(self, f: Callable[[SimpleNamespace], object]):
        self.f = f


def variant(
    fn: Callable,
    /,
    *,
    like: Callable | None = None,
    returns: Callable[[object, SimpleNamespace], object] | None = None,
    **changes,
) -> Callable:
    """A function with the signature of ``like`` (by default ``fn``'s own) that calls ``fn``
    with the caller's arguments, some of them changed, and returns what it returns.

    Each keyword of ``changes`` names an argument: ``name=value`` passes ``value`` whatever
    the caller gave; ``name=derived(f)`` passes ``f(args)``, computed from the call's
    arguments (``args.name``, defaults filled in). A name that is not a parameter of the
    signature is passed to ``fn`` as a keyword of its own (a knob of a private implementation
    that takes the reference's parameters, in the same order, and more). ``returns=f`` returns
    ``f(result, args)`` instead of ``fn``'s result. ``inspect.signature`` of the variant is
    that of ``like``, so the signature checks and the learner-facing messages see the part's
    own signature."""
    signature = inspect.signature(like or fn)

    def varied(*call_args, **call_kwargs):
        bound = signature.bind(*call_args, **call_kwargs)
        bound.apply_defaults()
        args = SimpleNamespace(**bound.arguments)
        extra = {}
        for name, change in changes.items():
            value = change.f(args) if isinstance(change, derived) else change
            (bound.arguments if name in signature.parameters else extra)[name] = value
        result = fn(*bound.args, **bound.kwargs, **extra)
        return result if returns is None else returns(result, args)

    varied.__signature__ = signature
    return varied


def checked_ids(ids, vocab_size: int) -> np.ndarray:
    """``ids`` as an int64 array, with ValueError for an id outside ``0 .. vocab_size - 1``."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError("token id outside the vocabulary")
    return ids
