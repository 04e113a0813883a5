"""Re-execute a chapter when a ``mini_llm`` module it imports changes, and only then.

jupyter-cache reuses a page's outputs as long as the page's own code cells are unchanged, and
Sphinx re-reads only edited pages; both would keep showing what an older ``mini_llm`` computed.
So this extension finds, with ``ast`` and without running anything, the package modules each
page imports: the imports of its code cells, then, transitively, the imports of those modules
(absolute, ``from mini_llm import submodule`` and relative forms, imports inside functions
too, and the packages' ``__init__.py`` that Python runs on the way). It hashes those files.
When a page's hash differs from the one recorded at its last successful build, the page's
cache entry is dropped and the page is read again, so it executes again. Editing the grader
re-executes no chapter; editing ``gpt.py`` re-executes the chapters that reach it. Files
outside the package that a page reads (chapter 11 exports notebooks of ``solutions/``) are
named by the chapter's ``inputs`` in book/chapters.yml and hashed the same way. It also warns
when a chapter executes for longer than its budget in book/chapters.yml.

Not seen: imports made from strings (``importlib.import_module(name)``) or by ``exec``.
"""

from __future__ import annotations

import ast
import hashlib
import json
from pathlib import Path

from definitions import Module, import_bindings, loaded_names, reached_through

PACKAGE = "mini_llm"
BOOK_PACKAGE = "booklib"  # book/booklib: code that only the pages use
RECORD_FILE = "chapter_dependencies.json"
"""docname -> {file of mini_llm: sha256} at the page's last successful build (in the cache dir)"""


def code_cells(page: Path) -> list[str]:
    """The Python source of a MyST notebook page's code cells (IPython magics translated)."""
    text = page.read_text(encoding="utf-8")
    if "{code-cell}" not in text:
        return []
    from IPython.core.inputtransformer2 import TransformerManager
    from myst_nb.core.read import read_myst_markdown_notebook

    notebook = read_myst_markdown_notebook(text)
    to_python = TransformerManager().transform_cell
    return [to_python(c.source) for c in notebook.cells if c.cell_type == "code"]


