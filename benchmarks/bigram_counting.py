"""Counting every word bigram of Shakespeare: mini_llm versus a plain ``collections.Counter`` loop.

Both start from the same list of word strings and end with the count of every distinct bigram.
mini_llm encodes the words to ids (that time is included) and counts with one ``np.unique``;
the peer walks the pairs in Python. Run:  .venv/bin/python benchmarks/bigram_counting.py
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time

import numpy as np

from mini_llm.corpus import load_text
from mini_llm.ngram import count_ngrams
from mini_llm.vocab import Vocabulary, word_tokens


def count_with_counter_loop(words: list[str]) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for pair in zip(words, words[1:]):
        counts[pair] += 1
    return counts


def count_with_counter_zip(words: list[str]) -> collections.Counter:
    return collections.Counter(zip(words, words[1:]))


def count_with_mini_llm(words: list[str], vocab: Vocabulary) -> tuple[np.ndarray, np.ndarray]:
    return count_ngrams(vocab.encode(words), 2, len(vocab))


def median_seconds(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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

    peers = {
        "Counter loop (peer)": lambda: count_with_counter_loop(words),
        "Counter(zip) (peer)": lambda: count_with_counter_zip(words),
        "mini_llm count_ngrams": lambda: count_with_mini_llm(words, vocab),
    }
    medians = {name: median_seconds(fn, args.repeats) for name, fn in peers.items()}
    print(f"{len(words):,} words, {len(vocab):,} word types, {len(grams):,} distinct bigrams; "
          f"median of {args.repeats} runs")
    for name, seconds in medians.items():
        print(f"  {name:<24} {seconds * 1000:8.1f} ms")
    ours = medians["mini_llm count_ngrams"]
    print(f"speed-up vs Counter loop: {medians['Counter loop (peer)'] / ours:.2f}x; "
          f"vs Counter(zip): {medians['Counter(zip) (peer)'] / ours:.2f}x")


if __name__ == "__main__":
    main()
