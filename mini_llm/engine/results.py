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
               "peak_memory_gib": 3.1, "val_losses": [[0, 4.4], [250, 2.1], ...]},
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
"""

from __future__ import annotations

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
    device = results["hardware"]["device"]
    if require_gpu and device != "cuda":
        raise ResultsError(
            f"{path} records a run on {device!r}, not on a CUDA GPU: a smoke test of the script "
            "is not a GPU result (run benchmarks/gpu_check.sh on a GPU machine)"
        )
    return results
