"""Chapter 4 -- Word embeddings.

Word embeddings learned by skip-gram with negative sampling (word2vec, Mikolov et al. 2013).

A word is known by the company it keeps: skip-gram learns, for every word, a vector that is good
at telling which words occur near it. Each position of the text gives (center, context) pairs for
the words up to ``window`` places away; the model scores a pair by the dot product of the
center's vector and the context's vector. Instead of a softmax over the whole vocabulary it
learns a cheaper yes/no question: is this a real pair, or a word drawn at random ("noise")?

    loss = −log σ(u_c · v_o) − Σₖ log σ(−u_c · v_k),   k = 1..K noise words

Words that appear in similar contexts end up with similar vectors, which is what
:func:`nearest_neighbours` and :func:`analogy` look at, by cosine similarity.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mini_llm.vocab import Vocabulary, word_tokens


def frequent_words(
    documents: Iterable[str], min_count: int = 5
) -> tuple[Vocabulary, np.ndarray, list[np.ndarray]]:
    """The words of ``documents`` that occur at least ``min_count`` times.

    Returns the vocabulary (most frequent word first), each word's count, and every document
    as an array of word ids with the rarer words dropped -- too rare to learn a vector from, as
    in word2vec.
    """
    if min_count < 1:
        raise ValueError(f"min_count must be at least 1, got {min_count}")
    tokenised = [word_tokens(document) for document in documents]
    counts = Counter(word for words in tokenised for word in words)
    kept = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
    if not kept:
        raise ValueError(f"no word occurs {min_count} times or more: lower min_count")
    vocab = Vocabulary(kept)
    documents_ids = [
        np.array([vocab.stoi[w] for w in words if w in vocab.stoi], dtype=np.int64)
        for words in tokenised
    ]
    return vocab, np.array([counts[w] for w in kept], dtype=np.int64), documents_ids


def subsample_frequent(
    ids: np.ndarray, counts: np.ndarray, rng: np.random.Generator, threshold: float = 1e-4
) -> np.ndarray:
    """``ids`` with very frequent words randomly thinned out.

    A word making up a fraction f of the text is kept with probability min(1, √(t/f)) for the
    threshold t: "the" and "and" then stop dominating the pairs, and the words left move closer
    together, so the window reaches further.
    """
    frequency = counts / counts.sum()
    keep = np.minimum(1.0, np.sqrt(threshold / frequency))
    ids = np.asarray(ids, dtype=np.int64)
    return ids[rng.random(ids.size) < keep[ids]]


def skipgram_pairs(ids: Sequence[int] | np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (center, context) pair of one sequence: positions 1 to ``window`` apart, both ways.

    Returned as two int64 arrays of equal length, ``centers`` and ``contexts``. A sequence of
    n ids has 2·Σ_{d=1..window} max(n − d, 0) pairs; a pair never crosses into another sequence.
    """
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    centers, contexts = [], []
    for distance in range(1, min(window, max(ids.size - 1, 0)) + 1):
        left, right = ids[:-distance], ids[distance:]
        centers += [left, right]  # the word on the left sees the right one, and vice versa
        contexts += [right, left]
    if not centers:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(centers), np.concatenate(contexts)


def noise_distribution(counts: Sequence[int] | np.ndarray, power: float = 0.75) -> np.ndarray:
    """Probabilities of drawing each word as noise: proportional to count ** ``power``.

    With power 1 the noise would be almost all "the" and "and"; with 0 it would be uniform.
    word2vec's 0.75 lifts the rare words a little.
    """
    counts = np.asarray(counts, dtype=np.float64)
    if counts.ndim != 1 or counts.size == 0 or (counts < 0).any() or counts.sum() == 0:
        raise ValueError("counts must be a non-empty 1-D array of non-negative counts, not all 0")
    weights = counts**power * (counts > 0)  # a word never seen is never drawn (0 ** 0 is 1)
    return weights / weights.sum()


def negative_sampling_loss(scores: torch.Tensor) -> torch.Tensor:
    """Mean loss of a batch of scores (B, 1 + K): column 0 a real pair, the rest noise.

    −log σ(s) for the real pair plus −log σ(−s) for each noise word, summed per row and averaged
    over the rows. ``logsigmoid`` keeps it finite even for scores far from 0.
    """
    real, noise = scores[:, 0], scores[:, 1:]
    return -(F.logsigmoid(real) + F.logsigmoid(-noise).sum(dim=1)).mean()


