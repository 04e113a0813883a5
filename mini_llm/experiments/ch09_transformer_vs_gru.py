"""Chapter 9's fair comparison: chapter 7's GRU encoder-decoder against the Transformer, at two
sizes, with the same budget, three seeds each.

Every model reads the same stream of training pairs for a given seed (chapter 7's budget:
``STEPS`` AdamW steps of ``BATCH`` fresh pairs, chapter 7's schedule with its warm-up) and is
scored on the same test numbers, which are disjoint from training by construction
(:func:`mini_llm.seq2seq.is_held_out`). The models come in two sizes: about 61 k parameters
(a GRU of width 44 against Transformers of width 32) and about 130 k (chapter 7's GRU of width
64 against Transformers of width 48), the Transformers post-LN (the paper's arrangement) and
pre-LN. Training runs on one CPU thread (``run`` sets ``torch.set_num_threads(1)``), so the
seconds per run compare; each run's CPU time is kept beside its wall-clock time, since on a
machine shared with other work the second also counts the waits.

The first seed's matched pre-LN Transformer is kept as a float16 checkpoint; chapter 9's page
reads its cross-attention from it.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from mini_llm.engine.recorded import load_weights, save_weights
from mini_llm.engine.train import TrainConfig, train
from mini_llm.experiments import Recorded
from mini_llm.seq2seq import (
    BOS,
    EOS,
    Seq2Seq,
    encode_batch,
    exact_match,
    number_pairs,
    vocabularies,
)
from mini_llm.transformer import Transformer

NAME = "ch09-transformer-vs-gru"
SUMMARY = (
    "chapter 9: chapter 7's GRU against post-LN and pre-LN Transformers at two sizes, 3 seeds each"
)

STEPS, BATCH, SEEDS = 400, 64, (0, 1, 2)  # chapter 7's budget
SCHEDULE = {"learning_rate": 3e-3, "min_lr": 3e-4, "warmup_iters": 20}  # chapter 7's
TEST_PAIRS, TEST_SEED = 1000, 99
HEADS, LAYERS = 4, 2
MODELS = {
    # key: (family, width, norm_first)
    "gru-44": ("GRU + attention", 44, None),
    "post-32": ("Transformer", 32, False),
    "pre-32": ("Transformer", 32, True),
    "gru-64": ("GRU + attention", 64, None),
    "post-48": ("Transformer", 48, False),
    "pre-48": ("Transformer", 48, True),
}
CHECKPOINTED = "pre-48"  # the matched pre-LN Transformer, first seed
TINY = {"steps": 3, "batch": 8, "seeds": (0, 1), "test_pairs": 24}


def build(key: str, seed: int):
    """The model ``key`` of :data:`MODELS`, initialised from ``seed``."""
    family, width, norm_first = MODELS[key]
    source, target = vocabularies()
    torch.manual_seed(seed)
    if family == "GRU + attention":
        return Seq2Seq(len(source), len(target), target.stoi[BOS], dim=width)
    return Transformer(
        len(source),
        len(target),
        target.stoi[BOS],
        d_model=width,
        n_heads=HEADS,
        n_layers=LAYERS,
        norm_first=norm_first,
    )


def subsets_of(pairs) -> dict[str, list]:
    """The test pairs, all of them and by the length of the number in words (a length that
    none has, in a tiny run, is left out)."""
    longest = max(len(words) for words, _ in pairs)
    buckets = {"1–3 words": (1, 3), "4–6 words": (4, 6), f"7–{longest} words": (7, longest)}
    subsets = {
        name: [p for p in pairs if low <= len(p[0]) <= high]
        for name, (low, high) in buckets.items()
    }
    return {"all": pairs} | {name: chosen for name, chosen in subsets.items() if chosen}


def scores(model, subsets) -> dict[str, float]:
    """Exact match of greedy decoding on each subset of the test pairs."""
    source, target = vocabularies()
    eos = target.stoi[EOS]
    model.eval()
    result = {}
    for name, pairs in subsets.items():
        src, tgt = encode_batch(pairs, source, target)
        result[name] = exact_match(model.translate(src, eos)[0], tgt, eos)
    return result


def run(out_dir, tiny: bool = False) -> Recorded:
    torch.set_num_threads(1)  # one thread: the seconds per run compare, and are the page's
    steps, batch, seeds, test_pairs = (
        (TINY["steps"], TINY["batch"], TINY["seeds"], TINY["test_pairs"])
        if tiny
        else (STEPS, BATCH, SEEDS, TEST_PAIRS)
    )
    out_dir = Path(out_dir)
    source, target = vocabularies()
    config = TrainConfig(
        max_iters=steps,
        **SCHEDULE,
        weight_decay=0.0,
        eval_interval=0,
        progress=False,
        device="cpu",
    )
    subsets = subsets_of(
        number_pairs(test_pairs, np.random.default_rng(TEST_SEED), "test", distinct=True)
    )
    test_numbers = {int("".join(digits)) for _, digits in subsets["all"]}
    trained_numbers: set[int] = set()
    models, checkpoints, checkpoint_scores = {}, {}, None
    for key, (family, width, norm_first) in MODELS.items():
        runs = []
        for seed in seeds:
            model = build(key, seed)
            rng = np.random.default_rng(seed)  # the same stream of pairs for every model

            def batches(rng=rng):
                pairs = number_pairs(batch, rng, "train")
                trained_numbers.update(int("".join(digits)) for _, digits in pairs)
                return encode_batch(pairs, source, target)

            started, cpu_started = time.perf_counter(), time.process_time()
            result = train(model, batches, config)
            seconds = time.perf_counter() - started
            cpu_seconds = time.process_time() - cpu_started
            runs.append(
                {
                    "seed": seed,
                    "seconds": round(seconds, 2),
                    "cpu_seconds": round(cpu_seconds, 2),
                    "exact_match": scores(model, subsets),
                    "losses": [round(loss, 5) for _, loss in result.train_losses],
                }
            )
            if key == CHECKPOINTED and seed == seeds[0]:
                checkpoints["model"] = f"{NAME}.safetensors"
                save_weights(model, out_dir / checkpoints["model"])
                checkpoint_scores = scores(
                    load_weights(build(key, seed), out_dir / checkpoints["model"]), subsets
                )
        models[key] = {
            "family": family,
            "width": width,
            "norm_first": norm_first,
            "parameters": sum(p.numel() for p in model.parameters()),
            "runs": runs,
        }
    results = {
        "settings": {
            "steps": steps,
            "batch": batch,
            "seeds": list(seeds),
            **SCHEDULE,
            "weight_decay": 0.0,
            "heads": HEADS,
            "layers": LAYERS,
            "test_seed": TEST_SEED,
            "threads": torch.get_num_threads(),
        },
        "data": {
            "test_numbers": len(test_numbers),
            "subsets": {name: len(pairs) for name, pairs in subsets.items()},
            "trained_numbers": len(trained_numbers),
            "overlap": len(test_numbers & trained_numbers),
        },
        "models": models,
        "checkpoint": {"model": CHECKPOINTED, "seed": seeds[0], "exact_match": checkpoint_scores},
    }
    return Recorded(results, checkpoints)
