"""Chapter 12's GPU results as the page shows them: its table and its figures.

The numbers come from ``book/results/gpu_check.json`` through
:func:`mini_llm.engine.results.read_gpu_results`; this module only turns them into rows and
figures (and the few derived numbers they need), so it lives with the book, not in the
package. What the page *says* about them is written in its Markdown, with the numbers glued
and the claims asserted there.
"""

from __future__ import annotations

import math

from mini_llm.flops import mfu

BITS = 1 / math.log(2)  # nats -> bits


# ------------------------------------------------------------------------- derived numbers
def ablation(results: dict, what: str, setting: str) -> dict | None:
    """The short run ``what`` / ``setting`` of the file (``compile`` / ``off``, ...), or None."""
    for row in results["ablations"]:
        if (row["what"], row["setting"]) == (what, setting):
            return row
    return None


def is_repeat(row: dict) -> bool:
    """Whether an ablation row times the eager step of ``compile`` ``off`` again: the precision
    row that keeps the default precision (bf16 on a GPU, ``auto`` on a CPU)."""
    return row["what"] == "precision" and (
        row["setting"] == "bf16" or row["setting"].startswith("auto")
    )


def step_mfu(results: dict, row: dict) -> float | None:
    """The MFU of an ablation's training step, timed on its own: the model's FLOPs per step
    over the step's time, against the GPU's peak; ``None`` where the file has no peak."""
    run, peak = results["train"], results.get("peak_flops")
    if not peak:
        return None
    tokens_per_s = run["batch_size"] * run["block_size"] / (row["ms_per_step"] / 1000)
    return mfu(tokens_per_s, run["flops_per_token"], peak)


def timing_spread(results: dict) -> tuple[float, float] | None:
    """The two timings (ms, low first) of the same eager step, measured in separate short runs:
    the spread of repeated timings in this run. ``None`` where the file has no repeat."""
    eager = ablation(results, "compile", "off")
    repeat = next((row for row in results["ablations"] if is_repeat(row)), None)
    if not (eager and repeat):
        return None
    low, high = sorted((eager["ms_per_step"], repeat["ms_per_step"]))
    return low, high


# --------------------------------------------------------------------------------- table
def summary_rows(results: dict) -> list[list[str]]:
    """The run as rows of (what was measured, value), for the page's table."""
    hardware, run = results["hardware"], results["train"]
    rows = [
        ["GPU", f"{hardware['name']} (driver {hardware['driver']})"],
        ["PyTorch", hardware["torch"]],
        ["date", results["date"][:10]],
        ["commit", results["commit"]],
        [
            "training run, wall clock",
            (
                f"{run['steps']:,} steps of {run['batch_size']} × {run['block_size']} tokens "
                f"in {run['train_seconds']:.0f} s"
            ),
        ],
        ["tokens/s, wall clock", f"{run['tokens_per_s']:,.0f}"],
    ]
    peak = results.get("peak_flops")
    if peak and run.get("mfu") is not None:
        source = results.get("peak_source", "the GPU's peak")
        rows.append(
            ["MFU, wall clock", f"{run['mfu']:.1%} of {peak / 1e12:.0f} TFLOP/s, the {source}"]
        )
    compiled = ablation(results, "compile", "on")
    if compiled and peak:
        rows.append(
            [
                "MFU, compiled training step alone",
                f"{step_mfu(results, compiled):.1%} ({compiled['ms_per_step']:.1f} ms a step)",
            ]
        )
    rows += [
        ["final validation loss (nats per character)", f"{run['val_losses'][-1][1]:.3f}"],
        ["peak memory", f"{run['peak_memory_gib']:.2f} GiB"],
    ]
    rows += [
        [
            f"short run: {ablation_label(results, row)}",
            f"{row['tokens_per_s']:,.0f} tokens/s ({row['ms_per_step']:.1f} ms a step)",
        ]
        for row in results["ablations"]
    ]
    return rows


def _default_precision(results: dict) -> str:
    """The precision of a step at ``dtype="auto"``: bf16 autocast on a GPU, float32 elsewhere."""
    return "bf16" if results["hardware"]["device"] == "cuda" else "fp32"


def ablation_label(results: dict, row: dict) -> str:
    """What an ablation row ran, as a label: eager or compiled, and in which precision."""
    low = _default_precision(results)
    labels = {
        ("compile", "off"): f"eager, {low}",
        ("compile", "on"): f"compiled (default mode), {low}",
        ("compile", "on, CUDA graphs"): f"compiled with CUDA graphs, {low}",
        ("precision", "fp32 (TF32 products)"): "eager, fp32 (TF32 products)",
        ("precision", "fp32"): "eager, fp32",
    }
    if is_repeat(row):
        return f"eager, {low}, timed again"
    return labels.get((row["what"], row["setting"]), f"{row['what']} {row['setting']}")


