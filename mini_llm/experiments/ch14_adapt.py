"""Chapter 14's comparison: chapter 11's recorded GPT instruction-tuned on examples made from the
plays, by full fine-tuning and by LoRA at ranks 1 to 16, three seeds each.

Protocol. Every run starts from the ``ch11-gpt-cpu`` checkpoint and trains for ``STEPS`` steps
of ``BATCH`` examples of all three tasks mixed (AdamW, no weight decay, gradients clipped at
1), the loss on the response tokens only. The held-out speeches' examples are split by line
into a tuning half and a test half. Each method's learning rate (full fine-tuning, and LoRA
at each rank, alpha fixed) is chosen on seed 0 from ``LEARNING_RATES`` by the response bits
per character of the tuning half; seeds 1 and 2 then run at the chosen rate. Every score on
the page is of the test half, which neither training nor tuning read. Runs go to two worker
processes, one thread each.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from mini_llm.engine.recorded import (
    MAX_CHECKPOINT_BYTES,
    RESULTS_DIR,
    RecordingError,
    read_recording,
)
from mini_llm.experiments import Recorded
from mini_llm.experiments.ch11_gpt_cpu import trained_model
from mini_llm.instruct import (
    TEMPLATES,
    evaluate,
    finetune,
    greedy_response,
    instruction_split,
    shakespeare_tokenizer,
)
from mini_llm.lora import add_lora, lora_state_dict, merge_lora, trainable_parameters

NAME = "ch14-adapt"
SUMMARY = "chapter 11's GPT instruction-tuned: full fine-tuning against LoRA at ranks 1-16"
BASE = "ch11-gpt-cpu"
STEPS, BATCH, ALPHA = 300, 16, 16.0
SEEDS = [0, 1, 2]
RANKS = [1, 2, 4, 8, 16]
LEARNING_RATES = {"full": [3e-4, 1e-3, 3e-3], "lora": [3e-4, 1e-3, 3e-3]}
KEPT_RANK = 4  # the adapter kept as a checkpoint, for the page to reopen and merge
SAMPLES_PER_TASK = 3


def base_model(results_dir: str | Path = RESULTS_DIR):
    """Chapter 11's recorded GPT, in float32, as every run here starts."""
    recording = read_recording(BASE, results_dir)
    return trained_model(recording["results"], Path(results_dir) / f"{BASE}.safetensors")


def adapted_model(rank: int, adapter: str | Path, results_dir: str | Path = RESULTS_DIR):
    """The base GPT with LoRA adapters of ``rank`` loaded from ``adapter`` (A and B only)."""
    from safetensors.torch import load_file

    model = base_model(results_dir)
    add_lora(model, rank, ALPHA)
    state = load_file(str(adapter))
    expected = set(lora_state_dict(model))
    if set(state) != expected:
        raise RecordingError(f"{adapter} does not hold rank-{rank} adapters of {BASE}'s GPT")
    model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    return model.eval()


