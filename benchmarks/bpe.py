"""Byte-level BPE on the Shakespeare corpus: mini_llm.bpe versus Hugging Face ``tokenizers``
(Rust) and versus the naive algorithm, side by side in one run.

* training to a vocabulary of 4,096 tokens: ``BPETokenizer.train`` on the corpus text against
  ``tokenizers``' ``BpeTrainer`` (byte-level pre-tokenizer, the same regular expression) on the
  38 plays, timed in interleaved rounds, medians;
* encoding the whole corpus with a fresh tokenizer (empty encode cache) against
  ``Tokenizer.encode_batch`` over the plays (the library's parallel path);
* the naive algorithm, ``mini_llm.bpe.train_bpe``, which recounts every pair after every merge:
  timed for a few merges on a prefix, and extrapolated per merge and per id to the full
  corpus, both as if every merge saw the starting number of ids and with the number of ids
  after each merge (measured by encoding a sample with the first merges), which is what the
  naive loop would really process.

Run:  .venv/bin/python benchmarks/bpe.py
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
import torch
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from mini_llm.bpe import train_bpe
from mini_llm.bpe_fast import BPETokenizer
from mini_llm.corpus import load_corpus


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def library_trainer(vocab_size: int) -> tuple[Tokenizer, trainers.BpeTrainer]:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    return tokenizer, trainer


def timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds (medians)")
    parser.add_argument("--naive-prefix", type=int, default=200_000, help="characters")
    parser.add_argument("--naive-merges", type=int, default=10)
    parser.add_argument(
        "--plays", type=int, default=38, help="the first N plays only (a quick check of the script)"
    )
    args = parser.parse_args()

    plays = load_corpus("shakespeare")[: args.plays]
    text = "\n".join(plays)
    print(
        f"CPU: {cpu_model()}, {os.cpu_count()} cores, capability "
        f"{torch.backends.cpu.get_cpu_capability()}, load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(f"corpus: {len(text):,} characters, vocabulary {args.vocab_size:,}")

    times: dict[str, list[float]] = {
        name: [] for name in ("train ours", "train tokenizers", "encode ours", "encode tokenizers")
    }
    for _ in range(args.repeats):
        seconds, ours = timed(BPETokenizer.train, text, args.vocab_size)
        times["train ours"].append(seconds)
        library, trainer = library_trainer(args.vocab_size)
        seconds, _ = timed(library.train_from_iterator, plays, trainer)
        times["train tokenizers"].append(seconds)
        fresh = BPETokenizer(ours.merges)  # an empty encode cache
        seconds, ids = timed(fresh.encode, text)
        times["encode ours"].append(seconds)
        seconds, batch = timed(library.encode_batch, plays)
        times["encode tokenizers"].append(seconds)
    medians = {name: statistics.median(values) for name, values in times.items()}
    library_ids = sum(len(encoding.ids) for encoding in batch)
    print(
        f"characters per token: ours {len(text) / len(ids):.4f}, tokenizers "
        f"{len(text) / library_ids:.4f}; ours round-trips: {fresh.decode(ids) == text}"
    )

    prefix = text[: args.naive_prefix]
    prefix_ids = len(prefix.encode("utf-8"))
    naive_s, naive_merges = timed(train_bpe, prefix, 256 + args.naive_merges)
    assert naive_merges == BPETokenizer.train(prefix, 256 + args.naive_merges).merges
    per_id_merge = naive_s / (args.naive_merges * prefix_ids)
    n_merges = args.vocab_size - 256
    flat = per_id_merge * len(text.encode("utf-8")) * n_merges
    # ids of the full text after k merges, from a sample encoded with the first k merges
    sample = text[:500_000]
    ks = np.linspace(0, n_merges, 9).astype(int)
    merges = list(ours.merges.items())
    share = [
        len(BPETokenizer(dict(merges[:k])).encode(sample)) / len(sample.encode("utf-8")) for k in ks
    ]
    ids_after = np.interp(np.arange(n_merges), ks, share) * len(text.encode("utf-8"))
    shrinking = per_id_merge * ids_after.sum()

    rows = [
        ("train", medians["train ours"], medians["train tokenizers"]),
        ("encode", medians["encode ours"], medians["encode tokenizers"]),
    ]
    print(f"\nmedians of {args.repeats} interleaved rounds")
    print("| task | mini_llm.bpe | tokenizers (Rust) | ratio |")
    print("|---|---|---|---|")
    for task, ours_s, theirs_s in rows:
        print(f"| {task} | {ours_s:.2f} s | {theirs_s:.2f} s | {ours_s / theirs_s:.2f}× |")
    print(
        f"\nnaive train_bpe: {args.naive_merges} merges on {prefix_ids:,} ids in "
        f"{naive_s:.2f} s = {per_id_merge * 1e9:.1f} ns per id per merge"
    )
    print(
        f"extrapolated to {n_merges:,} merges on the whole text: {flat / 3600:.1f} h if "
        f"every merge saw all {len(text.encode('utf-8')):,} ids, {shrinking / 3600:.1f} h "
        "with the ids left after each merge"
    )
    print(
        f"speed-up of BPETokenizer.train over the naive loop: {flat / medians['train ours']:,.0f}"
        f"× (flat) / {shrinking / medians['train ours']:,.0f}× (shrinking)"
    )


if __name__ == "__main__":
    main()
