"""The GPU check behind ``benchmarks/gpu_check.sh``: one training run and short comparisons,
written to one results file (the layout is in ``mini_llm/engine/results.py``).

1. ``shakespeare-char-gpu`` for its full 5,000 steps (bf16 autocast and ``torch.compile`` on a
   GPU): validation loss curve, training time, tokens/s, MFU against the GPU's dense bf16 peak,
   peak memory.
2. Short runs of the same model (``--ablation-steps`` timed steps each): ``torch.compile`` on
   and off and with CUDA graphs, bf16 autocast and float32 (TF32 products on a GPU, as the
   trainer runs it); kernels and GPU-busy milliseconds per step of the eager and compiled steps.
3. Fused against explicit attention at T = 1,024 and 2,048 (batch 8): time per step and peak
   memory.

Between 1 and 2, the trained model as a language model: its bits per character on chapter 11's
held-out windows (``mini_llm.experiments.shakespeare``: the same windows of the same validation
text, read at a context of at most 64 characters) and on the whole validation text at its own
context, and one seeded sample per prompt of chapter 11's recording (its prompts and sampling
settings); the training loss is kept as its mean over each evaluation interval.

Chapter 12 renders its GPU figures from the file; a CPU run (the smoke test) is refused a
place in ``book/results/``.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import resource
import shlex
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from mini_llm.cli import default_data_dir
from mini_llm.corpus import load_text
from mini_llm.engine import configs, recorded
from mini_llm.engine.bench import gpu_work_per_step, train_step_times
from mini_llm.engine.data import (
    RandomBatches,
    load_meta,
    load_split,
    load_tokenizer_of,
    prepare,
)
from mini_llm.engine.results import SCHEMA, interval_means
from mini_llm.engine.train import autocast_dtype, make_optimizer, train, use_tf32_products
from mini_llm.experiments.ch11_gpt_cpu import PROMPTS, SAMPLE_SETTINGS
from mini_llm.experiments.ch11_gpt_cpu import SEED as SAMPLE_SEED
from mini_llm.experiments.shakespeare import WINDOW, bits_per_character, held_out_windows
from mini_llm.flops import gpt_flops_per_token, mfu
from mini_llm.gpt import GPT, GPTConfig

ROOT = Path(__file__).resolve().parents[1]
# Dense bf16 tensor-core peaks from NVIDIA's data sheets (SXM parts), FLOP/s.
PEAKS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "L4": 121e12}
ATTENTION_LENGTHS = (1024, 2048)


def peak_flops(name: str) -> tuple[float | None, str]:
    """The GPU's peak and where it comes from: PEAK_TFLOPS, or the table above."""
    if os.environ.get("PEAK_TFLOPS"):
        return float(os.environ["PEAK_TFLOPS"]) * 1e12, "PEAK_TFLOPS set by the caller"
    for key, value in PEAKS.items():
        if key in name:
            return value, f"dense bf16 peak of an {key} (NVIDIA data sheet)"
    return None, "unknown GPU: set PEAK_TFLOPS"


def commit() -> str:
    """The commit the run's code came from. A tree copied to a GPU machine may carry a stale
    .git, or none: there the caller names the commit it copied in GPU_CHECK_COMMIT."""
    return recorded.commit(named_by="GPU_CHECK_COMMIT")


def peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def timed_steps(shape, run, device, data, batch_size, steps, compile_mode, dtype, profile=False):
    """Median ms per training step of a fresh model and the peak memory of those steps; with
    ``profile``, also the kernels and GPU milliseconds per step (``gpu_work_per_step``).

    ``compile_mode``: None (eager), ``"default"`` or ``"reduce-overhead"`` (CUDA graphs).
    """
    torch.manual_seed(0)
    model = GPT(shape).to(device)
    optimizer = make_optimizer(model, run.train, device)
    runner = model if compile_mode is None else torch.compile(model, mode=compile_mode)
    low = autocast_dtype(device, dtype)
    batches = RandomBatches(data, block_size=shape.block_size, batch_size=batch_size, seed=0)
    warmup = 5
    reset_peak(device)
    batch_list = [tuple(t.to(device) for t in batches()) for _ in range(warmup + steps)]
    times = train_step_times(runner, batch_list, optimizer, warmup=warmup, autocast_to=low)
    row = {"ms_per_step": statistics.median(times), "peak_memory_gib": peak_memory_gib(device)}
    if profile and device.type == "cuda":
        try:  # a profiler that fails here costs this figure, not the run
            kernels, busy_ms = gpu_work_per_step(runner, batch_list[:10], optimizer, low)
            row |= {"kernels_per_step": kernels, "gpu_busy_ms_per_step": busy_ms}
        except Exception as err:  # noqa: BLE001 - in the results, never hidden
            row["profile_error"] = f"{type(err).__name__}: {err}"
    return row


