"""The graded notebook a learner gets back: what failed and why, never the hidden tests.

nbgrader's stock feedback renders the autograded notebook, hidden tests included, with the
outputs the submission's own kernel produced (which a submission can forge, or use to print
the tests it sees running). Here the notebook handed to ``nbgrader generate_feedback`` is built
by the grader instead: the instructor's cells, the learner's answers, each hidden block of a
test cell replaced by one comment, and outputs that come only from the trusted replay -- the
learner's own printing from the sandbox (which never saw a test), what the instructor's set-up
code printed in the grader (calling the learner's functions in the sandbox) and, for each
test, either nothing (passed) or the teaching message, redacted for hidden checks
(:func:`.verify.redact`).
Whatever text came from the submission and is rendered as Markdown (written answers, problem
lines naming its cells) has every punctuation character escaped, so its tags, links and
images show as text and never run.
"""

from __future__ import annotations

import copy
import re

import nbformat
from nbformat.v4 import new_output

from mini_llm.grading.notebook import Assignment
from mini_llm.grading.verify import CellResult, Verification

HIDDEN_PLACEHOLDER = "# (hidden tests: their code is not shown)\n"


def graded_notebook(
    source: nbformat.NotebookNode,
    assignment: Assignment,
    answers: dict[str, list[str]],
    verification: Verification,
    problems: list[str],
) -> nbformat.NotebookNode:
    """The autograded notebook of one student, safe to show to that student."""
    nb = copy.deepcopy(source)
    results = {r.grade_id: r for r in verification.cells}
    cells, executed = [], 0
    for cell, spec in zip(nb.cells, assignment.cells):
        if spec.kind == "free":
            continue
        if cell.cell_type == "code":  # numbered in the order the replay ran them
            executed += 1
            cell.outputs, cell.execution_count = [], executed
        if spec.kind in ("answer", "manual"):
            cell.source = "\n\n".join(answers.get(spec.grade_id, [])) or "# (no answer)"
            if cell.cell_type == "markdown":  # rendered as HTML: the learner's markup stays text
                cell.source = as_text(cell.source)
        elif spec.kind == "test":
            cell.source = "".join(
                code if not hidden else HIDDEN_PLACEHOLDER for hidden, code in spec.chunks()
            )
        result = results.get(spec.grade_id)
        if result is not None and cell.cell_type == "code":
            cell.outputs = _outputs(result)
        cells.append(cell)
    if problems:
        note = "**Found while grading this submission:**\n\n" + "\n".join(
            f"- {as_text(p)}" for p in problems
        )
        cells.insert(0, nbformat.v4.new_markdown_cell(note))
    nb.cells = cells
    nb.metadata.pop("widgets", None)
    return nb


def as_text(markdown: str) -> str:
    """``markdown`` escaped so that it renders as the very characters it holds: every ASCII
    punctuation character gets Markdown's backslash escape (no HTML, link, image or emphasis)."""
    return re.sub(r"([!-/:-@\[-`{-~])", r"\\\1", markdown)


def _outputs(result: CellResult) -> list:
    outputs = []
    if result.output:
        outputs.append(new_output("stream", name="stdout", text=result.output))
    if result.learner_message:
        title = "Check failed" if result.kind == "test" else "Error"
        outputs.append(
            new_output(
                "error",
                ename=title,
                evalue=result.learner_message,
                traceback=[f"{title}: {result.learner_message}"],
            )
        )
    return outputs
