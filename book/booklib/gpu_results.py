"""Chapter 12's GPU results as the page shows them: a table, a figure and their description.

The numbers come from ``book/results/gpu_check.json`` through
:func:`mini_llm.engine.results.read_gpu_results`; this module only turns them into what the
page displays, so it lives with the book, not in the package.
"""

from __future__ import annotations

from mini_llm.flops import mfu


# ------------------------------------------------------------------------- derived numbers
def _row(results: dict, what: str, setting: str) -> dict | None:
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
    eager = _row(results, "compile", "off")
    repeat = next((row for row in results["ablations"] if is_repeat(row)), None)
    if not (eager and repeat):
        return None
    low, high = sorted((eager["ms_per_step"], repeat["ms_per_step"]))
    return low, high


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
    compiled = _row(results, "compile", "on")
    if compiled and peak:
        rows.append(
            [
                "MFU, compiled training step alone",
                f"{step_mfu(results, compiled):.1%} ({compiled['ms_per_step']:.1f} ms a step)",
            ]
        )
    rows += [
        ["final val loss", f"{run['val_losses'][-1][1]:.3f}"],
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
    """What an ablation row ran, in words: eager or compiled, and in which precision."""
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


# ---------------------------------------------------------------------------------- figure
def plot_gpu_results(results: dict):
    """The GPU run as a figure of four stacked panels, titled with the GPU and PyTorch version:
    the validation loss curve, the throughput of the short comparisons (with the spread of the
    same step timed twice), and, at each context length, attention's time per step and peak
    memory. Returns a ``matplotlib.figure.Figure`` (no display needed)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter, NullLocator

    figure = Figure(figsize=(7, 10.5), layout="constrained")
    loss_axes, comparison_axes, time_axes, memory_axes = figure.subplots(4, 1)
    hardware, run = results["hardware"], results["train"]
    figure.suptitle(f"{hardware['name']}, PyTorch {hardware['torch']}")

    loss_axes.plot(*zip(*run["val_losses"]), "o-")
    loss_axes.set(
        xlabel=f"training step ({run['config']}, batch {run['batch_size']} × "
        f"{run['block_size']} tokens)",
        ylabel="validation loss",
    )

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

    rows = sorted(results["ablations"], key=place)
    speeds = [row["tokens_per_s"] / 1e6 for row in rows]
    bars = comparison_axes.barh(
        [ablation_label(results, row) for row in rows],
        speeds,
        color=["lightgray" if is_repeat(row) else "tab:blue" for row in rows],
        hatch=[".." if is_repeat(row) else "" for row in rows],
        edgecolor="dimgray",
        zorder=2,
    )
    comparison_axes.invert_yaxis()  # top to bottom in the order above
    comparison_axes.bar_label(bars, fmt="%.2f", padding=3)
    spread = timing_spread(results)
    if spread:
        tokens = run["batch_size"] * run["block_size"]
        comparison_axes.axvspan(
            tokens / spread[1] / 1000,  # ms -> M tokens/s
            tokens / spread[0] / 1000,
            color="tab:orange",
            alpha=0.3,
            zorder=1,
            label="spread of the same eager\nstep timed twice",
        )
        comparison_axes.legend(loc="center right")
    comparison_axes.set_xlim(0, max(speeds) * 1.15)
    comparison_axes.set(
        xlabel=f"M tokens/s (median step of one short run, batch {run['batch_size']} × "
        f"{run['block_size']})"
    )

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
    figure.align_ylabels([loss_axes, time_axes, memory_axes])
    return figure


# ------------------------------------------------------------------------------- the prose
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


def summary_sentence(results: dict) -> str:
    """One sentence for the chapter's summary, from the file's numbers: how busy an eager step
    kept the GPU, and which speed-ups stand out of the spread of repeated timings."""
    eager = _row(results, "compile", "off")
    if not (eager and "gpu_busy_ms_per_step" in eager):
        return "the recorded GPU run has no profiled step to say what set its pace"
    busy = eager["gpu_busy_ms_per_step"] / eager["ms_per_step"]
    text = f"on the recorded GPU run an eager step kept the GPU busy for {busy:.0%} of its time"
    spread = timing_spread(results)
    worded = []
    for name, setting in (("compilation", "on"), ("CUDA graphs", "on, CUDA graphs")):
        row = _row(results, "compile", setting)
        if row:
            ratio = eager["ms_per_step"] / row["ms_per_step"]
            verdict = ""
            if spread:
                inside = ratio < spread[1] / spread[0]
                verdict = " (within the spread of repeated timings)" if inside else ""
            worded.append(f"{name} made it {ratio:.2f} times as fast{verdict}")
    return text + ("; " + " and ".join(worded) if worded else "")


def _training(results: dict) -> str:
    run = results["train"]
    losses = run["val_losses"]
    interval = losses[1][0] - losses[0][0] if len(losses) > 1 else run["steps"]
    text = (
        f"The {run['steps']:,} steps took {run['train_seconds']:.0f} s of wall clock, "
        f"compilation and {len(losses)} evaluations of the validation loss (one every "
        f"{interval:,} steps) included; the validation loss fell from {losses[0][1]:.2f} to "
        f"{losses[-1][1]:.3f}."
    )
    compiled = _row(results, "compile", "on")
    if compiled and results.get("peak_flops") and run.get("mfu") is not None:
        seconds = run["steps"] * compiled["ms_per_step"] / 1000
        text += (
            f" A compiled training step, timed on its own in a short run, takes "
            f"{compiled['ms_per_step']:.1f} ms: {run['steps']:,} of them make {seconds:.0f} s, "
            f"{seconds / run['train_seconds']:.0%} of the run's wall clock; the rest went to "
            "compiling, evaluating and whatever else the loop does between steps. Hence the "
            f"two MFUs of the table: {run['mfu']:.1%} over the wall clock, whose evaluations "
            f"are not counted as work, and {step_mfu(results, compiled):.1%} for the training "
            "step alone."
        )
    return text


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
            f" `torch.compile` in its default mode, which is what the trainer's `compile=true` "
            f"runs, fuses operators into fewer kernels ({compiled['kernels_per_step']:,.0f}), "
            f"and the step {direction} to {compiled['ms_per_step']:.1f} ms, with "
            f"{compiled['gpu_busy_ms_per_step']:.1f} ms of GPU work."
        )
    return text


def _cuda_graphs(results: dict) -> str | None:
    eager, compiled = _row(results, "compile", "off"), _row(results, "compile", "on")
    graphs = _row(results, "compile", "on, CUDA graphs")
    if not (eager and compiled and graphs and results.get("peak_flops")):
        return None
    run = results["train"]
    return (
        'CUDA graphs (`torch.compile(model, mode="reduce-overhead")`) record the kernels once '
        f"and replay them with a single launch: {graphs['ms_per_step']:.1f} ms a step, "
        f"{eager['ms_per_step'] / graphs['ms_per_step']:.1f} times as fast as eager and "
        f"{compiled['ms_per_step'] / graphs['ms_per_step']:.1f} times as fast as compiled "
        f"without graphs. The model's arithmetic then uses {step_mfu(results, graphs):.1%} of "
        f"the GPU's peak, against {step_mfu(results, compiled):.1%} for the compiled step and "
        f"{run['mfu']:.1%} over the whole run's wall clock. The trainer does not use CUDA "
        "graphs: its `compile=true` is the default mode."
    )


def _precision(results: dict) -> str | None:
    spread = timing_spread(results)
    if not spread:
        return None
    low, high = spread
    text = (
        f"How far can one timing be trusted? The same eager step was timed twice, in separate "
        f"short runs: {low:.1f} and {high:.1f} ms, {high / low - 1:.0%} apart. Every short run "
        "in the table and the figure is a single measurement like these, so this run does not "
        "show a difference smaller than that spread to be real."
    )
    eager, compiled = _row(results, "compile", "off"), _row(results, "compile", "on")
    graphs = _row(results, "compile", "on, CUDA graphs")
    effects = [
        (name, eager["ms_per_step"] / row["ms_per_step"])
        for name, row in (("compilation's", compiled), ("CUDA graphs'", graphs))
        if row and row["ms_per_step"] < eager["ms_per_step"]
    ]
    if effects:
        worded = [
            f"{name} {ratio:.2f}× over eager is {'within' if ratio < high / low else 'beyond'} it"
            for name, ratio in effects
        ]
        text += " Of the effects above, " + " and ".join(worded) + "."
    tf32 = next((row for row in results["ablations"] if row["setting"].startswith("fp32")), None)
    if tf32:
        ms = tf32["ms_per_step"]
        if low <= ms <= high:
            where = "between the two: this run cannot tell the two precisions apart"
        else:
            where = f"{'faster' if ms < low else 'slower'} than both"
        name = "Float32 with TF32 products" if "TF32" in tf32["setting"] else "Float32"
        text += (
            f" {name} took {ms:.1f} ms, {where}. bf16 speeds up the products; while the "
            "launches set the pace, that gain is lost in the spread."
        )
    return text


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

    def growth(kind, key="peak_memory_gib"):  # from the shortest context to the longest
        return by[(long, kind)][key] / by[(short, kind)][key]

    text = (
        f"At a context of {long:,} tokens (batch {explicit['batch_size']}, eager "
        f"{_default_precision(results)} steps), "
        f"explicit attention needs {explicit['peak_memory_gib']:.2f} GiB at its peak against "
        f"{fused['peak_memory_gib']:.2f} GiB for the fused kernel "
        f"({explicit['peak_memory_gib'] / fused['peak_memory_gib']:.1f} times as much), and its "
        f"step takes {explicit['ms_per_step']:.1f} against {fused['ms_per_step']:.1f} ms. From "
        f"{short:,} tokens to {long:,} the explicit step's memory grows "
        f"{growth('explicit'):.1f}-fold and the fused step's {growth('fused'):.1f}-fold: the "
        "score matrices, as on the CPU above."
    )
    before, after = by[(short, "fused")]["ms_per_step"], fused["ms_per_step"]
    text += (
        f" The fused step took {before:.1f} ms at {short:,} tokens and {after:.1f} ms at "
        f"{long:,}: {'twice' if long == 2 * short else f'{long / short:.1f} times'} the tokens in "
        + ("no more time" if after <= before else f"{after / before:.2f} times the time")
    )
    spread = timing_spread(results)
    if spread:
        change = max(before, after) / min(before, after)
        text += (
            ", a difference "
            + ("within" if change < spread[1] / spread[0] else "beyond")
            + " the spread of repeated timings above"
        )
    if after <= before:
        text += "; so this step, too, waits on something other than its arithmetic, such as its launches"
    return text + "."
