"""Known-buggy answers to the ch10_tokenization exercise: mistakes learners really make.

Same layout as ``ch09_transformer.py``: each function carries the name of the exercise part it
answers and is registered in ``BUGS[name]`` with a one-line description; the hidden tests of the
notebook must fail every one of them while the reference passes. Among them are the mistakes
issue 12 lists: overlapping pairs in "aaa" (counted once, or merged twice), merging by frequency
instead of merge rank when encoding, splitting multi-byte UTF-8 characters wrongly (``ord``
instead of bytes, decoding token by token) and forgetting the pre-tokenization boundaries.
``ALTERNATIVES`` (at the end) holds correct answers written differently, which the hidden tests
must accept.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

from mini_llm import bpe
from mini_llm.bpe import pretokenize

from ._registry import new_registry

REFERENCE = ("mini_llm.bpe",)
"""the mini_llm modules that hold the reference of each graded part"""

BUGS, ALTERNATIVES, bug, correct = new_registry()


# The bugs of a later part make their mistake and call these for the earlier parts: when an
# answer is graded, the package's count_pairs and merge cannot be called from it.


def _right_count_pairs(ids):
    """The right count_pairs, written here."""
    return dict(Counter(itertools.pairwise(ids)))


def _right_merge(ids, pair, new_id):
    """The right merge, written here."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


# ----------------------------------------------------------------------------------- count_pairs


@bug("count_pairs", "no_overlap", "skips ahead after a match: 'aaa' counts (a, a) once")
def _(ids):
    counts = {}
    i = 0
    while i + 1 < len(ids):
        pair = (ids[i], ids[i + 1])
        counts[pair] = counts.get(pair, 0) + 1
        i += 2 if pair[0] == pair[1] else 1
    return counts


@bug("count_pairs", "drops_last_pair", "range(len(ids) - 2): the last pair is never counted")
def _(ids):
    counts = {}
    for i in range(len(ids) - 2):
        pair = (ids[i], ids[i + 1])
        counts[pair] = counts.get(pair, 0) + 1
    return counts


@bug("count_pairs", "presence_not_count", "records that a pair occurs (1), not how often")
def _(ids):
    return dict.fromkeys(itertools.pairwise(ids), 1)


# ----------------------------------------------------------------------------------------- merge


@bug("merge", "overlapping", "steps one position after a match: 'aaa' becomes (aa, aa)")
def _(ids, pair, new_id):
    out = []
    for i in range(len(ids)):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
        elif not (i > 0 and (ids[i - 1], ids[i]) == tuple(pair)):
            out.append(ids[i])
    return out


@bug("merge", "drops_the_tail", "loops to len(ids) - 1 and forgets an unmerged last token")
def _(ids, pair, new_id):
    out = []
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


