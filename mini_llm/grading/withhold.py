"""Keeping the installed reference of the parts being graded out of the answers' reach.

The package a learner has installed holds the reference of every part they write: an answer
that is ``from mini_llm.ngram import count_bigrams`` would otherwise earn full marks. In the
grader's sandbox (:mod:`.sandbox`), before the submission's first cell runs, every place in
the loaded ``mini_llm`` modules that holds the reference of a part of *this* assignment gets a
stand-in that raises :class:`ReferenceWithheld` when learner code calls it (or, for a class,
instantiates or subclasses it), with a message that says why. The package's own code still
calls it (chapter 11's GPT builds its reference blocks), and so do the instructor's set-up
cells; earlier chapters' parts stay available to answers.

The sandbox keeps the originals: while a part's tests run, the assignment's *other* parts in the
learner's namespace are the reference's (:meth:`Withheld.focus`), so a mistake in part 1 does
not cost the points of part 5, which calls it.

This is a fence, not a wall: code in the submission's own process can always dig out what that
process holds (reading the package's source files, say). The grader's report also flags, for a
person, an answer whose code is the reference's (:func:`reference_copies`).
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGE = str(Path(__file__).resolve().parent.parent) + "/"
"""the installed ``mini_llm`` folder: code in it may call the references"""

NOT_TRUSTED = tuple(PACKAGE + p for p in ("grading/", "checks.py", "differential.py"))
"""files of the package that call answers (the sandbox's server, test helpers): a reference
reached through them is reached by the answer"""


class ReferenceWithheld(RuntimeError):
    """An answer called the installed reference of a part of the assignment being graded."""


def _from_package(frame: Any) -> bool:
    filename = frame.f_code.co_filename if frame is not None else ""
    return filename.startswith(PACKAGE) and not filename.startswith(NOT_TRUSTED)


def _refusal(where: str, part: str) -> ReferenceWithheld:
    return ReferenceWithheld(
        f"{where} is the package's own version of `{part}`, a part of the notebook being "
        f"graded, so an answer may not use it: write `{part}` yourself (the functions of "
        "earlier chapters are yours to use)"
    )


def _stand_in(original: Any, where: str, part: str, active: Callable[[], bool]) -> Any:
    """``original`` as the package must go on seeing it, refused to learner code while
    ``active()``."""
    if inspect.isclass(original):

        def __init__(self, *args, **kwargs):
            if active() and not _from_package(sys._getframe(1)):
                raise _refusal(where, part)
            original.__init__(self, *args, **kwargs)

        def __init_subclass__(cls, **kwargs):
            if active() and not _from_package(sys._getframe(1)):
                raise _refusal(where, part)
            super(guarded, cls).__init_subclass__(**kwargs)

        guarded = type(
            original.__name__,
            (original,),
            {
                "__init__": __init__,
                "__init_subclass__": classmethod(__init_subclass__),
                "__module__": original.__module__,
                "__qualname__": original.__qualname__,
                "__doc__": original.__doc__,
            },
        )
        return guarded

    @functools.wraps(original)
    def guarded_call(*args, **kwargs):
        if active() and not _from_package(sys._getframe(1)):
            raise _refusal(where, part)
        return original(*args, **kwargs)

    guarded_call.__signature__ = inspect.signature(original)
    del guarded_call.__wrapped__  # the signature stays; the way around the fence does not
    return guarded_call


class Withheld:
    """The references of one assignment's parts, withheld from its answers."""

    def __init__(self, parts: dict[str, str], namespace: dict[str, Any]):
        """``parts``: part name -> ``"module:name"`` of its reference; ``namespace``: the
        learner's (the notebook shell's) globals."""
        self.active = False
        self.namespace = namespace
        self.originals: dict[str, Any] = {}
        self.own: dict[str, Any] = {}  # part -> what its own answer cell defined
        self.saved: dict[str, Any] = {}
        stand_ins: dict[int, Any] = {}
        for part, qualified in parts.items():
            module_name, _, attr = qualified.partition(":")
            original = getattr(importlib.import_module(module_name), attr)
            self.originals[part] = original
            stand_ins[id(original)] = _stand_in(
                original, f"{module_name}.{attr}", part, lambda: self.active
            )
        for name, module in list(sys.modules.items()):  # re-exports and `from ... import`s too
            if name == "mini_llm" or name.startswith("mini_llm."):
                for attr, value in list(vars(module).items()):
                    if id(value) in stand_ins:
                        setattr(module, attr, stand_ins[id(value)])

    def remember(self, part: str) -> None:
        """The learner's answer cell for ``part`` has run: what it defined is the answer that
        ``part``'s tests check, whatever a later cell rebinds the name to."""
        if part in self.originals:
            self.own[part] = self.namespace.get(part, _MISSING)

    def focus(self, part: str | None) -> None:
        """While ``part``'s tests run, ``part`` is what its own answer cell defined and the
        assignment's other parts in the learner's namespace are the references; ``None``
        gives the learner's namespace back as it was."""
        for name, value in self.saved.items():
            if value is _MISSING:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = value
        self.saved = {}
        if part is None:
            return
        for name, original in self.originals.items():
            mine = self.own.get(name, self.namespace.get(name, _MISSING))
            self.saved[name] = self.namespace.get(name, _MISSING)
            if name != part:
                self.namespace[name] = original
            elif mine is _MISSING:
                self.namespace.pop(name, None)
            else:
                self.namespace[name] = mine


_MISSING = object()


# ------------------------------------------------------------------------ copies, for a person
MIN_NODES = 40
"""definitions smaller than this many syntax-tree nodes are not compared: a three-line answer
may well be written exactly as the reference is"""


def _normalised(definition: ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef) -> str:
    """The definition's syntax tree with its docstrings and type annotations dropped and every
    variable and argument renamed by order of first appearance: a copy with other names is the
    same tree."""
    definition = ast.parse(ast.unparse(definition)).body[0]  # a copy
    names: dict[str, str] = {}
    for node in ast.walk(definition):
        body = getattr(node, "body", None)
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    for node in ast.walk(definition):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            node.returns = None
        elif isinstance(node, ast.arg):
            node.annotation = None
    for node in ast.walk(definition):
        if isinstance(node, ast.Name):
            node.id = names.setdefault(node.id, f"v{len(names)}")
        elif isinstance(node, ast.arg):
            node.arg = names.setdefault(node.arg, f"v{len(names)}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            node.name = "_"
    return ast.dump(definition, annotate_fields=False, include_attributes=False)


def _definitions(source: str, name: str) -> list:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node for node in tree.body if isinstance(node, kinds) and node.name == name]


def reference_copies(parts: dict[str, str], answers: dict[str, list[str]]) -> list[str]:
    """The parts whose answer defines them with the reference's own code (the same normalised
    syntax tree), for a person to look at; ``answers``: answer cell grade id -> sources."""
    copies = []
    for part, qualified in parts.items():
        module_name, _, attr = qualified.partition(":")
        try:
            original = getattr(importlib.import_module(module_name), attr)
            reference = _definitions(inspect.getsource(original).strip(), original.__name__)
        except (ImportError, AttributeError, OSError, TypeError):
            continue
        if not reference or sum(1 for _ in ast.walk(reference[0])) < MIN_NODES:
            continue
        wanted = _normalised(reference[0])
        given = [d for s in answers.get(f"{part}_impl", []) for d in _definitions(s, part)]
        if given and _normalised(given[-1]) == wanted:
            copies.append(part)
    return copies
