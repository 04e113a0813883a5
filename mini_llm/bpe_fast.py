"""Chapter 10 -- Tokenization: the merges of ``mini_llm.bpe``, learned fast, and
:class:`BPETokenizer`, the tokenizer the package trains and saves.

:func:`train_bpe_fast` learns exactly the merges of the plain ``train_bpe`` (same
ties), in seconds instead of hours on the corpus: each distinct chunk is counted once,
with its frequency; a merge updates the pair counts of only the chunks that contain the
pair; a heap gives the most frequent pair. Encoding caches the ids of each chunk seen.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise

import regex

from mini_llm.bpe import (
    N_BYTES,
    SPLIT_PATTERN,
    check_ids,
    encode_chunk,
    from_bytes,
    merge,
    pretokenize,
    to_bytes,
    token_bytes,
)
from mini_llm.tokenizer import Tokenizer


class _PairCounts:
    """Pair counts over distinct chunks, kept exact through merges, and a heap of them.

    ``where[pair]`` lists the chunks that may contain ``pair`` (a superset: a chunk is
    not removed when a merge takes the pair away, it is skipped when visited). The heap
    holds ``(-count, pair)`` entries that may be stale; a popped entry whose count is
    out of date is pushed back with the current count.
    """

    def __init__(self, chunks: list[list[int]], freqs: list[int]):
        self.chunks, self.freqs = chunks, freqs
        self.counts: dict[tuple[int, int], int] = defaultdict(int)
        self.where: dict[tuple[int, int], set[int]] = defaultdict(set)
        for index, (chunk, freq) in enumerate(zip(chunks, freqs)):
            for pair in pairwise(chunk):
                self.counts[pair] += freq
                self.where[pair].add(index)
        self.heap = [(-count, pair) for pair, count in self.counts.items()]
        heapq.heapify(self.heap)

    def best(self) -> tuple[int, int] | None:
        """The most frequent pair (ties: the smallest), or None when no pair is left."""
        while self.heap:
            negative, pair = self.heap[0]
            count = self.counts.get(pair, 0)
            if count == -negative and count > 0:
                return pair
            heapq.heappop(self.heap)
            if count > 0:
                heapq.heappush(self.heap, (-count, pair))
        return None

    def merge(self, pair: tuple[int, int], new_id: int) -> None:
        """Replace ``pair`` by ``new_id`` in the chunks that have it, and the counts."""
        counts, where = self.counts, self.where
        grown = set()
        for index in where.pop(pair):
            chunk = self.chunks[index]
            merged = merge(chunk, pair, new_id)
            if len(merged) == len(chunk):
                continue  # an earlier merge already took this pair away
            freq = self.freqs[index]
            for old in pairwise(chunk):
                counts[old] -= freq
            for new in pairwise(merged):
                counts[new] += freq
                where[new].add(index)
                if new_id in new:
                    grown.add(new)
            self.chunks[index] = merged
        del counts[pair]
        for new in grown:  # only pairs with the new id can have grown; the rest shrank
            heapq.heappush(self.heap, (-counts[new], new))


def train_bpe_fast(text: str, vocab_size: int) -> dict[tuple[int, int], int]:
    """The merges that ``mini_llm.bpe.train_bpe(text, vocab_size)`` learns, in order."""
    if vocab_size < N_BYTES:
        raise ValueError(f"vocab_size must be at least {N_BYTES}, got {vocab_size}")
    frequencies = Counter(pretokenize(text))
    pairs = _PairCounts(
        [list(to_bytes(chunk)) for chunk in frequencies], list(frequencies.values())
    )
    merges: dict[tuple[int, int], int] = {}
    for new_id in range(N_BYTES, vocab_size):
        best = pairs.best()
        if best is None:
            break  # every chunk is one token: nothing left to merge
        merges[best] = new_id
        pairs.merge(best, new_id)
    return merges


class BPETokenizer(Tokenizer):
    """Byte-level BPE: ids 0…255 are bytes, then one id per merge, then special tokens.

    Special tokens (e.g. ``"<|endoftext|>"``) are whole tokens that no text can produce
    unless ``encode`` is told to look for them (``specials=True``); without it their
    text is encoded like any other, so ``decode(encode(text)) == text`` for any string.
    """

    kind = "bpe"

    def __init__(
        self,
        merges: dict[tuple[int, int], int],
        specials: Sequence[str] = (),
    ):
        self.merges = {(int(a), int(b)): int(new) for (a, b), new in merges.items()}
        self.token_bytes = token_bytes(self.merges)
        first = len(self.token_bytes)
        names = dict.fromkeys(specials)
        self.specials = {name: first + i for i, name in enumerate(names)}
        self.token_bytes += [to_bytes(name) for name in self.specials]
        self._special_split = (
            regex.compile("(" + "|".join(map(regex.escape, self.specials)) + ")")
            if self.specials
            else None
        )
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def train(
        cls,
        text: str,
        vocab_size: int,
        specials: Sequence[str] = (),
    ) -> BPETokenizer:
        """Learn ``vocab_size - 256 - len(specials)`` merges from ``text`` (fewer if the
        text runs out of pairs) with :func:`train_bpe_fast`."""
        n_specials = len(dict.fromkeys(specials))
        if vocab_size - n_specials < N_BYTES:
            raise ValueError(
                f"vocab_size {vocab_size} is below the {N_BYTES} bytes plus "
                f"{n_specials} special tokens"
            )
        return cls(train_bpe_fast(text, vocab_size - n_specials), specials)

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    def _encode_text(self, text: str) -> list[int]:
        ids: list[int] = []
        cache = self._cache
        for chunk in pretokenize(text):
            chunk_ids = cache.get(chunk)
            if chunk_ids is None:
                chunk_ids = encode_chunk(list(to_bytes(chunk)), self.merges)
                cache[chunk] = chunk_ids
            ids += chunk_ids
        return ids

    def encode(self, text: str, specials: bool = False) -> list[int]:
        """Token ids of ``text``; with ``specials=True`` a special token's text becomes
        its id."""
        if not specials or self._special_split is None:
            return self._encode_text(text)
        ids: list[int] = []
        for i, part in enumerate(self._special_split.split(text)):
            ids += [self.specials[part]] if i % 2 else self._encode_text(part)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids]
        check_ids(ids, self.vocab_size)
        table = self.token_bytes
        return from_bytes(b"".join([table[i] for i in ids]))

    def token_strings(self) -> list[str]:
        """Each token as readable text (bytes that are not UTF-8 alone as ``\\x..``)."""
        return [raw.decode("utf-8", "backslashreplace") for raw in self.token_bytes]

    def to_dict(self) -> dict:
        return {
            "pattern": SPLIT_PATTERN,
            "merges": [f"{a} {b}" for a, b in self.merges],  # "a b": ids a and b merge
            "specials": list(self.specials),
            "tokens": self.token_strings(),  # for people to read; not read back
        }

    @classmethod
    def from_dict(cls, data: dict) -> BPETokenizer:
        pattern = data.get("pattern", SPLIT_PATTERN)
        if pattern != SPLIT_PATTERN:
            raise ValueError(f"made with another pre-tokenization pattern: {pattern}")
        pairs = (map(int, line.split()) for line in data["merges"])
        merges = {(a, b): N_BYTES + i for i, (a, b) in enumerate(pairs)}
        return cls(merges, data.get("specials", ()))
