"""Checkpoints that survive a crash: written to a temporary file, then renamed into place.

``os.replace`` is atomic, so a checkpoint file is always either the previous complete one or the
new complete one, never half of each -- even if the process dies while writing. Against a power
cut or a kernel crash the bytes must also be on disk before the rename, and the rename itself
(an entry of the folder) after it: hence the two ``fsync`` calls.
"""

from __future__ import annotations

import os
import random
import zipfile
from pathlib import Path

import numpy as np
import torch

ZIP_SIGNATURE = b"PK\x03\x04"  # the first bytes of every file torch.save writes


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, damaged or not a mini_llm checkpoint."""


def save_checkpoint(state: dict, path: str | Path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        torch.save(state, file)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    """Make a rename inside ``folder`` durable (POSIX; Windows cannot open a folder this way)."""
    if os.name != "posix":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def load_checkpoint(path: str | Path, map_location="cpu") -> dict:
    """The dict saved by :func:`save_checkpoint`, or a :class:`CheckpointError` saying why not."""
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a folder, not a checkpoint file (e.g. {path}/ckpt.pt)")
    if not path.is_file():
        raise CheckpointError(f"no checkpoint at {path}; train a model first (mini-llm train)")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch raises several types for a cut or corrupted zip archive
        why = why_unreadable(path, err)
        advice = (  # another file given by mistake must not be deleted on our advice
            "Is it the file you meant? mini-llm train writes ckpt.pt into its run folder"
            if why.startswith(NOT_TORCH)
            else "Delete it and train again, or use an earlier copy"
        )
        raise CheckpointError(f"checkpoint {path} cannot be read: {why}. {advice}") from err
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path} is not a mini_llm checkpoint (it has no 'model' entry)")
    return state


NOT_TORCH = "it is not a file written by torch.save"


def why_unreadable(path: Path, err: Exception) -> str:
    """A reason a person can act on, where ``torch.load``'s own is often empty or a bare number
    (an empty file raises ``EOFError()``, a text file ``KeyError(101)``)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            start = file.read(4)
    except OSError as os_error:
        return f"the file cannot be opened ({os_error.strerror or os_error})"
    if size == 0:
        return "the file is empty (0 bytes)"
    if start != ZIP_SIGNATURE:
        return (
            f"{NOT_TORCH}, which writes a zip archive starting "
            f"with {ZIP_SIGNATURE!r}; this one starts with {start!r}"
        )
    if not zipfile.is_zipfile(path):
        return (
            f"the zip archive has no end ({size:,} bytes): it was cut short, e.g. by a full "
            "disk or an interrupted copy"
        )
    detail = str(err).split(". ")[0].strip()
    return f"{type(err).__name__}: {detail}" if detail else type(err).__name__


def rng_states() -> dict:
    """The state of every random number generator training may touch."""
    numpy_state = np.random.get_state()
    states = {
        "torch": torch.get_rng_state(),
        "python": random.getstate(),
        "numpy": [numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]],
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: dict) -> None:
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    kind, keys, *rest = states["numpy"]
    np.random.set_state((kind, np.array(keys, dtype=np.uint32), *rest))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