@bug("merge", "first_only", "replaces only the first occurrence of the pair")
def _(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == tuple(pair):
            return [*ids[:i], new_id, *ids[i + 2 :]]
    return list(ids)


@bug("merge", "in_place", "changes the caller's list while merging")
def _(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == tuple(pair):
            ids[i : i + 2] = [new_id]
        i += 1
    return ids


# ------------------------------------------------------------------------------------- train_bpe


def _train(chunks, vocab_size, pick=None, add=True, first_id=256, minimum=256, least=1):
    """The training loop, with the mistake passed in: how the best pair is picked, whether the
    counts of chunks add up, the first new id, the smallest vocab_size accepted, the
    ``least`` count a pair must have to be merged."""
    if vocab_size < minimum:
        raise ValueError("vocab_size must be at least 256")
    merges = {}
    for new_id in range(first_id, vocab_size + first_id - 256):
        counts: dict = {}
        for chunk in chunks:
            for pair, count in _right_count_pairs(chunk).items():
                counts[pair] = counts.get(pair, 0) + count if add else count
        if not counts:
            break
        best = (pick or (lambda c: min(c, key=lambda p: (-c[p], p))))(counts)
        if counts[best] < least:
            break
        merges[best] = new_id
        chunks = [_right_merge(chunk, best, new_id) for chunk in chunks]
    return merges


def _byte_chunks(text):
    return [list(chunk.encode("utf-8")) for chunk in pretokenize(text)]


def _bpe(text, vocab_size, *, chunks_of=_byte_chunks, **mistake):
    """``_train`` on the chunks ``chunks_of(text)`` (the UTF-8 bytes of each pre-token)."""
    return _train(chunks_of(text), vocab_size, **mistake)


_bpe_bug = bug.variants("train_bpe", _bpe, like=bpe.train_bpe)
_bpe_bug(
    "no_pretokenization",
    "counts pairs over the whole text: merges cross chunks",
    chunks_of=lambda text: [list(text.encode("utf-8"))],
)
_bpe_bug(
    "ord_not_bytes",
    "[ord(c) for c in chunk]: 'é' is 233, not the bytes 195 169",
    chunks_of=lambda text: [[ord(c) for c in chunk] for chunk in pretokenize(text)],
)
_bpe_bug(
    "first_seen_tie",
    "max(counts, key=counts.get): a tie goes to the pair seen first",
    pick=lambda counts: max(counts, key=counts.get),
)
_bpe_bug("counts_overwritten", "counts.update(count_pairs(chunk)): the last chunk wins", add=False)
_bpe_bug("ids_from_255", "the first new id is 255, which is already a byte", first_id=255)


# ---------------------------------------------------------------------------------------- encode


def _merge_by_rank(ids, merges):
    while len(ids) > 1:
        ranked = [pair for pair in itertools.pairwise(ids) if pair in merges]
        if not ranked:
            break
        first = min(ranked, key=merges.get)
        ids = _right_merge(ids, first, merges[first])
    return ids


def _merge_by_frequency(ids, merges):
    """The learned pair most frequent in ``ids`` merged first, again and again."""
    while True:
        counts = Counter(pair for pair in itertools.pairwise(ids) if pair in merges)
        if not counts:
            return ids
        best = max(counts, key=counts.get)
        ids = _right_merge(ids, best, merges[best])


def _merge_once(ids, merges):
    """One round: each learned pair of ``ids`` merged once, in the learned order."""
    for pair in sorted(set(itertools.pairwise(ids)) & set(merges), key=merges.get):
        ids = _right_merge(ids, pair, merges[pair])
    return ids


def _encode(
    text,
    merges,
    *,
    chunks=pretokenize,
    ids_of=lambda chunk: list(chunk.encode("utf-8")),
    merged=_merge_by_rank,
):
    """The right encoding, in steps a bug changes one of: the ``chunks`` of the text, the
    ``ids_of`` a chunk and how they are ``merged``."""
    return [i for chunk in chunks(text) for i in merged(ids_of(chunk), merges)]


_encode_bug = bug.variants("encode", _encode, like=bpe.encode)
_encode_bug(
    "frequency_order",
    "merges the most frequent pair of the text, not the first learned",
    merged=_merge_by_frequency,
)
_encode_bug(
    "no_pretokenization",
    "merges the whole text's bytes: merges apply across chunks",
    chunks=lambda text: [text],
)
_encode_bug(
    "ord_not_bytes",
    "ids are ord() of the characters, not their UTF-8 bytes",
    ids_of=lambda chunk: list(map(ord, chunk)),
)
_encode_bug(
    "one_pass",
    "stops after one round of merges: a token made of merged tokens is missed",
    merged=_merge_once,
)


# ---------------------------------------------------------------------------------------- decode


def _table(merges, swap=False):
    table = [bytes([b]) for b in range(256)]
    for a, b in merges:
        table.append(table[b] + table[a] if swap else table[a] + table[b])
    return table


def _checked(ids, table):
    ids = [int(i) for i in ids]
    if any(not 0 <= i < len(table) for i in ids):
        raise ValueError("token id outside the vocabulary")
    return ids


@bug("decode", "token_by_token", "decodes each token's bytes on its own: split characters break")
def _(ids, merges):
    table = _table(merges)
    return "".join(table[i].decode("utf-8", errors="replace") for i in _checked(ids, table))


@bug("decode", "chr_not_bytes", "chr(id) for the byte ids: code points, not UTF-8 bytes")
def _(ids, merges):
    table = _table(merges)
    return "".join(
        chr(i) if i < 256 else table[i].decode("utf-8", errors="replace")
        for i in _checked(ids, table)
    )


def _decode(ids, merges, *, swap=False, errors="replace"):
    """The right text; knobs: a merged token's parts ``swap``ped, and the ``errors`` mode of
    the UTF-8 decoding."""
    table = _table(merges, swap=swap)
    return b"".join(table[i] for i in _checked(ids, table)).decode("utf-8", errors=errors)


_decode_bug = bug.variants("decode", _decode, like=bpe.decode)
_decode_bug(
    "parts_swapped",
    "a merged token's bytes are its second part's, then its first's",
    swap=True,
)
_decode_bug(
    "ignores_bad_bytes",
    "decodes with errors='ignore': an invalid byte silently disappears",
    errors="ignore",
)


# --------------------------------------------------------- issue 31: mistakes the old tests missed


@bug(
    "count_pairs",
    "pops_the_list",
    "pops ids off the caller's list as it counts: the list ends empty",
)
def _(ids):
    counts = {}
    while len(ids) > 1:
        first = ids.pop(0)
        pair = (first, ids[0])
        counts[pair] = counts.get(pair, 0) + 1
    return counts


@bug("count_pairs", "byte_table", "a 256 x 256 table of counts: merged ids above 255 raise")
def _(ids):
    import numpy as np

    table = np.zeros((256, 256), dtype=np.int64)
    for a, b in itertools.pairwise(ids):
        table[a, b] += 1
    return {(int(a), int(b)): int(table[a, b]) for a, b in zip(*np.nonzero(table))}


@bug("merge", "right_to_left", "scans from the end: [5, 5, 5] becomes [5, 9], not [9, 5]")
def _(ids, pair, new_id):
    out = []
    i = len(ids) - 1
    while i >= 0:
        if i > 0 and ids[i - 1] == pair[0] and ids[i] == pair[1]:
            out.append(new_id)
            i -= 2
        else:
            out.append(ids[i])
            i -= 1
    return out[::-1]


@bug("merge", "returns_a_tuple", "returns tuple(out): a tuple, not a list")
def _(ids, pair, new_id):
    return tuple(_right_merge(ids, pair, new_id))


@bug("merge", "second_id_typo", "ids[i + 1] == pair[0] (a typo): only pairs of equal ids merge")
def _(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[0]:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


_bpe_bug(
    "tie_by_first_id",
    "min by (-count, pair[0]): a tie between pairs that share a first id goes to the one seen first",
    pick=lambda counts: min(counts, key=lambda p: (-counts[p], p[0])),
)
_bpe_bug(
    "tie_to_largest_pair",
    "max(counts, key=lambda p: (counts[p], p)): a tie goes to the largest pair",
    pick=lambda counts: max(counts, key=lambda p: (counts[p], p)),
)
_bpe_bug(
    "distinct_chunks_once",
    "counts each distinct chunk once (a set of chunks): a repeated chunk counts once",
    chunks_of=lambda text: [list(c.encode("utf-8")) for c in dict.fromkeys(pretokenize(text))],
)
_bpe_bug(
    "stops_at_single_pairs",
    "stops when the best pair occurs only once: pairs seen once are never merged",
    least=2,
)


@bug.input("train_bpe", "refuses_only_non_positive", "vocab_size < 1 raises: 255 or 100 give {}")
def _(text, vocab_size):
    return _train(_byte_chunks(text), vocab_size, minimum=1)


@bug.input("train_bpe", "no_size_check", "no check: a vocab_size below 256 gives {}, no error")
def _(text, vocab_size):
    return _train(_byte_chunks(text), vocab_size, minimum=-math.inf)


@bug.input(
    "train_bpe", "assert_not_raise", "assert vocab_size >= 256: AssertionError, not ValueError"
)
def _(text, vocab_size):
    assert vocab_size >= 256, "vocab_size must be at least 256"
    return _train(_byte_chunks(text), vocab_size)


def _encode_merging(bug_id, description):
    """Register ``_encode`` with the decorated ``merged(ids, merges)`` as a buggy encode."""

    def register(merged):
        _encode_bug(bug_id, description, merged=merged)
        return merged

    return register


@_encode_merging(
    "smallest_pair_not_rank",
    "merges the smallest pair (as a tuple) first, not the one learned first",
)
def _(ids, merges):
    while True:
        mergeable = [pair for pair in itertools.pairwise(ids) if pair in merges]
        if not mergeable:
            return ids
        ids = _right_merge(ids, min(mergeable), merges[min(mergeable)])


@_encode_merging(
    "leftmost_first", "merges the leftmost pair that has a merge first, not the one learned first"
)
def _(ids, merges):
    while True:
        mergeable = [pair for pair in itertools.pairwise(ids) if pair in merges]
        if not mergeable:
            return ids
        ids = _right_merge(ids, mergeable[0], merges[mergeable[0]])


@bug(
    "encode",
    "returns_after_first_chunk",
    "return inside the loop over chunks: only the first chunk is encoded",
)
def _(text, merges):
    for chunk in pretokenize(text):
        return _merge_by_rank(list(chunk.encode("utf-8")), merges)
    return []


@bug.input(
    "decode", "negative_ids_from_end", "checks only id >= len(table): -1 decodes as the last token"
)
def _(ids, merges):
    table = _table(merges)
    ids = [int(i) for i in ids]
    if any(i >= len(table) for i in ids):
        raise ValueError("token id outside the vocabulary")
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


@bug.input(
    "decode", "no_id_check", "no check: a too large id raises IndexError, a negative one decodes"
)
def _(ids, merges):
    table = _table(merges)
    return b"".join(table[int(i)] for i in ids).decode("utf-8", errors="replace")


@bug.input(
    "decode",
    "bound_off_by_one",
    "id > len(table) raises: the first id past the end gives IndexError",
)
def _(ids, merges):
    table = _table(merges)
    ids = [int(i) for i in ids]
    if any(not 0 <= i <= len(table) for i in ids):
        raise ValueError("token id outside the vocabulary")
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")


# ---------------------------------------------------------- correct answers written differently


@correct("count_pairs", "counter")
def _(ids):
    return dict(Counter(itertools.pairwise(ids)))


@correct("count_pairs", "counter_returned_as_is")
def _(ids):
    return Counter(itertools.pairwise(ids))  # a dict subclass: it must arrive as a dict


@correct("merge", "for_loop_with_skip")
def _(ids, pair, new_id):
    out, skip = [], False
    for i, token in enumerate(ids):
        if skip:
            skip = False
        elif i + 1 < len(ids) and token == pair[0] and ids[i + 1] == pair[1]:
            out.append(new_id)
            skip = True
        else:
            out.append(token)
    return out


@correct("train_bpe", "distinct_chunks_with_counts")
def _(text, vocab_size):
    if vocab_size < 256:
        raise ValueError("vocab_size must be at least 256")
    words = {tuple(chunk.encode("utf-8")): n for chunk, n in Counter(pretokenize(text)).items()}
    merges = {}
    for new_id in range(256, vocab_size):
        counts = Counter()
        for word, n in words.items():
            for pair in itertools.pairwise(word):
                counts[pair] += n
        if not counts:
            break
        best = min(counts.items(), key=lambda item: (-item[1], item[0]))[0]
        merges[best] = new_id
        merged = Counter()
        for word, n in words.items():
            merged[tuple(_right_merge(list(word), best, new_id))] += n
        words = merged
    return merges


@correct("encode", "every_merge_once_in_order")
def _(text, merges):
    ids = []
    for chunk in pretokenize(text):
        chunk_ids = list(chunk.encode("utf-8"))
        for pair, new_id in merges.items():  # learned order: a later merge sees earlier ones
            chunk_ids = _right_merge(chunk_ids, pair, new_id)
        ids.extend(chunk_ids)
    return ids


@correct("decode", "recursive_lookup")
def _(ids, merges):
    parts = {new_id: pair for pair, new_id in merges.items()}

    def spelled(token):
        if token < 256:
            return bytes([token])
        return spelled(parts[token][0]) + spelled(parts[token][1])

    ids = [int(i) for i in ids]
    if any(not 0 <= i < 256 + len(merges) for i in ids):
        raise ValueError("token id outside the vocabulary")
    return b"".join(spelled(i) for i in ids).decode("utf-8", "replace")


@correct("count_pairs", "list_count")
def _(ids):
    pairs = [(ids[i], ids[i + 1]) for i in range(len(ids) - 1)]
    return {pair: pairs.count(pair) for pair in dict.fromkeys(pairs)}


@correct("merge", "recursive")
def _(ids, pair, new_id):
    def merged(rest):
        if len(rest) < 2:
            return list(rest)
        if (rest[0], rest[1]) == tuple(pair):
            return [new_id, *merged(rest[2:])]
        return [rest[0], *merged(rest[1:])]

    return merged(list(ids))


@correct("train_bpe", "sorted_counts_of_words")
def _(text, vocab_size):
    if not vocab_size >= 256:
        raise ValueError(f"a vocabulary of {vocab_size} tokens cannot hold the 256 bytes")
    words = [tuple(chunk.encode("utf-8")) for chunk in pretokenize(text)]
    merges = {}
    while len(merges) < vocab_size - 256:
        counts = Counter(p for word in words for p in itertools.pairwise(word))
        if not counts:
            break
        (best, _), *_ = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        new_id = 256 + len(merges)
        merges[best] = new_id
        words = [tuple(_right_merge(list(word), best, new_id)) for word in words]
    return merges


@correct("encode", "index_of_lowest_rank")
def _(text, merges):
    out = []
    for chunk in pretokenize(text):
        ids = list(chunk.encode("utf-8"))
        while True:
            ranks = [merges.get((a, b), math.inf) for a, b in itertools.pairwise(ids)]
            if not ranks or min(ranks) == math.inf:
                break
            pair = (ids[ranks.index(min(ranks))], ids[ranks.index(min(ranks)) + 1])
            ids = _right_merge(ids, pair, merges[pair])
        out += ids
    return out


@correct("decode", "bytearray_and_bounds")
def _(ids, merges):
    spelled = [bytes([b]) for b in range(256)]
    for a, b in merges:
        spelled.append(spelled[a] + spelled[b])
    text = bytearray()
    for token in ids:
        if token < 0 or token >= len(spelled):
            raise ValueError(f"no token has id {token}")
        text += spelled[token]
    return text.decode("utf-8", "replace")