class SkipGram(nn.Module):
    """Two tables of word vectors: one for a word as the center, one for it as the context.

    ``forward(centers, candidates)`` scores each center (B,) against its candidates (B, 1 + K)
    -- the real context first, then K noise words -- and returns ``(scores, loss)``, so the
    course's training loop (:func:`mini_llm.engine.train.train`) trains it like any other model.
    """

    def __init__(self, vocab_size: int, dim: int):
        super().__init__()
        self.center = nn.Embedding(vocab_size, dim)
        self.context = nn.Embedding(vocab_size, dim)
        # word2vec's start: small random centers, zero contexts (every score starts at 0).
        nn.init.uniform_(self.center.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.context.weight)

    def forward(self, centers: torch.Tensor, candidates: torch.Tensor):
        # Rows looked up with index_select rather than by calling the nn.Embedding: the same
        # vectors, but its backward (an index_add) is about 3x faster on the CPU.
        u = self.center.weight.index_select(0, centers)  # (B, d)
        v = self.context.weight.index_select(0, candidates.reshape(-1))
        scores = (u.unsqueeze(1) * v.view(*candidates.shape, -1)).sum(dim=-1)  # (B, 1 + K)
        return scores, negative_sampling_loss(scores)

    def vectors(self) -> torch.Tensor:
        """The learned word vectors (the center table), detached."""
        return self.center.weight.detach()


class SkipGramBatches:
    """Random batches of ``(centers, candidates)`` for :class:`SkipGram`, from a seeded generator.

    Each call draws ``batch_size`` pairs at random and ``negatives`` noise words per pair.
    """

    def __init__(
        self,
        centers: np.ndarray,
        contexts: np.ndarray,
        noise: np.ndarray,
        batch_size: int = 1024,
        negatives: int = 5,
        seed: int = 0,
    ):
        if len(centers) == 0 or len(centers) != len(contexts):
            raise ValueError("need a non-empty, equal number of centers and contexts")
        self.centers = torch.as_tensor(centers, dtype=torch.long)
        self.contexts = torch.as_tensor(contexts, dtype=torch.long)
        self.noise = torch.as_tensor(noise, dtype=torch.float)
        self.batch_size, self.negatives = batch_size, negatives
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.randint(len(self.centers), (self.batch_size,), generator=self.generator)
        noise = torch.multinomial(
            self.noise, self.batch_size * self.negatives, replacement=True, generator=self.generator
        ).view(self.batch_size, -1)
        return self.centers[rows], torch.cat([self.contexts[rows, None], noise], dim=1)

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


def _unit_rows(embeddings) -> torch.Tensor:
    vectors = torch.as_tensor(embeddings, dtype=torch.float64)
    return vectors / vectors.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _most_similar(
    unit_vectors: torch.Tensor, target: torch.Tensor, k: int, exclude: Iterable[int]
) -> list[int]:
    """Ids of the ``k`` rows with the highest cosine to ``target``; ties go to the lower id."""
    similarity = (unit_vectors @ (target / target.norm().clamp_min(1e-12))).numpy()
    excluded = {int(i) for i in exclude}
    order = np.argsort(-similarity, kind="stable")
    return [int(i) for i in order if int(i) not in excluded][:k]  # also when k >= V


def _checked_ids(embeddings, *ids: int) -> None:
    size = len(embeddings)
    for i in ids:
        if not 0 <= int(i) < size:
            raise ValueError(f"word id {i} is outside the embedding table (0 .. {size - 1})")


def nearest_neighbours(embeddings, query: int, k: int = 10) -> list[int]:
    """The ``k`` word ids whose vectors have the highest cosine similarity to word ``query``'s,
    most similar first, the query itself left out. ``embeddings`` is (V, d)."""
    _checked_ids(embeddings, query)
    unit = _unit_rows(embeddings)
    return _most_similar(unit, unit[int(query)], k, exclude=[query])


def analogy(embeddings, a: int, b: int, c: int, k: int = 1) -> list[int]:
    """ "``a`` is to ``b`` as ``c`` is to ?": the ``k`` words nearest to b − a + c.

    The three vectors are normalised first, so that a word whose vector happens to be long does
    not dominate the sum (a vector's length tracks how often and in how many contexts its word
    was seen, not its meaning); the answer is ranked by cosine similarity and may not be a, b
    or c. For man : king :: woman : ?, pass a=man, b=king, c=woman.
    """
    _checked_ids(embeddings, a, b, c)
    unit = _unit_rows(embeddings)
    return _most_similar(unit, unit[int(b)] - unit[int(a)] + unit[int(c)], k, exclude=[a, b, c])
