"""The counting language model of chapter 1, checked against hand-computed cases."""

import collections
import itertools

import numpy as np
import pytest

from mini_llm.ngram import (
    average_nll,
    bigram_probabilities,
    count_bigrams,
    count_ngrams,
    ngram_windows,
    sample_sequence,
    sequence_probability,
    unigram_probabilities,
)
from mini_llm.vocab import BOS, EOS, Vocabulary

SEED_TEXT = ["datawhale agent learns", "datawhale agent works"]


@pytest.fixture
def seed():
    sentences = [s.split() for s in SEED_TEXT]
    vocab = Vocabulary.from_sequences(sentences, specials=())
    return vocab, [vocab.encode(s) for s in sentences]


def test_datawhale_example_in_the_seed_convention(seed):
    vocab, sequences = seed
    probs = bigram_probabilities(count_bigrams(sequences, len(vocab)))
    unigram = unigram_probabilities(sequences, len(vocab))
    p = sequence_probability(vocab.encode(["datawhale", "agent", "learns"]), probs, unigram)
    assert p == pytest.approx(2 / 6 * 2 / 2 * 1 / 2)
    assert round(p, 3) == 0.167


def test_datawhale_example_with_boundary_tokens():
    sentences = [s.split() for s in SEED_TEXT]
    vocab = Vocabulary.from_sequences(sentences)
    sequences = [vocab.encode_with_boundaries(s) for s in sentences]
    probs = bigram_probabilities(count_bigrams(sequences, len(vocab)))
    framed = vocab.encode_with_boundaries(["datawhale", "agent", "learns"])
    assert sequence_probability(framed, probs) == pytest.approx(1 * 1 * 0.5 * 1)
    unseen = vocab.encode_with_boundaries(["datawhale", "learns"])
    assert sequence_probability(unseen, probs) == 0.0


def test_counts_match_a_counter_and_never_cross_sequences():
    rng = np.random.default_rng(1)
    sequences = [rng.integers(0, 7, size=rng.integers(0, 30)) for _ in range(40)]
    expected = collections.Counter(
        (int(a), int(b)) for s in sequences for a, b in itertools.pairwise(s)
    )
    counts = count_bigrams(sequences, 7)
    assert counts.shape == (7, 7)
    assert {(a, b): int(counts[a, b]) for a, b in zip(*np.nonzero(counts))} == dict(expected)


def test_count_ngrams_general_n_matches_a_counter():
    rng = np.random.default_rng(2)
    sequences = [rng.integers(0, 5, size=25) for _ in range(10)]
    for n in (1, 2, 3, 4):
        grams, counts = count_ngrams(sequences, n, 5)
        expected = collections.Counter(
            tuple(int(t) for t in s[i : i + n]) for s in sequences for i in range(len(s) - n + 1)
        )
        assert dict(zip(map(tuple, grams.tolist()), counts.tolist())) == dict(expected)
        assert grams.tolist() == sorted(grams.tolist())


def test_count_ngrams_with_a_vocabulary_too_large_to_pack():
    ids = np.array([10**6, 3, 10**6, 3, 10**6])
    grams, counts = count_ngrams(ids, 4, vocab_size=10**6 + 1)
    assert grams.tolist() == [[3, 10**6, 3, 10**6], [10**6, 3, 10**6, 3]]
    assert counts.tolist() == [1, 1]


def test_rows_are_distributions_and_empty_rows_are_uniform():
    counts = np.array([[0, 2, 2], [0, 0, 0], [1, 0, 3]])
    probs = bigram_probabilities(counts)
    assert np.allclose(probs.sum(axis=1), 1)
    assert np.allclose(probs[0], [0, 0.5, 0.5])
    assert np.allclose(probs[1], [1 / 3] * 3)
    assert np.allclose(probs[2], [0.25, 0, 0.75])


def test_sampling_is_reproducible_and_stops_at_the_end_token():
    names = ["anna", "bob", "ada", "abba"]
    vocab = Vocabulary.from_sequences(names)
    probs = bigram_probabilities(
        count_bigrams([vocab.encode_with_boundaries(n) for n in names], len(vocab))
    )
    start, end = vocab.stoi[BOS], vocab.stoi[EOS]
    first = [sample_sequence(probs, np.random.default_rng(7), start, end) for _ in range(3)]
    again = [sample_sequence(probs, np.random.default_rng(7), start, end) for _ in range(3)]
    assert first == again
    samples = [sample_sequence(probs, np.random.default_rng(s), start, end) for s in range(50)]
    assert all(end not in s and start not in s for s in samples)
    assert len({tuple(s) for s in samples}) > 5  # it really samples
    # every step follows a bigram seen in training
    for s in samples:
        path = [start, *s, end] if len(s) < 100 else [start, *s]
        assert all(probs[a, b] > 0 for a, b in itertools.pairwise(path))


def test_sampling_needs_a_generator():
    probs = np.full((3, 3), 1 / 3)
    with pytest.raises(TypeError, match="numpy.random.Generator"):
        sample_sequence(probs, 0, 0, 2)


def test_average_nll_uniform_and_zero_probability():
    probs = np.full((4, 4), 0.25)
    assert average_nll([np.array([0, 1, 2, 3])], probs) == pytest.approx(np.log(4))
    peaked = bigram_probabilities(np.array([[0, 1], [1, 0]]))
    assert average_nll(np.array([0, 1, 0]), peaked) == 0.0
    assert average_nll(np.array([0, 0]), peaked) == np.inf


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: count_bigrams([], 3), "empty"),
        (lambda: count_bigrams([np.array([], dtype=int)], 3), "empty"),
        (lambda: count_bigrams([np.array([0, 5])], 3), "token id 5 is outside"),
        (lambda: ngram_windows(np.array([1, 2]), 0), "n must be a whole number >= 1"),
        (lambda: count_ngrams(np.array([1, 2]), -1, 3), "n must be"),
        (lambda: bigram_probabilities(np.ones((2, 3))), "square"),
        (lambda: sequence_probability([], np.ones((2, 2))), "at least one token"),
        (lambda: average_nll([np.array([1])], np.ones((2, 2))), "no bigram"),
    ],
)
def test_bad_input_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
