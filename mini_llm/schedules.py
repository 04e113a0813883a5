"""Learning-rate schedules that more than one part of the package uses.

Chapter 9 teaches the Transformer paper's schedule (:func:`noam_learning_rate`) beside the
Transformer, and the training loop offers it as ``TrainConfig(schedule="noam")``. It lives here,
importing nothing, so that the training loop does not load the Transformer's module: a chapter
that only trains (chapters 3-7) is then not re-executed when the Transformer changes.
``mini_llm.transformer`` re-exports it under its chapter.
"""

from __future__ import annotations


def noam_learning_rate(step: int, d_model: int, warmup: int) -> float:
    """The paper's schedule: d_model^-0.5 · min(step^-0.5, step · warmup^-1.5).

    ``step`` counts updates from 1. The rate grows linearly for ``warmup`` steps, peaks at
    step = warmup (where both terms are equal) and then decays as 1/√step.
    """
    if step < 1 or d_model < 1 or warmup < 1:
        raise ValueError(f"need step, d_model and warmup >= 1, got {step}, {d_model}, {warmup}")
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
