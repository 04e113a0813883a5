"""Counting every word bigram of Shakespeare: mini_llm versus a plain ``collections.Counter`` loop.

Both start from the same list of word strings and end with the count of every distinct bigram.
mini_llm encodes the words to ids (that time is included) and counts with one ``np.unique``;
the peer walks the pairs in Python. Run:  .venv/bin/python benchmarks/bigram_counting.py
"""

from __future__ import annotations

import argparse
import collections
import itertools
import statistics
import time

import numpy as np

from mini_llm.corpus import load_text
from mini_llm.ngram import count_ngrams
from mini_llm.vocab import Vocabulary, word_tokens


def count_with_counter_loop(words: list[str]) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for pair in itertools.pairwise(words):
        counts[pair] += 1
    return counts


def count_with_counter_zip(words: list[str]) -> collections.Counter:
    return collections.Counter(itertools.pairwise(words))


def count_with_mini_llm(words: list[str], vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    return count_ngrams(vocab.encode(words), 2, len(vocab))


def interleaved_medians(candidates: dict, repeats: int) -> dict[str, float]:
    """Median seconds of each candidate, timed in rounds so that machine noise hits all alike."""
    times: dict[str, list[float]] = {name: [] for name in candidates}
    for _ in range(repeats):
        for name, fn in candidates.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    words = word_tokens(load_text("shakespeare"))
    vocab = Vocabulary.from_sequences([words], specials=())
    grams, counts = count_with_mini_llm(words, vocab)
    reference = count_with_counter_zip(words)
    assert len(grams) == len(reference) and counts.sum() == len(words) - 1  # same answer
    a, b = vocab.decode(grams[np.argmax(counts)])
    assert counts.max() == reference[(a, b)]

    candidates = {
        "Counter loop (peer)": lambda: count_with_counter_loop(words),
        "Counter(zip) (peer)": lambda: count_with_counter_zip(words),
        "mini_llm count_ngrams": lambda: count_with_mini_llm(words, vocab),
    }
    medians = interleaved_medians(candidates, args.repeats)
    print(
        f"{len(words):,} words, {len(vocab):,} word types, {len(grams):,} distinct bigrams; "
        f"median of {args.repeats} runs"
    )
    for name, seconds in medians.items():
        print(f"  {name:<24} {seconds * 1000:8.1f} ms")
    ours = medians["mini_llm count_ngrams"]
    print(
        f"speed-up vs Counter loop: {medians['Counter loop (peer)'] / ours:.2f}x; "
        f"vs Counter(zip): {medians['Counter(zip) (peer)'] / ours:.2f}x"
    )


if __name__ == "__main__":
    main()
