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
"""

from __future__ import annotations

from collections.abc import Callable

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

    return bugs, alternatives, bug, correct


def checked_ids(ids, vocab_size: int) -> np.ndarray:
    """``ids`` as an int64 array, with ValueError for an id outside ``0 .. vocab_size - 1``."""
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= vocab_size):
        raise ValueError("token id outside the vocabulary")
    return ids
