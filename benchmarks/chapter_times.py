"""Execute book chapters the way the book build does, one fresh kernel each, and time them.

    .venv/bin/python benchmarks/chapter_times.py book/ch02_ngrams.md book/ch03_neural_lm.md

Each chapter runs from its MyST source (read by myst-nb, executed by nbclient) with no jupyter-cache,
so the time is what a cold `jupyter-book build` spends on it. Budget: 90 s per chapter on 2 cores.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient

BUDGET_S = 90


def execute_seconds(chapter: Path) -> float:
    notebook = read_myst_markdown_notebook(chapter.read_text(encoding="utf-8"), path=chapter)
    client = NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(chapter.parent)}},
    )
    start = time.perf_counter()
    client.execute()
    return time.perf_counter() - start


def main(paths: list[str]) -> int:
    if not paths:
        print(__doc__)
        return 2
    over = 0
    for path in map(Path, paths):
        seconds = execute_seconds(path)
        over += seconds > BUDGET_S
        print(f"{path}: {seconds:.1f} s (budget {BUDGET_S} s)", flush=True)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