def imported_names(source: str, module: str = "", is_package: bool = False) -> set[str]:
    """Dotted names that ``source`` imports, anywhere in it; relative imports resolved against
    ``module`` (a package's own name when ``is_package``). For ``from X import y`` both ``X``
    and ``X.y`` are returned, since ``y`` may be a submodule."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


class ModuleGraph:
    """The modules of the package directories a book's pages import (``mini_llm``, the book's
    own ``booklib``), the imports between them and the definitions each page reaches."""

    def __init__(self, *package_dirs: Path) -> None:
        self.root = Path(package_dirs[0]).parent
        self.files: dict[str, Path] = {}
        for package_dir in map(Path, package_dirs):
            for path in sorted(package_dir.rglob("*.py")):
                parts = path.relative_to(package_dir.parent).with_suffix("").parts
                name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
                self.files[name] = path
        self._imports: dict[str, set[str]] = {}
        self._modules: dict[str, tuple[Module, dict]] = {}

    def known(self, names: set[str]) -> set[str]:
        """The package modules that importing ``names`` runs: each name's nearest module that
        is a file here, and every package above it (Python runs their ``__init__.py``)."""
        modules = set()
        for name in names:
            parts = name.split(".")
            for end in range(1, len(parts) + 1):
                prefix = ".".join(parts[:end])
                if prefix in self.files:
                    modules.add(prefix)
        return modules

    def imports(self, module: str) -> set[str]:
        """The package modules ``module``'s own source imports."""
        if module not in self._imports:
            path = self.files[module]
            names = imported_names(
                path.read_text(encoding="utf-8"), module, path.name == "__init__.py"
            )
            self._imports[module] = self.known(names)
        return self._imports[module]

    def closure(self, names: set[str]) -> set[str]:
        """Every package module that importing ``names`` loads, directly or transitively."""
        todo, seen = list(self.known(names)), set()
        while todo:
            module = todo.pop()
            if module not in seen:
                seen.add(module)
                todo.extend(self.imports(module) - seen)
        return seen

    def page_dependencies(self, page: Path) -> set[str]:
        """The package modules a page's code cells load."""
        names: set[str] = set()
        for cell in _parsed_cells(page):
            names |= imported_names(ast.unparse(cell))
        return self.closure(names)

    def _module(self, name: str) -> tuple[Module, dict]:
        """The parsed module and what its top-level imports bind."""
        if name not in self._modules:
            module = Module.parse(name, self.files[name])
            imports = [s for s in module.statements if isinstance(s, (ast.Import, ast.ImportFrom))]
            bindings = import_bindings(ast.Module(imports, []), module, self.files.__contains__)
            self._modules[name] = module, bindings
        return self._modules[name]

    def _resolve(self, module: str, name: str | None) -> tuple[list, list]:
        """What ``name`` of ``module`` (None: all of it) stands for: (names to follow further,
        (module, statement index) units). A name the module imports is followed to where it
        is defined; a name the analysis cannot place means the whole module, to be safe."""
        if name is not None and f"{module}.{name}" in self.files:
            return [(f"{module}.{name}", None)], []
        parsed, bindings = self._module(module)
        if name is not None and name in parsed.binders:
            return [], [(module, index) for index in parsed.binders[name]]
        if name is not None and name in bindings:
            return [_imported(bindings[name])], []
        everything = set(parsed.anonymous).union(*parsed.binders.values())
        reexported = [_imported(b) for b in bindings.values() if b[0] == "name"]
        return reexported, [(module, index) for index in sorted(everything)]

    def _reached_by(self, module: str, index: int) -> list[tuple[str, str | None]]:
        parsed, bindings = self._module(module)
        statement = parsed.statements[index]
        local = import_bindings(statement, parsed, self.files.__contains__)
        used = loaded_names(statement)
        own = [(module, name) for name in sorted(used) if name in parsed.binders]
        return own + reached_through(statement, {**bindings, **local})

    def used_definitions(self, page: Path) -> set[tuple[str, int]]:
        """(module, top-level statement index) of every definition the page's code reaches,
        and the setup code of every package module it loads (see :mod:`definitions`)."""
        cells = ast.Module(_parsed_cells(page), [])
        names = reached_through(cells, import_bindings(cells, None, self.files.__contains__))
        units = [
            (module, index)
            for module in self.page_dependencies(page)
            for index in self._module(module)[0].anonymous
        ]
        seen: set[tuple[str, int]] = set()
        followed: set[tuple[str, str | None]] = set()
        while names or units:
            if names:
                module, name = names.pop()
                if module in self.files and (module, name) not in followed:  # not torch, ...
                    followed.add((module, name))
                    more, found = self._resolve(module, name)
                    names.extend(more)
                    units.extend(found)
                continue
            unit = units.pop()
            if unit not in seen:
                seen.add(unit)
                names.extend(self._reached_by(*unit))
        return seen

    def page_fingerprint(self, page: Path) -> dict[str, str]:
        """``path::definition`` -> digest of each definition the page reaches."""
        fingerprint = {}
        for module, index in sorted(self.used_definitions(page)):
            parsed, _ = self._module(module)
            path = self.files[module].relative_to(self.root)
            fingerprint[f"{path}::{parsed.key(index)}"] = parsed.digest(index)
        return fingerprint


def _imported(binding: tuple) -> tuple[str, str | None]:
    """(module, name or None for all of it) that an import binding of a module stands for."""
    return (binding[1], binding[2]) if binding[0] == "name" else (binding[1], None)


def _parsed_cells(page: Path) -> list[ast.stmt]:
    """The statements of a page's code cells; a cell with a syntax error is left out (it fails
    when it runs, and the build with it)."""
    statements = []
    for cell in code_cells(page):
        try:
            statements.extend(ast.parse(cell).body)
        except SyntaxError:
            continue
    return statements


def input_fingerprint(repo: Path, patterns: list[str]) -> dict[str, str]:
    """Path (relative to ``repo``) -> SHA-256 of each file that the glob ``patterns`` match."""
    files = sorted({path for pattern in patterns for path in repo.glob(pattern) if path.is_file()})
    return {
        str(path.relative_to(repo)): hashlib.sha256(path.read_bytes()).hexdigest() for path in files
    }


def manifest_entries(srcdir: Path) -> dict[str, dict]:
    """The chapters of book/chapters.yml by page name ({} for a book without the manifest)."""
    manifest = Path(srcdir) / "chapters.yml"
    if not manifest.exists():
        return {}
    import yaml

    return {c["page"]: c for c in yaml.safe_load(manifest.read_text(encoding="utf-8"))["chapters"]}


