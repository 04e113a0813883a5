"""The results file of the recorded GPU run (``benchmarks/gpu_check.sh``), read back with checks.

Chapter 12 draws its GPU figures from this file only, never from numbers typed into the page;
a file from a CPU run (the script's smoke test) is not a GPU result, and reading it as one is
an error. The layout (``schema`` 1) is JSON::

    {"schema": 1, "date": "2026-...Z", "command": "...", "commit": "...",
     "hardware": {"device": "cuda", "name": "NVIDIA H200", "driver": "...", "cuda": "...",
                  "torch": "...", "python": "..."},
     "peak_flops": 9.89e14, "peak_source": "dense bf16 peak of an H200 (NVIDIA data sheet)",
     "train": {"config": "shakespeare-char-gpu", "steps": 5000, "batch_size": 64,
               "block_size": 256, "parameters": 10745088, "train_seconds": 70.1,
               "tokens_per_s": 1.2e6, "flops_per_token": 6.4e7, "mfu": 0.08,
               "peak_memory_gib": 3.1, "val_losses": [[0, 4.4], [250, 2.1], ...],
               "train_loss_means": [[250, 2.4], [500, 1.9], ...]},
     "bits_per_character": {
         "held_out": {"bits_per_character": 1.9, "windows": 256, "window": 65, "sha256": "..."},
         "own_context": {"bits_per_character": 1.8, "windows": 1940, "window": 257,
                         "val_characters": 498789},
         "precision": "float32 (TF32 products)"},
     "samples": {"settings": {"max_new_tokens": 400, "temperature": 0.8, ...},
                 "texts": [{"prompt": "ROMEO:\n", "seed": 0, "text": "ROMEO:\n..."}, ...]},
     "ablations": [{"what": "compile", "setting": "on", "ms_per_step": ..., "tokens_per_s": ...,
                    "kernels_per_step": ..., "gpu_busy_ms_per_step": ...}, ...],
     "attention": [{"block_size": 1024, "attention": "fused", "ms_per_step": ...,
                    "peak_memory_gib": ...}, ...]}

The training run's ``train_seconds`` (and so its ``tokens_per_s`` and ``mfu``) are wall clock:
compilation and the evaluations are in them. The ablations are short runs of the same model
and batch, each step timed on its own: ``compile`` ``off`` is the eager step, ``on`` the
compiled one (``torch.compile``'s default mode, as the trainer runs it), ``on, CUDA graphs``
its ``reduce-overhead`` mode; ``precision`` ``bf16`` is the eager bf16 step again (the same
setting as ``compile`` ``off``, timed in a run of its own), and ``fp32 (TF32 products)`` the
eager step without autocast. An ablation's kernel count and GPU-busy time are there only where
it was profiled (the eager and compiled steps of a GPU run); readers take what is there.

The trained model as a language model (``OPTIONAL``: a file recorded before the script measured
them lacks these keys and stays readable; when a key is there, its parts are checked):
``bits_per_character`` ``held_out`` is its score on chapter 11's held-out windows
(``mini_llm.experiments.shakespeare.held_out_windows`` of the validation split, read at a
context of at most 64 characters; ``sha256`` fingerprints them), ``own_context`` on windows of
``block_size + 1`` characters that tile the validation text, read at the model's own context;
``samples`` holds one seeded sample per prompt of chapter 11's recording, with its settings
(``text`` begins with the prompt); ``train`` ``train_loss_means`` is the mean training loss of
the steps since the evaluation before, at each evaluation after the first (dropout on).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

SCHEMA = 1
REQUIRED = {
    "": ("schema", "date", "command", "commit", "hardware", "peak_flops", "train", "ablations"),
    "hardware": ("device", "name", "driver", "torch"),
    "train": (
        "config",
        "steps",
        "batch_size",
        "block_size",
        "train_seconds",
        "tokens_per_s",
        "flops_per_token",
        "mfu",
        "peak_memory_gib",
        "val_losses",
    ),
}


# keys a file may lack (recorded before the script measured them); checked where present
OPTIONAL = {
    "bits_per_character": ("held_out", "own_context", "precision"),
    "samples": ("settings", "texts"),
}
OPTIONAL_PARTS = {
    ("bits_per_character", "held_out"): ("bits_per_character", "windows", "window", "sha256"),
    ("bits_per_character", "own_context"): ("bits_per_character", "windows", "window"),
    ("samples", "settings"): ("max_new_tokens", "temperature"),
}


class ResultsError(ValueError):
    """A results file that is damaged, of another layout, or not from a GPU."""


def read_gpu_results(path: str | Path, require_gpu: bool = True) -> dict | None:
    """The results in ``path``, checked; ``None`` when no file is there (no run recorded).

    ``require_gpu=False`` accepts a CPU run, for testing the script and this reader.
    """
    path = Path(path)
    if not path.exists():
        return None
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ResultsError(f"{path} is not a readable JSON results file: {err}") from err
    if not isinstance(results, dict) or results.get("schema") != SCHEMA:
        raise ResultsError(f"{path} is not a gpu_check results file of schema {SCHEMA}")
    for section, keys in REQUIRED.items():
        part = results[section] if section else results
        missing = [key for key in keys if key not in part]
        if missing:
            where = f"'{section}'" if section else "the top level"
            raise ResultsError(f"{path}: {where} lacks {', '.join(missing)}")
    for section, keys in OPTIONAL.items():
        if section in results:
            _check_parts(path, section, results[section], keys)
    for (section, part), keys in OPTIONAL_PARTS.items():
        if section in results:
            _check_parts(path, f"{section}.{part}", results[section][part], keys)
    for number, sample in enumerate(results.get("samples", {}).get("texts", [])):
        _check_parts(path, f"samples.texts[{number}]", sample, ("prompt", "seed", "text"))
    device = results["hardware"]["device"]
    if require_gpu and device != "cuda":
        raise ResultsError(
            f"{path} records a run on {device!r}, not on a CUDA GPU: a smoke test of the script "
            "is not a GPU result (run benchmarks/gpu_check.sh on a GPU machine)"
        )
    return results


def interval_means(losses, steps) -> list[list[float]]:
    """``[step, mean]`` at each of ``steps`` after the first: the mean of the per-step
    ``losses`` (``[step, loss]`` pairs, step ``s`` the loss of the ``s``-th update) of the steps
    since the one before. At the evaluation steps of a run, its ``train_loss_means``."""
    means = []
    for before, step in itertools.pairwise(steps):
        window = [loss for at, loss in losses if before < at <= step]
        if window:
            means.append([step, sum(window) / len(window)])
    return means


def _check_parts(path: Path, where: str, part, keys: tuple[str, ...]) -> None:
    if not isinstance(part, dict):
        raise ResultsError(f"{path}: '{where}' is not a mapping")
    missing = [key for key in keys if key not in part]
    if missing:
        raise ResultsError(f"{path}: '{where}' lacks {', '.join(missing)}")
