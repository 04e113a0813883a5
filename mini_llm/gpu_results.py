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
     "ablations": [{"what": "compile", "setting": "on", "ms_per_step": ..., "tokens_per_s": ...,
                    "kernels_per_step": ..., "gpu_busy_ms_per_step": ...}, ...],
     "attention": [{"block_size": 1024, "attention": "fused", "ms_per_step": ...,
                    "peak_memory_gib": ...}, ...]}

An ablation's kernel count and GPU-busy time are there only where it was profiled (the eager
and compiled steps of a GPU run); readers take what is there.
"""

from __future__ import annotations

import json
from pathlib import Path

from mini_llm.bench import mfu

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


def _row(results: dict, what: str, setting: str) -> dict | None:
    for row in results["ablations"]:
        if (row["what"], row["setting"]) == (what, setting):
            return row
    return None


def describe_gpu_results(results: dict) -> str:
    """What the recorded run shows, as Markdown paragraphs whose every number comes from
    ``results``; a comparison is worded by the numbers, and a paragraph whose measurements
    the file lacks (a run without compilation, say) is left out."""
    paragraphs = (
        _training(results),
        _launches(results),
        _cuda_graphs(results),
        _precision(results),
        _attention(results),
    )
    return "\n\n".join(paragraph for paragraph in paragraphs if paragraph)


def _training(results: dict) -> str:
    run = results["train"]
    losses = run["val_losses"]
    interval = losses[1][0] - losses[0][0] if len(losses) > 1 else run["steps"]
    return (
        f"The {run['steps']:,} steps took {run['train_seconds']:.0f} s, compilation and an "
        f"evaluation every {interval:,} steps included; the validation loss fell from "
        f"{losses[0][1]:.2f} to {losses[-1][1]:.3f}."
    )


def _launches(results: dict) -> str | None:
    eager, compiled = _row(results, "compile", "off"), _row(results, "compile", "on")
    if not eager or "kernels_per_step" not in eager:
        return None
    ms, busy, kernels = (
        eager["ms_per_step"],
        eager["gpu_busy_ms_per_step"],
        eager["kernels_per_step"],
    )
    text = (
        f"A model of {results['train'].get('parameters', 0):,} parameters is small for this "
        f"GPU. An eager training step (bf16 autocast, no compilation), timed on its own, takes "
        f"{ms:.1f} ms, yet the GPU runs kernels for only {busy:.1f} ms of it ({busy / ms:.0%}): "
        f"the step launches {kernels:,.0f} kernels, one every {ms * 1000 / kernels:.0f} µs, and "
        "the GPU finishes each kernel sooner than Python and PyTorch's dispatcher launch the next."
    )
    if compiled and "kernels_per_step" in compiled:
        direction = "falls" if compiled["ms_per_step"] < ms else "rises"
        text += (
            f" `torch.compile` fuses operators into fewer kernels "
            f"({compiled['kernels_per_step']:,.0f}), and the step {direction} to "
            f"{compiled['ms_per_step']:.1f} ms, with {compiled['gpu_busy_ms_per_step']:.1f} ms "
            "of GPU work."
        )
    return text


def _cuda_graphs(results: dict) -> str | None:
    eager, compiled = _row(results, "compile", "off"), _row(results, "compile", "on")
    graphs = _row(results, "compile", "on, CUDA graphs")
    if not (eager and compiled and graphs and results.get("peak_flops")):
        return None
    run = results["train"]

    def share(row):  # of the GPU's peak, at this row's speed
        tokens_per_s = run["batch_size"] * run["block_size"] / (row["ms_per_step"] / 1000)
        return mfu(tokens_per_s, run["flops_per_token"], results["peak_flops"])

    return (
        'CUDA graphs (`torch.compile(model, mode="reduce-overhead")`) record the kernels once '
        f"and replay them with a single launch: {graphs['ms_per_step']:.1f} ms a step, "
        f"{eager['ms_per_step'] / graphs['ms_per_step']:.1f} times as fast as eager and "
        f"{compiled['ms_per_step'] / graphs['ms_per_step']:.1f} times as fast as compiled "
        f"without graphs. The model's arithmetic then uses {share(graphs):.1%} of the GPU's "
        f"peak, against {share(compiled):.1%} for the compiled step and {run['mfu']:.1%} over "
        "the whole run."
    )


def _precision(results: dict) -> str | None:
    eager, bf16 = _row(results, "compile", "off"), _row(results, "precision", "bf16")
    tf32 = _row(results, "precision", "fp32 (TF32 products)")
    if not (eager and bf16 and tf32):
        return None
    low, high = sorted((eager["ms_per_step"], bf16["ms_per_step"]))
    where = "between the two" if low <= tf32["ms_per_step"] <= high else "outside them"
    return (
        f"The same eager bf16 step was timed twice, in separate short runs: {low:.1f} and "
        f"{high:.1f} ms, {high / low - 1:.0%} apart. Float32 with TF32 products took "
        f"{tf32['ms_per_step']:.1f} ms, {where}. While the launches set the pace, the precision "
        "of the arithmetic is lost in the spread of repeated timings; bf16 pays where the "
        "products, not the launches, take the time."
    )


def _attention(results: dict) -> str | None:
    by = {(row["block_size"], row["attention"]): row for row in results.get("attention", [])}
    lengths = sorted({length for length, _ in by})
    kinds = ("fused", "explicit")
    if len(lengths) < 2 or not all(
        (t, k) in by for t in lengths[:: len(lengths) - 1] for k in kinds
    ):
        return None
    short, long = lengths[0], lengths[-1]
    fused, explicit = by[(long, "fused")], by[(long, "explicit")]

    def growth(kind):  # of peak memory, from the shortest context to the longest
        return by[(long, kind)]["peak_memory_gib"] / by[(short, kind)]["peak_memory_gib"]

    return (
        f"At a context of {long:,} tokens (batch {explicit['batch_size']}), explicit attention "
        f"needs {explicit['peak_memory_gib']:.2f} GiB at its peak against "
        f"{fused['peak_memory_gib']:.2f} GiB for the fused kernel "
        f"({explicit['peak_memory_gib'] / fused['peak_memory_gib']:.1f} times as much), and its "
        f"step takes {explicit['ms_per_step']:.1f} against {fused['ms_per_step']:.1f} ms. From "
        f"{short:,} tokens to {long:,} the explicit step's memory grows "
        f"{growth('explicit'):.1f}-fold and the fused step's {growth('fused'):.1f}-fold: the "
        "score matrices, as on the CPU above."
    )
