"""Byte-level byte-pair encoding (BPE): subword tokens learned from the text itself.

The base alphabet is the 256 byte values of UTF-8, so every string has an encoding and nothing is
ever out of vocabulary. Training repeats one step: find the most frequent pair of adjacent
tokens and give it a new id. Text is first cut into chunks (a space and a word, a run of digits,
punctuation, white space) by ``SPLIT_PATTERN``; pairs never cross a chunk boundary, so "e t" in
"the tree" cannot become a token and the merges spend the vocabulary on pieces of words.

Ties: among pairs with the same count, the one with the smallest ids ``(a, b)`` is merged
first, in both implementations, so they learn identical merges.

Two implementations live here:

* the plain functions ``count_pairs``, ``merge``, ``train_bpe``, ``encode``, ``decode``: the
  algorithm as the chapter explains it (and the exercise asks for), recounting every pair after
  every merge. Obviously correct, and slow;
* :class:`BPETokenizer`: the same merges, fast. Training counts each distinct chunk once
  (with its frequency), keeps the pair counts up to date after a merge by touching only the
  chunks that contain the merged pair, and finds the best pair with a heap; encoding caches the
  ids of every chunk it has seen.

Lone surrogates (``"\\ud800"``, not valid Unicode) are encoded with Python's ``surrogatepass``
rule, so even they come back exactly; ids that do not form valid UTF-8 (possible only for ids
that did not come from ``encode``, e.g. sampled by a model) decode to U+FFFD.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise

import regex

from mini_llm.tokenizer import OutOfVocabularyError, Tokenizer

SPLIT_PATTERN = (
    r"'(?:[sdmt]|ll|ve|re)"  # English contractions: 's 't 'll 've 're 'd 'm
    r"| ?\p{L}+"  # a word, with the space before it
    r"| ?\p{N}+"  # a number, with the space before it
    r"| ?[^\s\p{L}\p{N}]+"  # punctuation, with the space before it
    r"|\s+(?!\S)"  # white space, leaving the last space to the next word
    r"|\s+"  # white space at the end of the text
)
"""GPT-2's pre-tokenization rule: where the text may be cut into chunks before BPE."""

_SPLIT = regex.compile(SPLIT_PATTERN)
N_BYTES = 256
_NEVER = float("inf")  # the rank of a pair that was never merged


def pretokenize(text: str) -> list[str]:
    """The chunks of ``text`` that BPE works inside; joined, they give ``text`` back."""
    return _SPLIT.findall(text)


