"""Chapter 11's fair comparison: chapter 5's RNN, chapter 6's GRU and the GPT trained on the same
Shakespeare batches at equal training compute, over a sweep of budgets, three seeds a point.

Protocol. A budget is a number of training FLOPs (forward and backward, 6 per weight per
token, plus the GPT's attention products); each model gets as many steps of 12 windows of 64
characters as its FLOPs per token allow, under the course's warm-up + cosine schedule. Each
family's learning rate is tuned at every budget on seed 0 over ``LEARNING_RATES``, scored on
``tuning`` windows (held-out text, disjoint from the ``held_out_windows`` every score on the
page is reported on); seeds 1 and 2 then run at the chosen rate. Every run also records its
wall-clock seconds on one CPU thread; since other work on the machine inflates those, each
family's step time is also measured on its own (the fastest of five interleaved rounds), and
the time a run needs is its steps times that. Runs go to two worker processes, one thread each.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import statistics
import time
from pathlib import Path

import torch
from tqdm import tqdm

from mini_llm.engine.bench import train_step_times
from mini_llm.engine.data import RandomBatches
from mini_llm.engine.recorded import load_weights, save_weights
from mini_llm.engine.train import TrainConfig, train
from mini_llm.experiments import Recorded
from mini_llm.experiments.shakespeare import (
    WINDOWS,
    bits_per_character,
    held_out_windows,
    shakespeare_splits,
)
from mini_llm.flops import gpt_flops_per_token
from mini_llm.gpt import GPT, GPTConfig
from mini_llm.lstm import GRULanguageModel
from mini_llm.rnn import RNNLanguageModel

NAME = "ch11-sweep"
SUMMARY = "RNN, GRU and GPT at equal training compute over a sweep of budgets, 3 seeds a point"
BATCH, CONTEXT = 12, 64
BUDGETS = [2.5e11, 1e12, 4e12]  # training FLOPs per run
SEEDS = [0, 1, 2]
LEARNING_RATES = {"RNN": [3e-3, 1e-2], "GRU": [3e-3, 1e-2], "GPT": [3e-3, 6e-3]}
WEIGHT_DECAY = {"RNN": 0.0, "GRU": 0.0, "GPT": 0.1}  # chapter 5's, and the GPT config's
SIZES = {  # the chapter's GPT (shakespeare-char-cpu); recurrent models of a similar cost
    "RNN": {"embedding_dim": 64, "hidden_dim": 256},
    "GRU": {"embedding_dim": 64, "hidden_dim": 256},
    "GPT": {"n_layer": 4, "n_head": 4, "n_embd": 128, "block_size": CONTEXT, "dropout": 0.0},
}
TINY_SIZES = {
    "RNN": {"embedding_dim": 8, "hidden_dim": 16},
    "GRU": {"embedding_dim": 8, "hidden_dim": 16},
    "GPT": {"n_layer": 1, "n_head": 2, "n_embd": 16, "block_size": CONTEXT, "dropout": 0.0},
}
TINY_BUDGETS = [2e8, 4e8]


def build(family: str, vocab_size: int, sizes: dict) -> torch.nn.Module:
    if family == "RNN":
        return RNNLanguageModel(vocab_size, **sizes[family])
    if family == "GRU":
        return GRULanguageModel(vocab_size, **sizes[family])
    return GPT(GPTConfig(vocab_size=vocab_size, **sizes[family]))


def flops_per_token(model: torch.nn.Module) -> float:
    """Training FLOPs per token: 6 per weight of a matrix product (the embedding tables are
    looked up, not multiplied; the GPT's tied table is its output head), plus attention."""
    if isinstance(model, GPT):
        return gpt_flops_per_token(model.config)
    weights = [
        p for name, p in model.named_parameters() if p.dim() == 2 and "embedding" not in name
    ]
    return 6.0 * sum(p.numel() for p in weights)


def step_milliseconds(vocab_size: int, sizes: dict, train_ids, rounds: int = 5) -> dict:
    """Each family's training step on one thread, in ms: the fastest median of ``rounds``
    interleaved measurements, the one other work on the machine inflated least."""
    torch.set_num_threads(1)
    batches = RandomBatches(train_ids, CONTEXT, BATCH, seed=0)
    fastest = {family: math.inf for family in sizes}
    for _ in range(rounds):
        for family in sizes:
            model = build(family, vocab_size, sizes)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            times = train_step_times(model, [batches() for _ in range(13)], optimizer, warmup=3)
            fastest[family] = min(fastest[family], statistics.median(times))
    return fastest


def tuning_windows(val_ids) -> torch.Tensor:
    """Windows halfway between those of :func:`held_out_windows`: held out, and disjoint from
    the windows results are reported on."""
    shift = (len(val_ids) - 65) // (2 * (WINDOWS - 1))
    return held_out_windows(val_ids[shift:])


def one_run(job: dict) -> dict:
    """Train one model for one budget; its scores and seconds (runs in a worker process)."""
    torch.set_num_threads(1)
    _, train_ids, val_ids = _DATA
    family, seed, lr = job["family"], job["seed"], job["lr"]
    torch.manual_seed(seed)
    model = build(family, job["vocab_size"], job["sizes"])
    per_token = flops_per_token(model)
    steps = max(1, round(job["budget"] / (per_token * BATCH * CONTEXT)))
    config = TrainConfig(
        max_iters=steps,
        learning_rate=lr,
        min_lr=lr / 10,
        warmup_iters=min(100, steps // 10),
        weight_decay=WEIGHT_DECAY[family],
        eval_interval=0,
        progress=False,
        device="cpu",
        threads=1,
        seed=seed,
    )
    started = time.perf_counter()
    train(model, RandomBatches(train_ids, CONTEXT, BATCH, seed=seed), config)
    seconds = time.perf_counter() - started
    result = {
        **{k: job[k] for k in ("family", "budget", "seed", "lr")},
        "parameters": sum(p.numel() for p in model.parameters()),
        "flops_per_token": per_token,
        "steps": steps,
        "train_seconds": round(seconds, 2),
        "tuning_bits": bits_per_character(model, tuning_windows(val_ids)),
        "bits_per_character": bits_per_character(model, held_out_windows(val_ids)),
    }
    if job.get("checkpoint"):  # scored again as saved, in float16, for the page to reopen
        save_weights(model, job["checkpoint"])
        load_weights(model, job["checkpoint"])
        result["bits_per_character"] = bits_per_character(model, held_out_windows(val_ids))
    return result


_DATA = None


def _load_data():
    global _DATA
    _DATA = shakespeare_splits()


def _run_all(pool, jobs: list[dict], progress: bool, label: str) -> list[dict]:
    bar = tqdm(total=len(jobs), desc=label, disable=not progress)
    results = []
    for result in pool.imap_unordered(one_run, jobs):
        results.append(result)
        bar.update()
    bar.close()
    return results


def run(out_dir: str | Path, tiny: bool = False) -> Recorded:
    out_dir = Path(out_dir)
    sizes, budgets = (TINY_SIZES, TINY_BUDGETS) if tiny else (SIZES, BUDGETS)
    rates = {f: r[:1] for f, r in LEARNING_RATES.items()} if tiny else LEARNING_RATES
    tokenizer, train_ids, _ = shakespeare_splits()
    load_at_start = os.getloadavg()[0]
    step_ms = step_milliseconds(tokenizer.vocab_size, sizes, train_ids, rounds=1 if tiny else 5)
    common = {"vocab_size": tokenizer.vocab_size, "sizes": sizes}
    tuning = [
        {**common, "family": f, "budget": b, "seed": SEEDS[0], "lr": lr}
        for b in budgets
        for f in rates
        for lr in rates[f]
    ]
    for job in tuning:  # the recurrent models of the largest budget are kept for the page
        if job["budget"] == budgets[-1] and job["family"] != "GPT":
            job["checkpoint"] = str(out_dir / f"{NAME}-{job['family']}-{job['lr']:g}.tmp")
    with multiprocessing.get_context("spawn").Pool(2, initializer=_load_data) as pool:
        tuned = _run_all(pool, tuning, not tiny, "seed 0, every learning rate")
        best = {}
        for r in tuned:
            key = r["family"], r["budget"]
            if key not in best or r["tuning_bits"] < best[key]["tuning_bits"]:
                best[key] = r
        repeats = [
            {**common, "family": family, "budget": budget, "seed": seed, "lr": chosen["lr"]}
            for (family, budget), chosen in best.items()
            for seed in SEEDS[1:]
        ]
        repeated = _run_all(pool, repeats, not tiny, "seeds 1 and 2, chosen rates")
        pool.close()  # let the workers exit on their own, releasing what they hold
        pool.join()
    checkpoints = {}
    for job in tuning:
        if "checkpoint" in job:
            kept = best[job["family"], job["budget"]]["lr"] == job["lr"]
            if kept:
                checkpoints[job["family"]] = f"{NAME}-{job['family'].lower()}.safetensors"
                Path(job["checkpoint"]).replace(out_dir / checkpoints[job["family"]])
            else:
                Path(job["checkpoint"]).unlink()
    chosen = [r for r in tuned if best[r["family"], r["budget"]] is r]
    return Recorded(
        {
            "protocol": __doc__.split("Protocol. ", 1)[1].strip(),
            "batch_size": BATCH,
            "context": CONTEXT,
            "budgets": budgets,
            "seeds": SEEDS,
            "learning_rates": rates,
            "weight_decay": WEIGHT_DECAY,
            "sizes": sizes,
            "held_out_windows": WINDOWS,
            "tuning_runs": tuned,
            "runs": chosen + repeated,
            "step_ms": step_ms,
            "load_average": [load_at_start, os.getloadavg()[0]],
        },
        checkpoints,
    )
