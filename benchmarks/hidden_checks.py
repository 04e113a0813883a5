"""What the hidden tests check: per assignment and part, the hand-written checks and the
generated inputs compared with the reference, and how long the part's test cells take.

Each part's test cells (visible and hidden, its input checks' too) run in this process on the
reference answer (the package's, as `mini_llm.learner.registry` names it), with the checks of
`mini_llm.checks` and `mini_llm.differential` counted as they are called:

* ``checks``: calls of ``expect_*`` from `mini_llm.checks` (hand-written cases);
* ``compared``: generated cases compared with the reference by ``expect_like_reference``
  (value, shape, dtype, type, arguments unchanged, exception class);
* ``gradients``: generated cases whose gradients ``expect_same_gradients`` compares;
* ``refused``: of the compared cases, those the reference refuses (invalid input);
* ``seconds``: wall time of the part's test cells in-process (the grader adds a round trip to
  the sandbox for every call of the answer).

    .venv/bin/python benchmarks/hidden_checks.py [ch01_bigrams ...]
"""

from __future__ import annotations

import argparse
import importlib
import time
import warnings
from pathlib import Path
from typing import Self

import nbformat
import numpy as np

from mini_llm import checks, differential
from mini_llm.learner.registry import TEST_CELLS, assignments, parts_of

REPO = Path(__file__).resolve().parents[1]
MARKERS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


class Counter:
    """Wraps the check functions of both modules and counts what they are given."""

    def __init__(self) -> None:
        self.checks = self.compared = self.gradients = self.refused = 0
        self.saved: list[tuple[object, str, object]] = []

    def _wrap(self, module, name: str, count) -> None:
        original = getattr(module, name)

        def counted(*args, **kwargs):
            if "cases" in kwargs:  # a generator of cases is read once, here
                kwargs["cases"] = list(kwargs["cases"])
            elif len(args) >= 3 and module is differential:
                args = (*args[:2], list(args[2]), *args[3:])
            count(args, kwargs)
            return original(*args, **kwargs)

        self.saved.append((module, name, original))
        setattr(module, name, counted)

    def __enter__(self) -> Self:
        for name in checks.__all__:
            if name.startswith("expect_"):
                self._wrap(checks, name, self._one)
        self._wrap(differential, "expect_like_reference", self._compared)
        self._wrap(differential, "expect_same_gradients", self._gradients)
        return self

    def __exit__(self, *exc) -> None:
        for module, name, original in reversed(self.saved):
            setattr(module, name, original)

    def _one(self, args, kwargs) -> None:
        self.checks += 1

    @staticmethod
    def _cases(args, kwargs) -> list:
        return kwargs["cases"] if "cases" in kwargs else args[2]

    def _compared(self, args, kwargs) -> None:
        reference = kwargs.get("reference", args[1] if len(args) > 1 else None)
        cases = self._cases(args, kwargs)
        self.compared += len(cases)
        for case in cases:
            try:
                with warnings.catch_warnings(), np.errstate(all="ignore"):
                    warnings.simplefilter("ignore")
                    reference(*case.args, **case.kwargs)
            except Exception:  # noqa: BLE001 - counted as refused input
                self.refused += 1

    def _gradients(self, args, kwargs) -> None:
        self.gradients += len(self._cases(args, kwargs))


def _code(cell) -> str:
    return "\n".join(line for line in cell.source.splitlines() if line.strip() not in MARKERS)


def inventory(assignment: str) -> list[tuple]:
    path = REPO / "solutions" / assignment / f"{assignment}.ipynb"
    nb = nbformat.read(path, as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    rows = []
    for part in parts_of(assignment):
        module_name, _, attr = part.reference.partition(":")
        reference = getattr(importlib.import_module(module_name), attr)
        tests = [cells[f"{part.name}{s}"] for s in TEST_CELLS if f"{part.name}{s}" in cells]
        start = time.perf_counter()
        with Counter() as counter:
            for cell in tests:
                namespace = {"__name__": "__inventory__", part.name: reference}
                exec(compile(_code(cell), f"<{part.name}>", "exec"), namespace)  # noqa: S102
        seconds = time.perf_counter() - start
        counted = (counter.checks, counter.compared, counter.refused, counter.gradients)
        rows.append((part.name, len(tests), *counted, seconds))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="*", default=assignments())
    options = parser.parse_args()
    print(
        "| assignment | part | test cells | checks | compared | of them refused | gradients | s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    totals = [0, 0, 0, 0]
    for assignment in options.assignments:
        for name, cells, *counts, seconds in inventory(assignment):
            totals = [t + c for t, c in zip(totals, counts)]
            numbers = " | ".join(str(c) for c in counts)
            print(f"| {assignment} | `{name}` | {cells} | {numbers} | {seconds:.2f} |")
    print(f"| all | | | {' | '.join(map(str, totals))} | |")


if __name__ == "__main__":
    main()