def _record_path(env) -> Path:
    return Path(env.mystnb_config.execution_cache_path) / RECORD_FILE


def _cached_record(cache_dir: Path, page: Path):
    """(cache, the executed notebook jupyter-cache would reuse for the page, or None). It
    matches by the code cells, whichever file they came from."""
    from jupyter_cache import get_cache
    from myst_nb.core.read import read_myst_markdown_notebook

    cache = get_cache(str(cache_dir))
    try:
        notebook = read_myst_markdown_notebook(page.read_text(encoding="utf-8"))
        return cache, cache.match_cache_notebook(notebook)
    except KeyError:  # nothing cached for this code
        return cache, None


def cached_execution_seconds(cache_dir: Path, page: Path) -> float | None:
    """How long the page's cached outputs took to compute, or None if none are cached."""
    _, record = _cached_record(cache_dir, page)
    return None if record is None else record.data.get("execution_seconds")


def _drop_cached_outputs(cache_dir: Path, page: Path) -> None:
    """Remove the page's executed notebook from jupyter-cache, so that reading it executes it."""
    if cache_dir.exists():
        cache, record = _cached_record(cache_dir, page)
        if record is not None:
            cache.remove_cache(record.pk)


def outdate_pages_whose_modules_changed(app, env, added, changed, removed) -> list[str]:
    """Sphinx ``env-get-outdated``: the pages whose imported package files changed."""
    from sphinx.util import logging

    logger = logging.getLogger(__name__)
    record_path = _record_path(env)
    recorded = json.loads(record_path.read_text()) if record_path.exists() else {}
    graph = ModuleGraph(Path(app.srcdir).parent / PACKAGE, Path(app.srcdir) / BOOK_PACKAGE)
    chapters = manifest_entries(Path(app.srcdir))
    app.chapter_dependencies = pending = {}
    outdated = []
    for docname in sorted(env.found_docs):
        page = Path(env.doc2path(docname))
        current = graph.page_fingerprint(page)
        inputs = chapters.get(docname, {}).get("inputs") or []
        current.update(input_fingerprint(Path(app.srcdir).parent, inputs))
        before = recorded.get(docname)
        if before == current or (before is None and not current):  # nothing to go stale
            continue
        pending[docname] = current
        if before is None:
            reason = "no record of the package code behind its outputs"
        else:
            edited = sorted(
                f for f in current.keys() | before.keys() if current.get(f) != before.get(f)
            )
            reason = "changed: " + ", ".join(edited)
        logger.info(f"[chapter_dependencies] {docname}: {reason}; executing it again")
        _drop_cached_outputs(record_path.parent, page)
        outdated.append(docname)
    return outdated


def record_successful_reads(app, env) -> list[str]:
    """Sphinx ``env-updated`` (every page was read without error): store the new hashes."""
    pending = getattr(app, "chapter_dependencies", {})
    if pending:
        path = _record_path(env)
        recorded = json.loads(path.read_text()) if path.exists() else {}
        recorded.update(pending)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(recorded, indent=1, sort_keys=True))
    return []


def warn_over_budget(app, doctree) -> None:
    """Sphinx ``doctree-read``: warn when a page's execution took longer than the budget
    (``budget_s``) that book/chapters.yml gives its chapter. A warning, not an error: the time
    depends on the machine and on what else it is running."""
    exec_data = getattr(app.env, "nb_metadata", {}).get(app.env.docname, {}).get("exec_data")
    if not exec_data or exec_data.get("runtime") is None:
        return
    from sphinx.util import logging

    chapter = manifest_entries(Path(app.srcdir)).get(app.env.docname)
    budget = None if chapter is None else float(chapter["budget_s"])
    if budget is not None and exec_data["runtime"] > budget:
        logging.getLogger(__name__).warning(
            f"{app.env.docname} took {exec_data['runtime']:.0f} s to execute, over its budget "
            f"of {budget:.0f} s (book/chapters.yml)"
        )


def setup(app) -> dict:
    app.connect("env-get-outdated", outdate_pages_whose_modules_changed)
    app.connect("env-updated", record_successful_reads)
    app.connect("doctree-read", warn_over_budget)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
