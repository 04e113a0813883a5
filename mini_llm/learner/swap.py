"""Run the reference package with the learner's parts swapped in where they exist.

:func:`use` imports an exported package **in this process** -- it is the learner's own code,
for the learner's own use -- and replaces, for every part that is present, the reference symbol
the registry names (and the places listed under ``also``, through their adapters). That is the
package's one seam for the learner: it looks these names up through their modules when it calls
them -- a function when it runs, a layer's class (``torch.nn.LayerNorm``, ``gpt.MLP``) when a
model is built -- so the GPT built, the sampler and the training loop then run the learner's
code. Missing parts and parts whose cell is broken keep
the reference. Instructors never run students' exports this way: ``mini-llm learner check
--sandbox`` runs them in the grader's sandbox (:mod:`mini_llm.learner.probe`).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
import traceback
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from mini_llm.learner import adapters
from mini_llm.learner.export import LearnerError, read_manifest
from mini_llm.learner.registry import PARTS, Part

ENVIRONMENT_VARIABLE = "MINI_LLM_LEARNER"
"""A folder written by ``mini-llm learner export``: the default of ``--learner`` and of
:func:`use` without a folder."""


def load_modules(folder: Path, manifest: dict) -> dict[str, ModuleType]:
    """The chapter modules of an exported package, imported under ``mini_llm_learner.*``; an
    error in a cell is a :class:`LearnerError` that names the cell."""
    modules = {}
    for name in manifest["files"]:
        if name == "__init__.py":
            continue
        path = folder / name
        module_name = f"mini_llm_learner.{Path(name).stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as err:  # noqa: BLE001 - the learner's code may raise anything
            sys.modules.pop(module_name, None)
            raise LearnerError(f"{path} fails to import: {_where(err, path)}") from None
        modules[Path(name).stem] = module
    return modules


def _where(err: BaseException, path: Path) -> str:
    """``cell N (grade_id), line L: Error: message``, from the markers export writes."""
    lines = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == str(path)]
    message = f"{type(err).__name__}: {err}"
    if not lines:
        return message
    line = lines[-1].lineno
    source = path.read_text(encoding="utf-8").splitlines()
    for number in range(line - 1, -1, -1):
        if source[number].startswith("# --- cell "):
            cell = source[number].removeprefix("# --- ")
            return f"{cell}, line {line - number - 1} of the cell: {message}"
    return f"line {line}: {message}"


@dataclass
class Swapped:
    """What :func:`use` changed: which parts are the learner's, and how to undo it."""

    folder: Path
    parts: dict[str, str] = field(default_factory=dict)  # label -> "yours" or why not
    calls: dict[str, int] = field(default_factory=dict)  # label -> calls (or builds) so far
    _undo: list[tuple[ModuleType, str, object]] = field(default_factory=list, repr=False)

    @property
    def learners(self) -> list[str]:
        return [label for label, whose in self.parts.items() if whose == "yours"]

    def summary(self) -> str:
        """One line per chapter: the parts that are yours, and those that are the reference's."""
        chapters: dict[str, dict[str, list[str]]] = {}
        for label, whose in self.parts.items():
            chapter, _, name = label.partition(".")
            key = "yours" if whose == "yours" else f"reference ({whose})"
            chapters.setdefault(chapter, {}).setdefault(key, []).append(name)
        width = max(map(len, chapters), default=0)
        yours = len(self.learners)
        lines = [
            f"mini_llm with your parts from {self.folder}: {yours} of {len(self.parts)} are yours"
        ]
        for chapter, groups in chapters.items():
            text = "; ".join(f"{key}: {', '.join(names)}" for key, names in groups.items())
            lines.append(f"  {chapter:<{width}}  {text}")
        return "\n".join(lines)

    def used(self) -> str:
        """Which of the learner's parts this process has called (a class: built) so far, and
        which it has not: a part that is yours but never runs teaches nothing about it."""
        called = [label for label in self.learners if self.calls.get(label)]
        idle = [label for label in self.learners if not self.calls.get(label)]
        lines = [f"your parts this run used: {', '.join(called) or 'none'}"]
        if idle:
            lines.append(f"yours but not used by this run: {', '.join(idle)}")
        return "\n".join(lines)

    def counted(self, label: str, replacement):
        """``replacement`` counting its calls into :attr:`calls`; a class is subclassed, so
        that what the package checks with ``isinstance`` still holds."""
        self.calls.setdefault(label, 0)
        calls = self.calls
        if inspect.isclass(replacement):

            def __init__(layer, *args, **kwargs):
                calls[label] += 1
                super(counting, layer).__init__(*args, **kwargs)

            counting = type(replacement.__name__, (replacement,), {"__init__": __init__})
            counting.__qualname__ = replacement.__qualname__
            counting.__module__ = replacement.__module__
            return counting

        @functools.wraps(replacement)
        def counting_call(*args, **kwargs):
            calls[label] += 1
            return replacement(*args, **kwargs)

        return counting_call

    def restore(self) -> None:
        for module, name, original in reversed(self._undo):
            setattr(module, name, original)
        self._undo.clear()


_active: Swapped | None = None
"""the parts swapped in by the last :func:`use`"""


def _targets(part: Part, function) -> list[tuple[ModuleType, str, object]]:
    """(module, name, replacement) for every place the part replaces that exists."""
    places = []
    reference = adapters.resolve(part.reference)
    if reference is not None:
        places.append((part.reference, function))
    for spec in part.also:
        where, name, adapter = spec.rsplit(":", 2)
        original = adapters.resolve(f"{where}:{name}")
        if original is not None:
            places.append((f"{where}:{name}", adapters.by_name(adapter)(function, original)))
    found = []
    for path, replacement in places:
        module_name, _, name = path.partition(":")
        found.append((sys.modules[module_name], name, replacement))
    return found


def use(folder: str | Path | None = None, verbose: bool = True) -> Swapped:
    """Swap the learner's parts from ``folder`` (default: ``$MINI_LLM_LEARNER``) into the package
    for the rest of this process (or until ``restore()``); prints which parts are whose."""
    if folder is None:
        folder = os.environ.get(ENVIRONMENT_VARIABLE)
        if not folder:
            raise LearnerError(
                f"no folder given and {ENVIRONMENT_VARIABLE} is not set; pass the folder "
                "written by mini-llm learner export"
            )
    folder = Path(folder)
    manifest = read_manifest(folder)
    modules = load_modules(folder, manifest)
    global _active
    if _active is not None:  # use() again (a notebook cell run twice): start from the reference
        _active.restore()
    status = {(p["assignment"], p["name"]): p for p in manifest["parts"]}
    swapped = Swapped(folder)
    for part in PARTS:
        exported = status.get((part.assignment, part.name), {"status": "missing"})
        function = getattr(modules.get(part.assignment), part.name, None)
        if exported["status"] != "present" or function is None:
            swapped.parts[part.label] = exported["status"]
            continue
        targets = _targets(part, swapped.counted(part.label, function))
        if not targets:
            swapped.parts[part.label] = "not in this version of mini_llm"
            continue
        for module, name, replacement in targets:
            swapped._undo.append((module, name, getattr(module, name)))
            setattr(module, name, replacement)
        swapped.parts[part.label] = "yours"
    _active = swapped
    if verbose:
        print(swapped.summary())
    return swapped


@contextmanager
def using(folder: str | Path | None = None, verbose: bool = True):
    """:func:`use` for the length of a ``with`` block."""
    swapped = use(folder, verbose)
    try:
        yield swapped
    finally:
        swapped.restore()
