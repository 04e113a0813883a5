"""The results file ``benchmarks/gpu_check.sh`` writes, read back for chapter 12.

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
     "ablations": [{"what": "compile", "setting": "on", "tokens_per_s": ...}, ...],
     "attention": [{"block_size": 1024, "attention": "fused", "ms_per_step": ...,
                    "peak_memory_gib": ...}, ...]}
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


def plot_gpu_results(results: dict):
    """The GPU run as a figure of three stacked panels, labelled with the hardware and date:
    the validation loss curve, tokens/s of the short comparisons, and attention's time per step
    at each context length. Returns a ``matplotlib.figure.Figure`` (no display needed)."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 8.5), layout="constrained")
    loss_axes, comparison_axes, attention_axes = figure.subplots(3, 1)
    hardware, run = results["hardware"], results["train"]
    figure.suptitle(f"{hardware['name']}, PyTorch {hardware['torch']}, {results['date']}")
    loss_axes.plot(*zip(*run["val_losses"]), "o-")
    loss_axes.set(xlabel="step", ylabel="validation loss", title=run["config"])
    labels = [f"{row['what']} {row['setting']}" for row in results["ablations"]]
    comparison_axes.barh(labels, [row["tokens_per_s"] for row in results["ablations"]])
    comparison_axes.set(xlabel="tokens/s (short runs)")
    for kind in ("fused", "explicit"):
        rows = [row for row in results.get("attention", []) if row["attention"] == kind]
        attention_axes.plot(
            [row["block_size"] for row in rows],
            [row["ms_per_step"] for row in rows],
            "o-",
            label=kind,
        )
    attention_axes.set(xlabel="context length T", ylabel="ms per training step")
    attention_axes.legend()
    return figure
