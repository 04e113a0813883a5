"""Chapter 10 -- Tokenization: byte-level byte-pair encoding (BPE), the plain algorithm.

The alphabet is the 256 byte values of UTF-8, so every string has an encoding. Training
repeats one step: count every pair of adjacent ids, give the most frequent pair a new id
(ties: the smallest pair, so the result never depends on dictionary order), merge it.
Pairs are counted inside the chunks of ``SPLIT_PATTERN`` only: merges stay inside words.

This file is the algorithm as the chapter explains it, recounting every pair after every
merge: obviously correct, and slow. ``mini_llm.bpe_fast`` learns the same merges fast.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from itertools import pairwise

import regex

from mini_llm.tokenizer import OutOfVocabularyError

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


def pretokenize(text: str) -> list[str]:
    """The chunks of ``text`` that BPE works inside; joined, they give ``text`` back."""
    return _SPLIT.findall(text)


def to_bytes(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates (not valid Unicode) pass through, so
    they too come back from :func:`decode`."""
    return text.encode("utf-8", "surrogatepass")


def from_bytes(data: bytes) -> str:
    """The text of ``data``; bytes that are not UTF-8 (from ids a model sampled) become
    U+FFFD."""
    try:
        return data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return data.decode("utf-8", "replace")


def count_pairs(ids: Sequence[int]) -> dict[tuple[int, int], int]:
    """How often each pair of adjacent ids occurs ("aaa" has (a, a) twice)."""
    return dict(Counter(pairwise(ids)))


def merge(ids: Sequence[int], pair: tuple[int, int], new_id: int) -> list[int]:
    """``ids`` with each ``pair`` replaced by ``new_id``, left to right, so that in
    "aaa" only the first two merge: an id is never used twice."""
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
    """The merges ``{(a, b): new_id}``, in the order learned, that grow the 256 bytes to
    ``vocab_size`` tokens (fewer if no pair is left)."""
    if vocab_size < N_BYTES:
        raise ValueError(f"vocab_size must be at least {N_BYTES}, got {vocab_size}")
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


def encode_chunk(ids: list[int], merges: dict[tuple[int, int], int]) -> list[int]:
    """One chunk's ids, merged in the order the merges were learned (earliest first)."""
    while len(ids) > 1:
        pair = min(pairwise(ids), key=lambda p: merges.get(p, float("inf")))
        if pair not in merges:
            break
        ids = merge(ids, pair, merges[pair])
    return ids


def encode(text: str, merges: dict[tuple[int, int], int]) -> list[int]:
    """Token ids of ``text``: each chunk's bytes, merged by :func:`encode_chunk`."""
    ids = []
    for chunk in pretokenize(text):
        ids += encode_chunk(list(to_bytes(chunk)), merges)
    return ids


def token_bytes(merges: dict[tuple[int, int], int]) -> list[bytes]:
    """The bytes of each id: the 256 single bytes, then each merge's parts joined."""
    table = [bytes([b]) for b in range(N_BYTES)]
    for (a, b), new_id in merges.items():
        if new_id != len(table):
            raise ValueError(f"merge {(a, b)} -> {new_id}: ids must count up from 256")
        table.append(table[a] + table[b])
    return table


def check_ids(ids: list[int], vocab_size: int) -> None:
    """Raise :class:`OutOfVocabularyError` for an id outside ``0…vocab_size - 1``."""
    bad = [i for i in ids if not 0 <= i < vocab_size]
    if bad:
        raise OutOfVocabularyError(
            f"token id {bad[0]} is outside the vocabulary (0…{vocab_size - 1})"
        )


def decode(ids: Iterable[int], merges: dict[tuple[int, int], int]) -> str:
    """The text of ``ids``: the bytes of each token, joined, then read as UTF-8 (a
    character's bytes may be split across tokens)."""
    table = token_bytes(merges)
    ids = [int(i) for i in ids]
    check_ids(ids, len(table))
    return from_bytes(b"".join(table[i] for i in ids))
