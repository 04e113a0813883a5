"""Which top-level definitions of a package a page's code reaches, found with ``ast``.

A page that calls ``train()`` depends on ``train`` and on what ``train`` uses -- not on every
line of every module Python loads on the way. The training loop uses chapter 9's noam schedule,
so it imports the Transformer's module; a page of chapter 3 must execute again when that
schedule changes, not when the Transformer's encoder does. So the unit of a fingerprint is one
top-level statement of a module (a function, a class, an assignment), reached by name:

* ``from pkg.m import f`` reaches ``f`` of ``m``; ``import pkg.m as m`` or ``from pkg import m``
  reaches the attributes used on it (``m.f``), or all of ``m`` where ``m`` itself is passed on;
* a statement reaches the module's definitions whose names it uses, and through the module's
  imports the definitions of other modules, transitively (imports inside functions included);
* statements that bind no name (``install()``, a module's setup code) run whenever the module
  is imported, so every module that importing the page's modules loads brings its own.

A name that cannot be resolved this way (a star import, an attribute set at run time) reaches
its whole module, so the analysis errs towards executing a page again.
"""

from __future__ import annotations

import ast
import hashlib
from dataclasses import dataclass, field
from pathlib import Path


def _is_docstring(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)


def bound_names(statement: ast.stmt) -> set[str]:
    """The module-level names a top-level statement defines (imports excepted)."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    targets = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    return {
        node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)
    }


@dataclass
class Module:
    """One module's top-level statements, the names they bind, and what its imports bind."""

    name: str
    path: Path
    is_package: bool
    statements: list[ast.stmt] = field(default_factory=list)
    binders: dict[str, list[int]] = field(default_factory=dict)  # name -> statements
    anonymous: list[int] = field(default_factory=list)  # statements that bind no name

    @classmethod
    def parse(cls, name: str, path: Path) -> Module:
        module = cls(name, path, path.name == "__init__.py")
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for index, statement in enumerate(body):
            module.statements.append(statement)
            names = bound_names(statement)
            for bound in names:
                module.binders.setdefault(bound, []).append(index)
            imports = isinstance(statement, (ast.Import, ast.ImportFrom))
            if not names and not imports and not _is_docstring(statement):
                module.anonymous.append(index)
        return module

    def key(self, index: int) -> str:
        """A name for statement ``index`` that survives edits elsewhere in the file."""
        names = sorted(bound_names(self.statements[index]))
        if names:
            same = self.binders[names[0]]  # a name bound twice: each statement counts
            return ",".join(names) + (f" ({same.index(index) + 1})" if len(same) > 1 else "")
        return f"<module code {self.anonymous.index(index) + 1}>"

    def digest(self, index: int) -> str:
        """SHA-256 of the statement as ``ast.unparse`` writes it: comments and layout do not
        count, since they change no output."""
        return hashlib.sha256(ast.unparse(self.statements[index]).encode()).hexdigest()


def absolute(node: ast.ImportFrom, module: Module) -> str:
    """The module a ``from … import`` names, relative forms resolved against ``module``."""
    if not node.level:
        return node.module or ""
    anchor = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join(anchor + ([node.module] if node.module else []))


def loaded_names(tree: ast.AST) -> set[str]:
    """The names ``tree`` reads (not those it only assigns, such as a dataclass's fields)."""
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store)
    }


def attribute_uses(tree: ast.AST, alias: str) -> set[str] | None:
    """The attributes read on the name ``alias`` in ``tree`` (``alias.f`` -> "f"), or None
    where the name is also used on its own (then anything of it may be used)."""
    attributes, parents = set(), {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == alias and not isinstance(node.ctx, ast.Store):
            parent = parents.get(node)
            if isinstance(parent, ast.Attribute) and parent.value is node:
                attributes.add(parent.attr)
            elif not isinstance(parent, (ast.Global, ast.Nonlocal)):
                return None
    return attributes


def import_bindings(tree: ast.AST, module: Module | None, is_module) -> dict[str, tuple]:
    """Local name -> what the imports anywhere in ``tree`` bind it to: ``("module", m)`` for a
    module (``import pkg.m as m``, ``from pkg import m``), ``("name", m, f)`` for a name of a
    module (``from pkg.m import f``), ``("whole", m)`` where only all of ``m`` will do (``import
    pkg.m``, used as ``pkg.m.f``; a star import). ``module`` resolves relative imports;
    ``is_module(name)`` says whether a dotted name is a module of the packages followed."""
    bindings: dict[str, tuple] = {}
    stars = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bindings[alias.asname] = ("module", alias.name)
                else:
                    bindings[f"<import {alias.name}>"] = ("whole", alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = (node.module or "") if module is None else absolute(node, module)
            for alias in node.names:
                if alias.name == "*":
                    stars += 1
                    bindings[f"<star {stars}>"] = ("whole", base)
                elif is_module(f"{base}.{alias.name}"):
                    bindings[alias.asname or alias.name] = ("module", f"{base}.{alias.name}")
                else:
                    bindings[alias.asname or alias.name] = ("name", base, alias.name)
    return bindings


def reached_through(tree: ast.AST, bindings: dict[str, tuple]) -> list[tuple[str, str | None]]:
    """(module, name or None for all of it) that ``tree`` reaches through ``bindings``."""
    used = loaded_names(tree)
    reached: list[tuple[str, str | None]] = []
    for local, binding in bindings.items():
        if binding[0] == "whole":
            reached.append((binding[1], None))
        elif local not in used:
            continue
        elif binding[0] == "name":
            reached.append((binding[1], binding[2]))
        else:
            attributes = attribute_uses(tree, local)
            if attributes is None:
                reached.append((binding[1], None))
            else:
                reached.extend((binding[1], attribute) for attribute in sorted(attributes))
    return reached