# -------------------------------------------------------------------------------- figures
def plot_curves_in_bits(results: dict, reference: dict | None = None):
    """The training run's losses in bits per character against the tokens it had read: the
    validation estimates and, where the file records them, the training losses' interval
    means and the score on chapter 11's held-out windows (a star at the run's end).

    ``reference`` (optional) draws another run the same way: ``{"label": ..., "tokens_per_step":
    ..., "val_losses": [[step, nats], ...], "train_loss_means": [...], "held_out": bits}``.
    Returns a ``matplotlib.figure.Figure`` (no display needed)."""
    from matplotlib.figure import Figure

    run = results["train"]
    gpu = {
        "label": f"{run['config']} ({results['hardware']['name']})",
        "tokens_per_step": run["batch_size"] * run["block_size"],
        "val_losses": run["val_losses"],
        "train_loss_means": run.get("train_loss_means", []),
        "held_out": results.get("bits_per_character", {})
        .get("held_out", {})
        .get("bits_per_character"),
    }
    figure = Figure(figsize=(7, 4.2), layout="constrained")
    axes = figure.subplots()
    for curve, colour in ((gpu, "tab:blue"), (reference, "tab:orange")):
        if curve is None:
            continue
        tokens = curve["tokens_per_step"]

        def points(pairs, tokens=tokens):  # step 0 has read nothing: no place on a log axis
            kept = [(step * tokens, loss * BITS) for step, loss in pairs if step > 0]
            return [list(column) for column in zip(*kept, strict=True)] or [[], []]

        axes.plot(*points(curve["val_losses"]), "o-", color=colour, markersize=3,
                  label=f"{curve['label']}: validation estimate")  # fmt: skip
        if curve["train_loss_means"]:
            axes.plot(*points(curve["train_loss_means"]), "--", color=colour, alpha=0.7,
                      label=f"{curve['label']}: training loss")  # fmt: skip
        if curve["held_out"] is not None:
            last = curve["val_losses"][-1][0] * tokens
            axes.plot([last], [curve["held_out"]], "*", color=colour, markersize=12,
                      markeredgecolor="black", label=f"{curve['label']}: held-out windows")  # fmt: skip
    axes.set(xscale="log", xlabel="tokens read in training", ylabel="bits per character")
    axes.legend(fontsize=9)
    return figure


def plot_step_comparisons(results: dict):
    """The throughput of the short runs' training steps, eager rows first, with the spread of
    the same eager step timed twice. Returns a ``matplotlib.figure.Figure``."""
    from matplotlib.figure import Figure

    run = results["train"]
    order = [
        ("compile", "off"),
        "repeat",
        ("precision", "fp32 (TF32 products)"),
        ("precision", "fp32"),
        ("compile", "on"),
        ("compile", "on, CUDA graphs"),
    ]

    def place(row):  # eager rows first, then compiled; anything else last
        key = "repeat" if is_repeat(row) else (row["what"], row["setting"])
        return order.index(key) if key in order else len(order)

    figure = Figure(figsize=(7, 3.4), layout="constrained")
    axes = figure.subplots()
    rows = sorted(results["ablations"], key=place)
    speeds = [row["tokens_per_s"] / 1e6 for row in rows]
    bars = axes.barh(
        [ablation_label(results, row) for row in rows],
        speeds,
        color=["lightgray" if is_repeat(row) else "tab:blue" for row in rows],
        hatch=[".." if is_repeat(row) else "" for row in rows],
        edgecolor="dimgray",
        zorder=2,
    )
    axes.invert_yaxis()  # top to bottom in the order above
    axes.bar_label(bars, fmt="%.2f", padding=3)
    spread = timing_spread(results)
    if spread:
        tokens = run["batch_size"] * run["block_size"]
        axes.axvspan(
            tokens / spread[1] / 1000,  # ms -> M tokens/s
            tokens / spread[0] / 1000,
            color="tab:orange",
            alpha=0.3,
            zorder=1,
            label="spread of the same eager\nstep timed twice",
        )
        axes.legend(loc="center right")
    axes.set_xlim(0, max(speeds) * 1.15)
    axes.set(
        xlabel=f"M tokens/s (median step of one short run, batch {run['batch_size']} × "
        f"{run['block_size']})"
    )
    return figure


def plot_attention(results: dict):
    """At each context length of the file, the time per training step (top) and the peak memory
    (bottom) with fused and with explicit attention. Returns a ``matplotlib.figure.Figure``."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter, NullLocator

    figure = Figure(figsize=(7, 5.5), layout="constrained")
    time_axes, memory_axes = figure.subplots(2, 1)
    attention = results.get("attention", [])
    lengths = sorted({row["block_size"] for row in attention})
    for kind, marker in (("fused", "o-"), ("explicit", "s--")):
        kept = sorted(
            (r for r in attention if r["attention"] == kind), key=lambda r: r["block_size"]
        )
        for axes, key in ((time_axes, "ms_per_step"), (memory_axes, "peak_memory_gib")):
            axes.plot([r["block_size"] for r in kept], [r[key] for r in kept], marker, label=kind)
    batch = attention[0]["batch_size"] if attention else None
    low = _default_precision(results)
    where = f"batch {batch}, eager {low}" if batch else f"eager {low}"
    for axes, label in ((time_axes, "ms per training step"), (memory_axes, "peak memory (GiB)")):
        axes.set(xscale="log", yscale="log", xlabel=f"context length T ({where})", ylabel=label)
        if lengths:
            axes.set_xticks(lengths, [f"{length:,}" for length in lengths])
            axes.set_xlim(lengths[0] / 1.3, lengths[-1] * 1.3)
        axes.xaxis.set_minor_locator(NullLocator())
        axes.yaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))  # 1, 2, 5, 10, ...
        axes.yaxis.set_major_formatter(FormatStrFormatter("%g"))
        axes.yaxis.set_minor_formatter(NullFormatter())
        if attention:
            axes.legend()
    figure.align_ylabels([time_axes, memory_axes])
    return figure