def to_bytes(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates pass through (see the module docstring)."""
    return text.encode("utf-8", "surrogatepass")


def from_bytes(data: bytes) -> str:
    """The text of ``data``; byte sequences that are not UTF-8 become U+FFFD."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


# ------------------------------------------------------------------ the plain algorithm
def count_pairs(ids: Sequence[int]) -> dict[tuple[int, int], int]:
    """How often each pair of adjacent ids occurs in ``ids`` (overlapping pairs count: "aaa"
    has the pair (a, a) twice)."""
    return dict(Counter(pairwise(ids)))


def merge(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``ids`` with every occurrence of ``pair`` replaced by ``new_id``, left to right (in
    "aaa" only the first two merge: a token is never used twice)."""
    out = []
    i = 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def train_bpe(text: str, vocab_size: int) -> dict[tuple[int, int], int]:
    """The merges ``{(a, b): new_id}`` (in the order learned) that grow the 256 bytes to
    ``vocab_size`` tokens: each step merges the most frequent pair of adjacent ids (ties: the
    smallest pair), counted inside the chunks of :func:`pretokenize`."""
    if vocab_size < N_BYTES:
        raise ValueError(f"vocab_size must be at least {N_BYTES} (the bytes), got {vocab_size}")
    chunks = [list(to_bytes(chunk)) for chunk in pretokenize(text)]
    merges: dict[tuple[int, int], int] = {}
    for new_id in range(N_BYTES, vocab_size):
        counts: Counter = Counter()
        for chunk in chunks:
            counts.update(count_pairs(chunk))
        if not counts:
            break  # every chunk is one token: nothing left to merge
        best = min(counts, key=lambda pair: (-counts[pair], pair))
        merges[best] = new_id
        chunks = [merge(chunk, best, new_id) for chunk in chunks]
    return merges


def _encode_chunk(ids: list[int], ranks: dict[tuple[int, int], int]) -> list[int]:
    """Apply the merges to one chunk in the order they were learned (lowest rank first)."""
    while len(ids) > 1:
        pair = min(pairwise(ids), key=lambda p: ranks.get(p, _NEVER))
        if pair not in ranks:
            break
        ids = merge(ids, pair, ranks[pair])
    return ids


def encode(text: str, merges: dict[tuple[int, int], int]) -> list[int]:
    """Token ids of ``text``: its chunks' bytes, merged in the order the merges were learned."""
    return [i for chunk in pretokenize(text) for i in _encode_chunk(list(to_bytes(chunk)), merges)]


def token_bytes(merges: dict[tuple[int, int], int]) -> list[bytes]:
    """The bytes each id stands for: the 256 single bytes, then each merge's two parts joined."""
    table = [bytes([b]) for b in range(N_BYTES)]
    for (a, b), new_id in merges.items():
        if new_id != len(table):
            raise ValueError(f"merge {(a, b)} -> {new_id}: ids must count up from {N_BYTES}")
        table.append(table[a] + table[b])
    return table


def decode(ids: Iterable[int], merges: dict[tuple[int, int], int]) -> str:
    """The text of ``ids``: the bytes of each token, joined and read as UTF-8."""
    table = token_bytes(merges)
    ids = [int(i) for i in ids]
    _check_ids(ids, len(table))
    return from_bytes(b"".join(table[i] for i in ids))


def _check_ids(ids: list[int], vocab_size: int) -> None:
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise OutOfVocabularyError(
            f"token id {bad[0]} is outside the vocabulary (0…{vocab_size - 1})"
        )


# ------------------------------------------------------------------ the fast tokenizer
class _PairCounts:
    """Pair counts over distinct chunks, kept exact through merges, with a heap for the best.

    ``where[pair]`` lists the chunks that may contain ``pair`` (a superset: chunks are not
    removed when a merge takes the pair away, they are skipped when visited). The heap holds
    ``(-count, pair)`` entries that may be stale; a popped entry whose count is out of date is
    pushed back with the current count.
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
        """Replace ``pair`` by ``new_id`` in every chunk that has it, updating the counts."""
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
        for new in grown:  # only pairs with the new token can have grown; the rest shrank
            heapq.heappush(self.heap, (-counts[new], new))


class BPETokenizer(Tokenizer):
    """Byte-level BPE: ids 0…255 are bytes, then one id per merge, then the special tokens.

    Special tokens (e.g. ``"<|endoftext|>"``) are whole tokens that no text can produce unless
    ``encode`` is told to look for them (``specials=True``); without it their text is encoded
    like any other text, so ``decode(encode(text)) == text`` for every string.
    """

    kind = "bpe"

    def __init__(self, merges: dict[tuple[int, int], int], specials: Sequence[str] = ()):
        self.merges = {(int(a), int(b)): int(new) for (a, b), new in merges.items()}
        self.token_bytes = token_bytes(self.merges)
        first_special = len(self.token_bytes)
        self.specials = {name: first_special + i for i, name in enumerate(dict.fromkeys(specials))}
        self.token_bytes += [to_bytes(name) for name in self.specials]
        self._special_split = (
            regex.compile("(" + "|".join(map(regex.escape, self.specials)) + ")")
            if self.specials
            else None
        )
        self._cache: dict[str, list[int]] = {}

    @classmethod
    def train(cls, text: str, vocab_size: int, specials: Sequence[str] = ()) -> BPETokenizer:
        """Learn ``vocab_size - 256 - len(specials)`` merges from ``text`` (fewer if the text runs
        out of pairs): the merges :func:`train_bpe` learns, computed incrementally."""
        n_merges = vocab_size - N_BYTES - len(dict.fromkeys(specials))
        if n_merges < 0:
            raise ValueError(
                f"vocab_size {vocab_size} is below the {N_BYTES} bytes plus "
                f"{len(specials)} special tokens"
            )
        frequencies = Counter(pretokenize(text))
        pairs = _PairCounts(
            [list(to_bytes(chunk)) for chunk in frequencies], list(frequencies.values())
        )
        merges: dict[tuple[int, int], int] = {}
        for new_id in range(N_BYTES, N_BYTES + n_merges):
            best = pairs.best()
            if best is None:
                break
            merges[best] = new_id
            pairs.merge(best, new_id)
        return cls(merges, specials)

    @property
    def vocab_size(self) -> int:
        return len(self.token_bytes)

    def _encode_text(self, text: str) -> list[int]:
        ids: list[int] = []
        cache = self._cache
        for chunk in _SPLIT.findall(text):
            chunk_ids = cache.get(chunk)
            if chunk_ids is None:
                chunk_ids = cache[chunk] = _encode_chunk(list(to_bytes(chunk)), self.merges)
            ids += chunk_ids
        return ids

    def encode(self, text: str, specials: bool = False) -> list[int]:
        """Token ids of ``text``; with ``specials=True`` a special token's text becomes its id."""
        if not specials or self._special_split is None:
            return self._encode_text(text)
        ids: list[int] = []
        for i, part in enumerate(self._special_split.split(text)):
            ids += [self.specials[part]] if i % 2 else self._encode_text(part)
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids]
        _check_ids(ids, self.vocab_size)
        table = self.token_bytes
        return from_bytes(b"".join([table[i] for i in ids]))

    def token_strings(self) -> list[str]:
        """Each token as readable text (bytes that are not UTF-8 on their own as ``\\x..``)."""
        return [raw.decode("utf-8", "backslashreplace") for raw in self.token_bytes]

    def to_dict(self) -> dict:
        return {
            "pattern": SPLIT_PATTERN,
            "merges": [f"{a} {b}" for a, b in self.merges],  # "a b": ids a and b merge
            "specials": list(self.specials),
            "tokens": self.token_strings(),  # for people reading the file; not read back
        }

    @classmethod
    def from_dict(cls, data: dict) -> BPETokenizer:
        if data.get("pattern", SPLIT_PATTERN) != SPLIT_PATTERN:
            raise ValueError("the saved BPE tokenizer used another pre-tokenization pattern")
        pairs = (map(int, merge.split()) for merge in data["merges"])
        merges = {(a, b): N_BYTES + i for i, (a, b) in enumerate(pairs)}
        return cls(merges, data.get("specials", ()))
