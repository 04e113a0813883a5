"""Chapter 11's GPT trained for its whole schedule: the ``shakespeare-char-cpu`` configuration of
``mini-llm train``, 2,000 steps on one CPU thread, kept as a float16 checkpoint that the page
samples from and opens up."""

from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from mini_llm.engine.configs import resolve
from mini_llm.engine.data import RandomBatches
from mini_llm.engine.recorded import load_weights, save_weights
from mini_llm.engine.train import train
from mini_llm.experiments import Recorded
from mini_llm.experiments.shakespeare import (
    bits_per_character,
    held_out_windows,
    shakespeare_splits,
)
from mini_llm.gpt import GPT, GPTConfig

NAME = "ch11-gpt-cpu"
SUMMARY = "chapter 11's shakespeare-char-cpu GPT, its whole schedule, with its checkpoint"
CONFIG = "shakespeare-char-cpu"
TINY = ["n_layer=1", "n_head=2", "n_embd=16", "max_iters=12", "warmup_iters=2",
        "eval_interval=6", "eval_iters=2"]  # fmt: skip
PROMPTS = ["ROMEO:\n", "First Citizen:\n", "KING HENRY:\n"]
SAMPLE_SETTINGS = {"max_new_tokens": 400, "temperature": 0.8, "top_k": None, "top_p": 0.95}
SEED = 0


def trained_model(results: dict, checkpoint: str | Path) -> GPT:
    """The recorded GPT, rebuilt from its recorded shape and loaded from ``checkpoint``."""
    model = GPT(GPTConfig(**results["model_config"]))
    return load_weights(model, checkpoint).eval()


def samples(model: GPT, tokenizer, seed: int = SEED) -> list[dict]:
    """One seeded sample per prompt, with the settings that made it."""
    out = []
    for number, prompt in enumerate(PROMPTS):
        generator = torch.Generator().manual_seed(seed + number)
        ids = torch.tensor([tokenizer.encode(prompt)])
        tokens = model.generate(ids, generator=generator, **SAMPLE_SETTINGS)[0].tolist()
        out.append({"prompt": prompt, "seed": seed + number, "text": tokenizer.decode(tokens)})
    return out


def run(out_dir: str | Path, tiny: bool = False) -> Recorded:
    out_dir = Path(out_dir)
    tokenizer, train_ids, val_ids = shakespeare_splits()
    windows = held_out_windows(val_ids)
    config = resolve(CONFIG, TINY if tiny else [])
    model_config = GPTConfig(vocab_size=tokenizer.vocab_size, **config.model)
    train_config = replace(config.train, device="cpu", threads=1, seed=SEED, progress=not tiny)
    batch, context = config.data["batch_size"], model_config.block_size
    torch.manual_seed(SEED)
    model = GPT(model_config)
    started = time.perf_counter()
    result = train(
        model,
        RandomBatches(train_ids, context, batch, seed=SEED),
        train_config,
        val_batches=RandomBatches(val_ids, context, batch, seed=SEED + 1),
    )
    train_seconds = time.perf_counter() - started
    checkpoint = f"{NAME}.safetensors"
    size = save_weights(model, out_dir / checkpoint)
    results = {
        "config": CONFIG,
        "overrides": TINY if tiny else [],
        "model_config": asdict(model_config),
        "train_config": {k: v for k, v in asdict(train_config).items() if k != "out_dir"},
        "batch_size": batch,
        "parameters": model.num_parameters(),
        "steps": train_config.max_iters,
        "tokens_seen": train_config.max_iters * batch * context,
        "train_seconds": round(train_seconds, 1),
        "train_losses": [[step, round(loss, 4)] for step, loss in result.train_losses],
        "val_losses": [[step, round(loss, 4)] for step, loss in result.val_losses],
        "checkpoint_bytes": size,
    }
    loaded = trained_model(results, out_dir / checkpoint)  # the float16 weights, as pages see them
    results["held_out_windows"] = list(windows.shape)
    results["bits_per_character"] = bits_per_character(loaded, windows)
    results["sample_settings"] = SAMPLE_SETTINGS
    results["samples"] = samples(loaded, tokenizer)
    return Recorded(results, {"model": checkpoint})
