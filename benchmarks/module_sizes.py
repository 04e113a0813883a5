"""Lines per module of ``mini_llm`` and the longest function in each, for a layout review.

    .venv/bin/python benchmarks/module_sizes.py            # this checkout's mini_llm/
    .venv/bin/python benchmarks/module_sizes.py OTHER/mini_llm

Counts every line of each file (docstrings and comments included: a reader scrolls past them
too) and, with ``ast``, the longest ``def`` (methods and nested functions included), from its
``def`` line to its last line.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def longest_function(source: str) -> tuple[str, int]:
    """(name, lines) of the longest function or method in ``source``; ("-", 0) if none."""
    best = ("-", 0)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = node.end_lineno - node.lineno + 1
            if length > best[1]:
                best = (node.name, length)
    return best


def main(package: Path) -> None:
    rows = []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        name, length = longest_function(source)
        rows.append((str(path.relative_to(package.parent)), len(source.splitlines()), name, length))
    width = max(len(row[0]) for row in rows)
    print(f"{'module':<{width}}  lines  longest function")
    for module, lines, name, length in rows:
        print(f"{module:<{width}}  {lines:>5}  {name} ({length})")
    print(f"{len(rows)} files, {sum(row[1] for row in rows)} lines")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[1] / "mini_llm")