def split_held_out(held_out, seed: int = 0):
    """``(tuning, test)``: the held-out examples split by the line they were made from, so
    the three questions about one line fall in the same half."""
    lines = sorted({example.lines for example in held_out})
    order = np.random.default_rng(seed).permutation(len(lines))
    tuning_lines = {lines[i] for i in order[: len(lines) // 2]}
    tuning = [e for e in held_out if e.lines in tuning_lines]
    test = [e for e in held_out if e.lines not in tuning_lines]
    return tuning, test


def scores(model, examples, tokenizer) -> dict:
    """Response bits per character and exact match over all ``examples``, then per task."""
    out = {"all": evaluate(model, examples, tokenizer)}
    for task in TEMPLATES:
        out[task] = evaluate(model, [e for e in examples if e.task == task], tokenizer)
    return out


def answers(model, examples, tokenizer) -> list[dict]:
    """Greedy answers to held-out prompts, beside the right ones."""
    return [
        {"task": e.task, "prompt": e.prompt, "response": e.response,
         "answer": greedy_response(model, tokenizer, e.prompt)}
        for e in examples
    ]  # fmt: skip


def one_run(job: dict) -> dict:
    """Fine-tune (or, for the base, only score) one model; its scores and seconds."""
    torch.set_num_threads(1)
    train, tuning, test, shown = _DATA
    tokenizer = shakespeare_tokenizer()
    model = base_model()
    rank = job.get("rank")
    if rank is not None:
        torch.manual_seed(job["seed"])  # A's random start
        add_lora(model, rank, ALPHA)
    result = {k: job.get(k) for k in ("method", "rank", "lr", "seed")}
    result["trainable"] = trainable_parameters(model) if job["method"] != "base" else 0
    started = time.perf_counter()
    if job["method"] != "base":
        losses = finetune(model, train, tokenizer, job["steps"], BATCH, job["lr"], job["seed"])
        result["losses"] = [round(loss, 4) for loss in losses]
    result["train_seconds"] = round(time.perf_counter() - started, 2)
    result["tuning_bpc"] = evaluate(model, tuning, tokenizer)["response_bpc"]
    if job.get("adapter"):  # scored as saved, in float16, for the page to reopen
        from safetensors.torch import save_file

        adapter = {k: v.half().contiguous() for k, v in lora_state_dict(model).items()}
        save_file(adapter, job["adapter"])
        os.chmod(job["adapter"], 0o644)
        if Path(job["adapter"]).stat().st_size > MAX_CHECKPOINT_BYTES:
            raise RecordingError(f"{job['adapter']} is over the checkpoint limit")
        model = adapted_model(rank, job["adapter"])
    result["test"] = scores(model, test, tokenizer)
    if job.get("samples"):
        result["answers"] = answers(model, shown, tokenizer)
    if rank is not None and job.get("adapter"):
        inputs = torch.tensor([tokenizer.encode(shown[0].text)])
        with torch.no_grad():
            before = model(inputs)[0]
            after = merge_lora(model)(inputs)[0]
        result["merge_max_logit_change"] = (after - before).abs().max().item()
    return result


_DATA = None


def _load_data(tiny: bool):
    global _DATA
    train, held_out = instruction_split()
    tuning, test = split_held_out(held_out)
    if tiny:
        tuning, test = tuning[:64], test[:96]
    shown = [
        e for task in TEMPLATES for e in [x for x in test if x.task == task][:SAMPLES_PER_TASK]
    ]
    _DATA = train, tuning, test, shown


def _run_all(pool, jobs: list[dict], progress: bool, label: str) -> list[dict]:
    bar = tqdm(total=len(jobs), desc=label, disable=not progress)
    results = []
    for result in pool.imap_unordered(one_run, jobs):
        results.append(result)
        bar.update()
    bar.close()
    return results


def methods(ranks) -> list[tuple[str, int | None]]:
    return [("full", None)] + [("lora", rank) for rank in ranks]


def run(out_dir: str | Path, tiny: bool = False) -> Recorded:
    out_dir = Path(out_dir)
    steps, ranks = (3, [1, KEPT_RANK]) if tiny else (STEPS, RANKS)
    rates = {m: r[:1] for m, r in LEARNING_RATES.items()} if tiny else LEARNING_RATES
    seeds = SEEDS[:2] if tiny else SEEDS
    adapter = f"{NAME}-lora-r{KEPT_RANK}.safetensors"
    tuning_jobs = [{"method": "base", "samples": True}] + [
        {"method": m, "rank": r, "lr": lr, "seed": seeds[0], "steps": steps, "samples": True}
        for m, r in methods(ranks)
        for lr in rates[m]
    ]
    for job in tuning_jobs:  # each candidate of the kept rank saves its adapter
        if job.get("rank") == KEPT_RANK:
            job["adapter"] = str(out_dir / f"{NAME}-{job['lr']:g}.tmp")
    with multiprocessing.get_context("spawn").Pool(2, _load_data, (tiny,)) as pool:
        tuned = _run_all(pool, tuning_jobs, not tiny, "seed 0, every learning rate")
        best = {}
        for r in tuned:
            key = r["method"], r["rank"]
            if r["method"] != "base" and (
                key not in best or r["tuning_bpc"] < best[key]["tuning_bpc"]
            ):
                best[key] = r
        repeats = [
            {"method": m, "rank": r, "lr": chosen["lr"], "seed": seed, "steps": steps}
            for (m, r), chosen in best.items()
            for seed in seeds[1:]
        ]
        repeated = _run_all(pool, repeats, not tiny, "later seeds, chosen rates")
        pool.close()
        pool.join()
    for job in tuning_jobs:
        if "adapter" in job:
            if best["lora", KEPT_RANK]["lr"] == job["lr"]:
                Path(job["adapter"]).replace(out_dir / adapter)
            else:
                Path(job["adapter"]).unlink()
    base = next(r for r in tuned if r["method"] == "base")
    chosen = [r for r in tuned if r["method"] != "base" and best[r["method"], r["rank"]] is r]
    _load_data(tiny)
    train, tuning, test, _ = _DATA
    return Recorded(
        {
            "protocol": __doc__.split("Protocol. ", 1)[1].strip(),
            "base": BASE,
            "steps": steps,
            "batch_size": BATCH,
            "alpha": ALPHA,
            "ranks": ranks,
            "seeds": seeds,
            "learning_rates": rates,
            "examples": {"train": len(train), "tuning": len(tuning), "test": len(test)},
            "base_parameters": trainable_parameters(base_model()),
            "kept_rank": KEPT_RANK,
            "base_run": base,
            "tuning_runs": [r for r in tuned if r["method"] != "base"],
            "runs": chosen + repeated,
        },
        {"adapter": adapter},
    )
