"""The data every chapter-11 comparison is scored on: the Shakespeare corpus split as
``mini-llm prepare`` splits it, and fixed held-out windows of its validation text."""

from __future__ import annotations

import tempfile

import numpy as np
import torch

from mini_llm.corpus import load_text
from mini_llm.engine.data import load_split, load_tokenizer_of, prepare

WINDOWS, WINDOW = (
    256,
    65,
)  # each window: a model reads all but the last, is scored on all but the first


def shakespeare_splits():
    """``(tokenizer, train_ids, val_ids)``: the character-level corpus, 90 % / 10 %."""
    with tempfile.TemporaryDirectory() as folder:
        prepare(load_text("shakespeare"), folder, corpus="shakespeare")
        tokenizer = load_tokenizer_of(folder)
        return tokenizer, np.array(load_split(folder, "train")), np.array(load_split(folder, "val"))


def held_out_windows(val_ids, windows: int = WINDOWS, window: int = WINDOW) -> torch.Tensor:
    """``windows`` windows of ``window`` ids (int64) from evenly spaced places of ``val_ids``.

    Every model of chapters 11 and 12 is scored on these, so their bits per character compare."""
    starts = np.linspace(0, len(val_ids) - window, windows).astype(int)
    return torch.from_numpy(np.stack([val_ids[s : s + window] for s in starts]).astype(np.int64))


@torch.no_grad()
def bits_per_character(model, windows: torch.Tensor, batch: int = 64) -> float:
    """Mean cross-entropy in bits of ``model``'s predictions of characters 2.. of each window
    from the ones before (any model returning ``(logits, loss)``), in eval mode."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, len(windows), batch):
        part = windows[start : start + batch]
        logits = model(part[:, :-1])[0].float()
        total += torch.nn.functional.cross_entropy(
            logits.flatten(0, 1), part[:, 1:].flatten(), reduction="sum"
        ).item()
        count += part[:, 1:].numel()
    model.train(was_training)
    return float(total / count / np.log(2))