def windows_digest(windows: torch.Tensor) -> str:
    """A fingerprint of held-out windows, so a reader can check they are the ones it means."""
    return hashlib.sha256(windows.to(torch.int64).numpy().tobytes()).hexdigest()


def language_model(model, tokenizer, val_data, device) -> tuple[dict, dict]:
    """The trained model as a language model: ``(bits_per_character, samples)`` as the
    results file holds them (``mini_llm/engine/results.py``)."""
    val_ids = np.asarray(val_data)
    held_out = held_out_windows(val_ids)  # chapter 11's: every model of 11 and 12 is scored on them
    own = model.config.block_size + 1  # read block_size characters, score each of them
    whole = held_out_windows(val_ids, windows=len(val_ids) // own, window=own)
    bits = {
        "held_out": {
            "bits_per_character": bits_per_character(model, held_out.to(device)),
            "windows": held_out.shape[0],
            "window": held_out.shape[1],
            "sha256": windows_digest(held_out),
        },
        "own_context": {
            "bits_per_character": bits_per_character(model, whole.to(device)),
            "windows": whole.shape[0],
            "window": whole.shape[1],
            "val_characters": len(val_ids),
        },
        "precision": "float32 (TF32 products)" if device.type == "cuda" else "float32",
    }
    texts = []
    for number, prompt in enumerate(PROMPTS):  # chapter 11's prompts, seeds and settings
        generator = torch.Generator(device=device).manual_seed(SAMPLE_SEED + number)
        ids = torch.tensor([tokenizer.encode(prompt)], device=device)
        tokens = model.generate(ids, generator=generator, **SAMPLE_SETTINGS)[0].tolist()
        texts.append(
            {"prompt": prompt, "seed": SAMPLE_SEED + number, "text": tokenizer.decode(tokens)}
        )
    samples = {"settings": dict(SAMPLE_SETTINGS), "texts": texts}
    return bits, samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", required=True, help="the JSON file to write")
    parser.add_argument("--ablation-steps", type=int, default=50)
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()
    device_choice = "auto"
    overrides = []
    for override in args.overrides:
        if override.startswith("device="):
            device_choice = override.split("=", 1)[1]
        else:
            overrides.append(override)
    run = configs.resolve("shakespeare-char-gpu", overrides)
    if run.model["block_size"] < WINDOW - 1:
        sys.exit(
            f"gpu_check: block_size={run.model['block_size']} cannot read chapter 11's held-out "
            f"windows of {WINDOW} characters, which every model of chapters 11 and 12 is scored "
            f"on: give block_size={WINDOW - 1} or more"
        )
    results_path = Path(args.results).resolve()
    device_probe = (
        torch.device("cuda")
        if (device_choice in ("auto", "cuda") and torch.cuda.is_available())
        else torch.device("cpu")
    )
    in_book = ROOT / "book" / "results"
    if device_probe.type != "cuda" and in_book in results_path.parents:
        sys.exit(
            f"gpu_check: this is a run on {device_probe.type}, a smoke test of the script, "
            f"not a GPU result: it may not be written to {in_book}; set RESULTS=... "
            "to a path outside book/results"
        )

    data = ROOT / default_data_dir(run.data["corpus"])
    if not (data / "meta.json").exists():
        prepare(load_text(run.data["corpus"]), data, run.data["val_fraction"])
    shape = GPTConfig(vocab_size=load_meta(data)["vocab_size"], **run.model)
    train_data, val_data = load_split(data, "train"), load_split(data, "val")
    batch_size = run.data["batch_size"]

    torch.manual_seed(0)
    model = GPT(shape)
    sizes = {"block_size": shape.block_size, "batch_size": batch_size}
    config = replace(run.train, out_dir=None, progress=False, device=device_choice)
    reset_peak(device_probe)
    start = time.perf_counter()
    result = train(
        model,
        RandomBatches(train_data, seed=0, **sizes),
        config,
        val_batches=RandomBatches(val_data, seed=1, **sizes),
    )
    train_seconds = time.perf_counter() - start
    device = next(model.parameters()).device
    memory = peak_memory_gib(device)
    tokens_per_s = run.train.max_iters * batch_size * shape.block_size / train_seconds
    peak, peak_source = (
        peak_flops(recorded.hardware(device)["name"])
        if device.type == "cuda"
        else (None, "not a GPU")
    )
    per_token = gpt_flops_per_token(shape)
    bits, samples = language_model(model, load_tokenizer_of(data), val_data, device)
    print(
        f"bits/character  {bits['held_out']['bits_per_character']:.4f} on chapter 11's "
        f"held-out windows, {bits['own_context']['bits_per_character']:.4f} at context "
        f"{shape.block_size}",
        flush=True,
    )

    use_tf32_products(device)  # as train() set it: the fp32 row below has TF32 products
    ablations = []
    comparisons = [
        ("compile", "on", "default", "auto"),  # left out where the overrides turn compile off
        ("compile", "on, CUDA graphs", "reduce-overhead", "auto"),  # GPU only
        ("compile", "off", None, "auto"),
        ("precision", "bf16" if device.type == "cuda" else "auto (fp32 on CPU)", None, "auto"),
        ("precision", "fp32 (TF32 products)" if device.type == "cuda" else "fp32", None, "fp32"),
    ]
    if not run.train.compile:
        comparisons = [row for row in comparisons if row[2] is None]
    elif device.type != "cuda":
        comparisons = [row for row in comparisons if row[2] != "reduce-overhead"]
    for what, setting, compile_mode, dtype in comparisons:
        try:
            timing = timed_steps(
                shape,
                run,
                device,
                train_data,
                batch_size,
                args.ablation_steps,
                compile_mode,
                dtype,
                profile=setting in ("on", "off"),
            )
        except Exception as err:  # CUDA graphs can refuse a model: say so
            if compile_mode != "reduce-overhead":
                raise
            print(f"{what} {setting}: failed, {type(err).__name__}: {err}", flush=True)
            continue
        ms = timing.pop("ms_per_step")
        timing.pop("peak_memory_gib")
        ablations.append(
            {
                "what": what,
                "setting": setting,
                "ms_per_step": ms,
                "tokens_per_s": batch_size * shape.block_size / ms * 1000,
                **timing,
            }
        )
        work = (
            f", {timing['kernels_per_step']:.0f} kernels, GPU busy "
            f"{timing['gpu_busy_ms_per_step']:.1f} ms"
            if "kernels_per_step" in timing
            else ""
        )
        print(f"{what} {setting}: {ms:.1f} ms/step{work}", flush=True)

    attention = []
    for length in ATTENTION_LENGTHS:
        for kind in ("fused", "explicit"):
            long_shape = replace(shape, block_size=length, attention=kind)
            timing = timed_steps(
                long_shape, run, device, train_data, 8, args.ablation_steps, None, "auto"
            )
            attention.append({"block_size": length, "attention": kind, "batch_size": 8, **timing})
            print(
                f"attention {kind} T={length}: {timing['ms_per_step']:.1f} ms/step, "
                f"{timing['peak_memory_gib']:.2f} GiB",
                flush=True,
            )

    results = {
        "schema": SCHEMA,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": os.environ.get("GPU_CHECK_COMMAND", shlex.join(sys.argv)),
        "commit": commit(),
        "hardware": recorded.hardware(device),
        "peak_flops": peak,
        "peak_source": peak_source,
        "train": {
            "config": "shakespeare-char-gpu",
            "overrides": overrides,
            "steps": result.step,
            "batch_size": batch_size,
            "block_size": shape.block_size,
            "parameters": model.num_parameters(),
            "compile": run.train.compile,
            "train_seconds": train_seconds,
            "tokens_per_s": tokens_per_s,
            "flops_per_token": per_token,
            "mfu": mfu(tokens_per_s, per_token, peak) if peak else None,
            "peak_memory_gib": memory,
            "val_losses": [list(pair) for pair in result.val_losses],
            "train_loss_means": interval_means(
                result.train_losses, [step for step, _ in result.val_losses]
            ),
        },
        "bits_per_character": bits,
        "samples": samples,
        "ablations": ablations,
        "attention": attention,
    }
    results_path.parent.mkdir(parents=True, exist_ok=True)
    results_path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    share = "n/a" if results["train"]["mfu"] is None else f"{results['train']['mfu']:.1%}"
    print(f"device          {results['hardware']['name']} ({device})")
    print(
        f"model           {model.num_parameters():,} parameters, {result.step} steps of "
        f"{batch_size}x{shape.block_size} tokens in {train_seconds:.0f} s"
    )
    print(f"tokens/s        {tokens_per_s:,.0f} (whole run, compilation and evaluation included)")
    print(f"MFU             {share} ({peak_source})")
    print(f"val loss        {result.val_losses[-1][1]:.4f} at step {result.step}")
    print(f"peak memory     {memory:.2f} GiB")
    print(f"results         {results_path}")


if __name__ == "__main__":
    main()
