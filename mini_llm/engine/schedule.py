"""The training loop's learning rate at each step: warm-up then cosine (chapter 12), or noam.

:func:`learning_rate_at` reads the schedule from a :class:`~mini_llm.engine.train.TrainConfig`;
:func:`warmup_cosine_learning_rate` is the same cosine from plain numbers, chapter 12's graded
part. The loop looks up ``schedule.learning_rate_at`` when it calls it, and this module looks up
``transformer.noam_learning_rate``, so that ``mini-llm train --learner`` can swap in the
learner's (:mod:`mini_llm.learner.registry`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from mini_llm import transformer

if TYPE_CHECKING:
    from mini_llm.engine.train import TrainConfig


def learning_rate_at(step: int, config: TrainConfig) -> float:
    """Linear warm-up from ~0 to ``learning_rate``, then cosine decay down to ``min_lr``.

    With ``schedule="noam"``: chapter 9's :func:`mini_llm.transformer.noam_learning_rate` (steps
    counted from 1), rescaled so that its peak, at step ``warmup_iters``, is ``learning_rate``.
    """
    if config.schedule == "noam":
        warmup = config.warmup_iters
        return (
            config.learning_rate * transformer.noam_learning_rate(step + 1, 1, warmup) * warmup**0.5
        )
    return warmup_cosine_learning_rate(
        step,
        config.learning_rate,
        config.min_lr,
        config.warmup_iters,
        config.lr_decay_iters or config.max_iters,
    )


def warmup_cosine_learning_rate(
    step: int, max_lr: float, min_lr: float, warmup_iters: int, decay_iters: int
) -> float:
    """The rate at optimizer step ``step`` (counted from 0), from plain numbers.

    Linear warm-up: step 0 already gets ``max_lr / warmup_iters`` (a rate of 0 would waste a
    step), and step ``warmup_iters - 1`` gets ``max_lr``. Then a half cosine from ``max_lr``
    down to ``min_lr``, reached at step ``decay_iters`` and kept after it.
    """
    if step < 0 or warmup_iters < 0:
        raise ValueError(f"step and warmup_iters must not be negative, got {step}, {warmup_iters}")
    if step < warmup_iters:
        return max_lr * (step + 1) / warmup_iters
    if step >= decay_iters:
        return min_lr
    progress = (step - warmup_iters) / max(1, decay_iters - warmup_iters)
    cosine = 0.5 * (1 + math.cos(math.pi * progress))  # 1 → 0
    return min_lr + cosine * (max_lr - min_lr)
